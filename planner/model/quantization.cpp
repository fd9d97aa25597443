// quantization_config -> weight formats and stored bytes. Each scheme's tensors as its checkpoints
// store them (per quantized matrix [k in, n out]):
//   fp8 (HF FineGrainedFP8 / vLLM Fp8Config): e4m3 weight; weight_block_size [bn, bk] -> fp32
//     weight_scale_inv per tile, else one fp32 scale per tensor (+ input_scale when static).
//   compressed-tensors: per config group, weights {num_bits, type, strategy, group_size,
//     block_structure, symmetric}: 4-bit packed 8 per int32 with bf16 group scales (W4A16) and
//     packed zero points when asymmetric; 8-bit int/float with tensor/channel/block scales.
//   awq: qweight int32 [k, n/8], scales fp16 [k/g, n], qzeros int32 [k/g, n/8].
//   gptq: qweight int32 [k*bits/32, n], scales fp16 [k/g, n], qzeros [k/g, n*bits/32], g_idx int32 [k].
//   mxfp4 (gpt-oss): experts only, 4-bit blocks with one uint8 (e8m0) scale per 32.
//   bitsandbytes: 4-bit nf4/fp4 with an absmax per 64 weights (fp32, or uint8 + fp32 per 256 with
//     double quant); 8-bit with one fp32 scale per output row.
#include "planner/model/quantization.hpp"

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"

namespace peerplan {

double stored_bytes(const WeightFormat& f, int64_t k, int64_t n, int64_t count, int dense_bytes) {
  const double K = double(k), N = double(n), C = double(count);
  if (f.scales == ScaleLayout::Ggml) return K * N * C * f.bits_per_weight / 8.0;
  if (f.scales == ScaleLayout::None && (f.dtype == DType::BF16 || f.dtype == DType::FP16))
    return K * N * C * double(dense_bytes);
  double b = K * N * dtype_bits(f.dtype) / 8.0;
  switch (f.scales) {
    case ScaleLayout::None: break;
    case ScaleLayout::Tensor: b += f.scale_bytes; break;
    case ScaleLayout::Channel: b += N * f.scale_bytes; break;
    case ScaleLayout::Group: {
      const double groups = std::ceil(K / double(f.group > 0 ? f.group : k)) * N;
      b += groups * (f.scale_bytes + f.zero_bits / 8.0 + f.extra_scale_bytes);
      break;
    }
    case ScaleLayout::Ggml: break;  // returned above
    case ScaleLayout::Block:
      b += std::ceil(K / double(f.block_k)) * std::ceil(N / double(f.block_n)) * f.scale_bytes;
      break;
  }
  b += K * f.index_bytes_per_k;
  return b * C;
}

std::string describe(const WeightFormat& f) {
  if (f.scales == ScaleLayout::None) return dtype_name(f.dtype);
  auto sb = [&] {
    return f.scale_bytes == 4 ? "fp32" : f.scale_bytes == 2 ? "fp16" : f.scale_bytes == 1 ? "8-bit" : "?";
  };
  std::string s = dtype_name(f.dtype);
  switch (f.scales) {
    case ScaleLayout::None: break;
    case ScaleLayout::Tensor: s += fmt::format(", per-tensor scale ({})", sb()); break;
    case ScaleLayout::Channel: s += fmt::format(", per-channel scales ({})", sb()); break;
    case ScaleLayout::Group: s += fmt::format(", group {} scales ({})", f.group, sb()); break;
    case ScaleLayout::Block: s += fmt::format(", {}x{} block scales ({})", f.block_n, f.block_k, sb()); break;
    case ScaleLayout::Ggml: return fmt::format("ggml {} ({:.2f} bits per weight, scales in the blocks)", f.ggml_types,
                                               f.bits_per_weight);
  }
  if (f.zero_bits > 0) s += fmt::format(" + {:g}-bit zero points", f.zero_bits);
  if (f.extra_scale_bytes > 0) s += " + double-quantized absmax";
  if (f.index_bytes_per_k > 0) s += " + g_idx";
  return s;
}

namespace {

std::vector<std::string> string_list(const JsonIn& q, const std::string& key) {
  std::vector<std::string> out;
  auto v = q.opt(key);
  if (!v) return out;
  if (!v->is_array()) q.fail(key, "an array of module names or patterns (or null)");
  for (size_t i = 0; i < v->size(); ++i) out.push_back((*v)[i].as_str());
  return out;
}

WeightFormat group_format(DType t, int64_t group, double scale_bytes, double zero_bits) {
  WeightFormat f;
  f.dtype = t;
  f.scales = ScaleLayout::Group;
  f.group = group;
  f.scale_bytes = scale_bytes;
  f.zero_bits = zero_bits;
  return f;
}

void read_fp8(const JsonIn& q, Quantization& r) {
  const std::string fmt_ = q.str_or("fmt", "e4m3");
  if (fmt_ != "e4m3") q.fail("fmt", "\"e4m3\" (the only FP8 weight format the planner prices), got '" + fmt_ + "'");
  r.linear.dtype = DType::FP8_E4M3;
  r.linear.scale_bytes = 4;
  if (auto b = q.opt("weight_block_size")) {
    if (!b->is_array() || b->size() != 2) q.fail("weight_block_size", "two positive integers [block_n, block_k], e.g. [128, 128]");
    r.linear.scales = ScaleLayout::Block;
    r.linear.block_n = (*b)[0].as_integer();
    r.linear.block_k = (*b)[1].as_integer();
    if (r.linear.block_n <= 0 || r.linear.block_k <= 0)
      q.fail("weight_block_size", "two positive integers [block_n, block_k], e.g. [128, 128]");
  } else {
    r.linear.scales = ScaleLayout::Tensor;
  }
  r.activation_scheme = q.str_or("activation_scheme", "dynamic");
  if (r.activation_scheme != "dynamic" && r.activation_scheme != "static")
    q.fail("activation_scheme", "\"dynamic\" or \"static\", got '" + r.activation_scheme + "'");
  if (r.activation_scheme == "static") r.linear.scale_bytes = 8;  // weight_scale + input_scale, fp32 each
  r.activations = "fp8";
  r.ignore = string_list(q, "modules_to_not_convert");
  for (const auto& s : string_list(q, "ignored_layers")) r.ignore.push_back(s);
}

void read_compressed_tensors(const JsonIn& q, Quantization& r) {
  JsonIn groups = q.object("config_groups");
  const json& raw = groups.raw();
  if (raw.empty()) q.fail("config_groups", "at least one quantization group");
  // Every shipped checkpoint has one group targeting Linear; with several, the first one that
  // targets Linear (or the first) describes the Linear layers.
  std::string chosen = raw.begin().key();
  for (auto it = raw.begin(); it != raw.end(); ++it) {
    JsonIn g = groups.object(it.key());
    for (const auto& t : string_list(g, "targets"))
      if (t == "Linear") { chosen = it.key(); break; }
  }
  JsonIn g = groups.object(chosen);
  JsonIn w = g.object("weights");
  const int64_t bits = w.positive_int("num_bits");
  const std::string type = w.str_or("type", "int");
  const std::string strategy = w.str_or("strategy", "tensor");
  const bool sym = w.boolean_or("symmetric", true);
  DType t;
  if (type == "float" && bits == 8) t = DType::FP8_E4M3;
  else if (type == "int" && bits == 8) t = DType::INT8;
  else if (type == "int" && bits == 4) t = DType::INT4;
  else w.fail("num_bits", fmt::format("8-bit float, 8-bit int or 4-bit int weights, got {}-bit {}", bits, type));
  WeightFormat f;
  f.dtype = t;
  if (strategy == "tensor") {
    f.scales = ScaleLayout::Tensor, f.scale_bytes = 4;
  } else if (strategy == "channel") {
    f.scales = ScaleLayout::Channel, f.scale_bytes = 2;
  } else if (strategy == "group") {
    f = group_format(t, w.positive_int("group_size"), 2, sym ? 0 : double(bits));
  } else if (strategy == "block") {
    JsonIn bs = w.array("block_structure");
    if (bs.size() != 2) w.fail("block_structure", "two positive integers [block_n, block_k]");
    f.scales = ScaleLayout::Block, f.block_n = bs[0].as_integer(), f.block_k = bs[1].as_integer(), f.scale_bytes = 4;
    if (f.block_n <= 0 || f.block_k <= 0) w.fail("block_structure", "two positive integers [block_n, block_k]");
  } else {
    w.fail("strategy", "\"tensor\", \"channel\", \"group\" or \"block\", got '" + strategy + "'");
  }
  if (!sym && f.scales != ScaleLayout::Group) f.scale_bytes *= 2;  // a zero point per scale
  r.linear = f;
  if (auto a = g.opt("input_activations"); a && a->is_object()) {
    const int64_t abits = a->positive_int("num_bits");
    const std::string atype = a->str_or("type", "int");
    r.activations = abits == 8 ? (atype == "float" ? "fp8" : "int8") : "bf16";
    r.activation_scheme = a->boolean_or("dynamic", false) ? "dynamic" : "static";
  }
  r.ignore = string_list(q, "ignore");
  r.lm_head = true;  // targets "Linear" covers lm_head unless the ignore list names it
  if (auto kv = q.opt("kv_cache_scheme"); kv && kv->is_object()) {
    const int64_t kbits = kv->positive_int("num_bits");
    if (kbits == 8 && kv->str_or("type", "float") == "float") r.kv_dtype = DType::FP8_E4M3;
    else kv->fail("num_bits", "an 8-bit float KV cache (the only quantized KV cache the planner models)");
  }
}

void read_awq(const JsonIn& q, Quantization& r) {
  const int64_t bits = q.has("bits") ? q.positive_int("bits") : q.positive_int("w_bit");
  if (bits != 4) q.fail("bits", fmt::format("4 (AWQ checkpoints are 4-bit), got {}", bits));
  const int64_t g = q.has("group_size") ? q.positive_int("group_size") : q.positive_int("q_group_size");
  const bool zp = q.boolean_or("zero_point", true);
  r.linear = group_format(DType::INT4, g, 2, zp ? 4 : 0);
  r.ignore = string_list(q, "modules_to_not_convert");
}

void read_gptq(const JsonIn& q, Quantization& r) {
  const int64_t bits = q.positive_int("bits");
  if (bits != 4 && bits != 8) q.fail("bits", fmt::format("4 or 8, got {}", bits));
  const int64_t g = q.integer_or("group_size", 128);
  if (g != -1 && g <= 0) q.fail("group_size", fmt::format("a positive group size or -1 (per channel), got {}", g));
  // GPTQ stores qzeros even when symmetric (the packed value of the midpoint), and g_idx always.
  r.linear = group_format(bits == 4 ? DType::INT4 : DType::INT8, g == -1 ? 0 : g, 2, double(bits));
  r.linear.index_bytes_per_k = 4;
  r.lm_head = q.boolean_or("lm_head", false);
  r.ignore = string_list(q, "modules_to_not_convert");
}

void read_bnb(const JsonIn& q, Quantization& r) {
  const bool four = q.boolean_or("load_in_4bit", false);
  const bool eight = q.boolean_or("load_in_8bit", false);
  if (four == eight) q.fail("load_in_4bit", "exactly one of load_in_4bit and load_in_8bit set to true");
  if (four) {
    const bool dq = q.boolean_or("bnb_4bit_use_double_quant", false);
    r.linear = group_format(DType::INT4, 64, dq ? 1 : 4, 0);
    if (dq) r.linear.extra_scale_bytes = 4.0 / 256.0;
  } else {
    r.linear.dtype = DType::INT8, r.linear.scales = ScaleLayout::Channel, r.linear.scale_bytes = 4;
  }
  r.ignore = string_list(q, "llm_int8_skip_modules");
}

}  // namespace

Quantization parse_quantization(const JsonIn& q) {
  if (!q.is_object()) q.fail("", "an object with quant_method");
  Quantization r;
  r.source = "quantization_config";
  r.method = q.str("quant_method");
  if (r.method == "fp8") read_fp8(q, r);
  else if (r.method == "compressed-tensors") read_compressed_tensors(q, r);
  else if (r.method == "awq") read_awq(q, r);
  else if (r.method == "gptq") read_gptq(q, r);
  else if (r.method == "bitsandbytes") read_bnb(q, r);
  else if (r.method == "mxfp4") {
    r.linear = group_format(DType::MXFP4, 32, 1, 0);
    r.experts_only = true;
    r.ignore = string_list(q, "modules_to_not_convert");
  } else {
    q.fail("quant_method", "one of fp8, compressed-tensors, awq, gptq, mxfp4, bitsandbytes; got '" + r.method +
                               "' (use --weights to plan it as a format the planner knows)");
  }
  return r;
}

Quantization weights_override(DType weights) {
  Quantization r;
  r.source = std::string("--weights ") + dtype_name(weights);
  switch (weights) {
    case DType::BF16: r.method = "none"; return r;
    case DType::FP8_E4M3:
      r.linear.dtype = DType::FP8_E4M3, r.linear.scales = ScaleLayout::Channel, r.linear.scale_bytes = 4;
      r.activations = "fp8", r.activation_scheme = "dynamic";
      break;
    case DType::INT8:
      r.linear.dtype = DType::INT8, r.linear.scales = ScaleLayout::Channel, r.linear.scale_bytes = 4;
      r.activations = "int8", r.activation_scheme = "dynamic";
      break;
    case DType::INT4:
      r.linear = group_format(DType::INT4, 128, 2, 0);
      break;
    default:
      throw InputError("--weights", "", std::string("one of bf16, fp8, int8, int4; got ") + dtype_name(weights));
  }
  r.method = r.source;
  return r;
}

std::vector<std::string> weights_choices() { return {"bf16", "fp8", "int8", "int4"}; }
std::vector<std::string> kv_dtype_choices() { return {"bf16", "fp8"}; }

std::vector<std::string> module_names(const std::string& matrix, int64_t layer, const std::string& model_type) {
  if (matrix == "embedding") return {"model.embed_tokens"};
  if (matrix == "lm_head") return {"lm_head"};
  const std::string p = fmt::format("model.layers.{}.", layer);
  const bool oss = model_type == "gpt_oss";
  const bool mixtral = model_type == "mixtral";
  if (matrix == "qkv") return {p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"};
  if (matrix == "o") return {p + "self_attn.o_proj"};
  if (matrix == "q") return {p + "self_attn.q_proj"};
  if (matrix == "q_a") return {p + "self_attn.q_a_proj"};
  if (matrix == "q_b") return {p + "self_attn.q_b_proj"};
  if (matrix == "kv_a") return {p + "self_attn.kv_a_proj_with_mqa"};
  if (matrix == "kv_b") return {p + "self_attn.kv_b_proj"};
  if (matrix == "gate_up") return {p + "mlp.gate_proj", p + "mlp.up_proj"};
  if (matrix == "up") return {p + "mlp.up_proj"};
  if (matrix == "down") return {p + "mlp.down_proj"};
  if (matrix == "router") return {oss ? p + "mlp.router" : mixtral ? p + "block_sparse_moe.gate" : p + "mlp.gate"};
  if (matrix == "expert.gate_up")
    return {oss ? p + "mlp.experts.gate_up_proj" : mixtral ? p + "block_sparse_moe.experts.0.w1" : p + "mlp.experts.0.gate_proj"};
  if (matrix == "expert.down")
    return {oss ? p + "mlp.experts.down_proj" : mixtral ? p + "block_sparse_moe.experts.0.w2" : p + "mlp.experts.0.down_proj"};
  const std::string shared = model_type.rfind("deepseek", 0) == 0 ? "mlp.shared_experts." : "mlp.shared_expert.";
  if (matrix == "shared.gate_up") return {p + shared + "gate_proj", p + shared + "up_proj"};
  if (matrix == "shared.down") return {p + shared + "down_proj"};
  if (matrix == "shared_gate") return {p + "mlp.shared_expert_gate"};
  return {p + matrix};
}

bool module_matches(const std::string& pattern, const std::string& module) {
  if (pattern.rfind("re:", 0) == 0) {
    try {
      return std::regex_search(module, std::regex(pattern.substr(3)), std::regex_constants::match_continuous);
    } catch (const std::regex_error&) {
      throw InputError("quantization_config", "ignore", "a valid regular expression after 're:', got '" + pattern + "'");
    }
  }
  std::string re = "(^|\\.)";
  for (char c : pattern) {
    if (c == '*') re += "[^.]+";
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') re += c;
    else re += std::string("\\") + c;
  }
  re += "(\\.|$)";
  return std::regex_search(module, std::regex(re));
}

bool Quantization::quantized() const {
  auto q = [](const WeightFormat& f) { return f.dtype != DType::BF16 && f.dtype != DType::FP16; };
  if (per_matrix.empty()) return q(linear);
  for (const auto& [key, f] : per_matrix)
    if (q(f)) return true;
  return false;
}

WeightFormat matrix_format(const Quantization& q, const std::string& matrix, int64_t layer,
                           const std::string& model_type, DType dense) {
  WeightFormat d;
  d.dtype = dense;
  if (!q.per_matrix.empty()) {  // GGUF: each matrix as its tensors are stored
    auto it = q.per_matrix.find({layer, matrix});
    return it == q.per_matrix.end() ? d : it->second;
  }
  if (!q.quantized()) return d;
  // Never quantized by these schemes' loaders: the embedding gather and the MoE router (vLLM
  // builds every router gate with quant_config=None); norms and biases are not matrices.
  if (matrix == "embedding" || matrix == "router" || matrix == "shared_gate") return d;
  if (matrix == "lm_head" && !q.lm_head) return d;
  if (q.experts_only && matrix.rfind("expert.", 0) != 0) return d;
  const std::vector<std::string> mods = module_names(matrix, layer, model_type);
  // A fused matrix (q/k/v) is dense only when all its parts are ignored (vLLM refuses mixed ones).
  bool all_ignored = !q.ignore.empty();
  for (const auto& m : mods) {
    bool ign = false;
    for (const auto& p : q.ignore) ign = ign || module_matches(p, m);
    all_ignored = all_ignored && ign;
  }
  return all_ignored ? d : q.linear;
}

}  // namespace peerplan
