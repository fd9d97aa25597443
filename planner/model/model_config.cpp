// HuggingFace config.json -> ModelConfig. Each family reads the keys its transformers config
// class defines, with that class's defaults; everything is validated here so the figures code can
// assume a consistent model.
#include "planner/model/model_config.hpp"

#include <algorithm>
#include <filesystem>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/gguf.hpp"
#include "planner/model/hf_cache.hpp"

namespace peerplan {

namespace {

enum class Family { Llama, Mistral, Qwen2, Phi3, Qwen3, Mixtral, Qwen2Moe, Qwen3Moe, DeepseekV2, DeepseekV3, GptOss };

struct FamilyInfo {
  const char* architecture;
  const char* model_type;
  Family family;
};

// The one table of supported families: architectures[0] and the matching model_type.
constexpr FamilyInfo kFamilies[] = {
    {"LlamaForCausalLM", "llama", Family::Llama},
    {"MistralForCausalLM", "mistral", Family::Mistral},
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2},
    {"Phi3ForCausalLM", "phi3", Family::Phi3},
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3},
    {"MixtralForCausalLM", "mixtral", Family::Mixtral},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::Qwen2Moe},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::Qwen3Moe},
    {"DeepseekV2ForCausalLM", "deepseek_v2", Family::DeepseekV2},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::DeepseekV3},
    {"GptOssForCausalLM", "gpt_oss", Family::GptOss},
};

std::string joined_architectures() {
  std::string s;
  for (const auto& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.architecture);
  return s;
}

const FamilyInfo& detect_family(const JsonIn& in) {
  if (auto archs = in.opt("architectures")) {
    if (!archs->is_array() || archs->size() == 0)
      in.fail("architectures", "expected a non-empty array of architecture names, e.g. [\"LlamaForCausalLM\"]");
    std::string arch = (*archs)[0].as_str();
    for (const auto& f : kFamilies)
      if (arch == f.architecture) return f;
    in.fail("architectures/0", "unknown architecture '" + arch + "'; supported: " + joined_architectures());
  }
  if (in.has("model_type")) {
    std::string mt = in.str("model_type");
    for (const auto& f : kFamilies)
      if (mt == f.model_type) return f;
    in.fail("model_type", "unknown model_type '" + mt + "' (and no architectures field); supported architectures: " +
                              joined_architectures());
  }
  in.fail("architectures", "required field is missing (neither architectures nor model_type is given); supported: " +
                               joined_architectures());
}

int64_t positive_int_or(const JsonIn& in, const std::string& key, int64_t def) {
  return in.has(key) ? in.positive_int(key) : def;
}

void read_dtype(const JsonIn& in, ModelConfig& c) {
  // transformers >= 4.56 writes "dtype"; older configs "torch_dtype". Absent: bfloat16, as shipped checkpoints are.
  std::string key = in.has("torch_dtype") ? "torch_dtype" : (in.has("dtype") ? "dtype" : "");
  if (key.empty()) return;
  std::string d = in.str(key);
  if (d.rfind("torch.", 0) == 0) d = d.substr(6);
  if (d == "bfloat16") c.dtype_bytes = 2;
  else if (d == "float16") c.dtype_bytes = 2;
  else if (d == "float32") c.dtype_bytes = 4;
  else in.fail(key, "unsupported dtype '" + d + "'; expected bfloat16, float16 or float32");
  c.dtype = d;
}

// Common decoder fields: hidden, layers, heads (with head_dim rules), MLP, vocabulary.
void read_common(const JsonIn& in, ModelConfig& c, bool mla) {
  c.hidden = in.positive_int("hidden_size");
  c.layers = in.positive_int("num_hidden_layers");
  c.heads = in.positive_int("num_attention_heads");
  if (in.has("head_dim")) {
    c.head_dim = in.positive_int("head_dim");
  } else if (mla) {
    c.head_dim = 0;  // set from qk_nope_head_dim + qk_rope_head_dim: MLA heads are not hidden / heads
  } else {
    if (c.hidden % c.heads != 0)
      in.fail("num_attention_heads", "must divide hidden_size (" + std::to_string(c.hidden) +
                                         ") when head_dim is absent; found " + std::to_string(c.heads) +
                                         " (add head_dim or fix the head count)");
    c.head_dim = c.hidden / c.heads;
  }
  c.kv_heads = positive_int_or(in, "num_key_value_heads", c.heads);
  if (c.heads % c.kv_heads != 0)
    in.fail("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(c.heads) + "); found " +
                                       std::to_string(c.kv_heads));
  c.intermediate = in.positive_int("intermediate_size");
  c.vocab = in.positive_int("vocab_size");
  c.max_context = in.has("max_position_embeddings") ? in.positive_int("max_position_embeddings") : 0;
  c.tied_embeddings = in.boolean_or("tie_word_embeddings", false);
  read_dtype(in, c);
}

void check_top_k(const JsonIn& in, const ModelConfig& c, const std::string& experts_key) {
  if (c.experts_per_token > c.experts)
    in.fail("num_experts_per_tok", "must not exceed " + experts_key + " (" + std::to_string(c.experts) +
                                       "); found " + std::to_string(c.experts_per_token));
}

// Qwen-MoE style: decoder_sparse_step and mlp_only_layers (layer is MoE if not listed and
// (layer + 1) % step == 0, as Qwen2MoeDecoderLayer decides).
void read_qwen_moe_layout(const JsonIn& in, ModelConfig& c) {
  c.moe_layer_freq = positive_int_or(in, "decoder_sparse_step", 1);
  c.moe_layer_phase = 1;
  if (auto list = in.opt("mlp_only_layers")) {
    if (!list->is_array()) in.fail("mlp_only_layers", "expected an array of layer indices");
    for (size_t i = 0; i < list->size(); ++i) {
      int64_t l = (*list)[i].as_integer();
      if (l < 0 || l >= c.layers)
        (*list)[i].fail("", "layer index must be in [0, " + std::to_string(c.layers) + "); found " + std::to_string(l));
      c.dense_layers.push_back(l);
    }
  }
}

void read_deepseek(const JsonIn& in, ModelConfig& c, bool v3) {
  // n_routed_experts null means a dense DeepSeek model (as DeepseekV2MLP everywhere).
  if (in.has("n_routed_experts")) {
    c.experts = in.positive_int("n_routed_experts");
    c.experts_per_token = in.positive_int("num_experts_per_tok");
    check_top_k(in, c, "n_routed_experts");
    c.expert_intermediate = in.positive_int("moe_intermediate_size");
    c.shared_experts = in.nonnegative_int_or("n_shared_experts", 0);
    c.shared_intermediate = c.shared_experts * c.expert_intermediate;  // one MLP of n_shared * moe_intermediate
    c.first_dense_layers = in.nonnegative_int_or("first_k_dense_replace", 0);
    if (c.first_dense_layers > c.layers)
      in.fail("first_k_dense_replace", "must not exceed num_hidden_layers (" + std::to_string(c.layers) + "); found " +
                                           std::to_string(c.first_dense_layers));
    c.moe_layer_freq = positive_int_or(in, "moe_layer_freq", 1);
    c.moe_layer_phase = 0;
    c.router_bias = v3 && in.str_or("topk_method", "noaux_tc") == "noaux_tc";
  }
  // Multi-head latent attention.
  c.mla = true;
  c.kv_lora_rank = in.positive_int("kv_lora_rank");
  c.q_lora_rank = in.has("q_lora_rank") ? in.positive_int("q_lora_rank") : 0;  // null: full-rank q_proj
  c.qk_rope_head_dim = in.positive_int("qk_rope_head_dim");
  c.qk_nope_head_dim = in.positive_int("qk_nope_head_dim");
  c.v_head_dim = in.positive_int("v_head_dim");
  c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;  // query/key head size
  c.attention_bias = in.boolean_or("attention_bias", false);
}

// layer_types (transformers' per-layer attention kinds: "sliding_attention" with window
// sliding_window, "full_attention"), when the config has it: fills layer_window and returns true.
bool read_layer_types(const JsonIn& in, ModelConfig& c) {
  auto lt = in.opt("layer_types");
  if (!lt) return false;
  if (!lt->is_array() || int64_t(lt->size()) != c.layers)
    in.fail("layer_types", "an array of num_hidden_layers (" + std::to_string(c.layers) +
                               ") entries, each \"sliding_attention\" or \"full_attention\"");
  c.layer_window.clear();
  for (size_t i = 0; i < lt->size(); ++i) {
    std::string t = (*lt)[i].as_str();
    if (t == "sliding_attention") {
      if (c.sliding_window <= 0) in.fail("sliding_window", "a positive window: layer_types has sliding_attention layers");
      c.layer_window.push_back(c.sliding_window);
    } else if (t == "full_attention") {
      c.layer_window.push_back(0);
    } else {
      (*lt)[i].fail("", "\"sliding_attention\" or \"full_attention\", got '" + t + "'");
    }
  }
  return true;
}

// Mistral, Mixtral and Phi-3 (issue 18): a non-null sliding_window is the window of every layer, as
// transformers runs them (MistralAttention / MixtralAttention / Phi3Attention pass
// config.sliding_window to the attention of every layer; the mask is masking_utils'
// sliding_window_overlay, key j visible to query i when i - window < j <= i) and as vLLM does
// (flash-attn window_size = (sliding_window - 1, 0) on every layer). Mistral-7B-v0.1 has 4096;
// v0.2 / v0.3 and Mixtral-8x7B set it to null (full attention). layer_types, where a newer config
// has it, says which layers instead.
void read_window_every_layer(const JsonIn& in, ModelConfig& c) {
  c.sliding_window = in.has("sliding_window") ? in.positive_int("sliding_window") : 0;
  if (c.sliding_window > 0 && !read_layer_types(in, c)) c.layer_window.assign(size_t(c.layers), c.sliding_window);
}

// Qwen2 / Qwen2-MoE: windows only with use_sliding_window (false in every released checkpoint's
// config), then in layers >= max_window_layers (Qwen2Config's rule; default 28), or as
// layer_types says.
void read_qwen2_window(const JsonIn& in, ModelConfig& c) {
  if (!in.boolean_or("use_sliding_window", false)) return;
  c.sliding_window = in.has("sliding_window") ? in.positive_int("sliding_window") : 0;
  if (c.sliding_window <= 0 || read_layer_types(in, c)) return;
  const int64_t first = in.nonnegative_int_or("max_window_layers", 28);
  for (int64_t l = 0; l < c.layers; ++l) c.layer_window.push_back(l >= first ? c.sliding_window : 0);
}

// gpt-oss (transformers GptOssConfig): every layer is MoE with num_local_experts experts of
// intermediate_size (SwiGLU, biases on both expert matrices), a router with a bias, q/k/v/o
// biases, one sink logit per head, and layer_types alternating sliding_attention (window
// sliding_window) and full_attention.
void read_gpt_oss(const JsonIn& in, ModelConfig& c) {
  c.experts = in.positive_int("num_local_experts");
  c.experts_per_token = in.has("num_experts_per_tok") ? in.positive_int("num_experts_per_tok")
                                                      : in.positive_int("experts_per_token");
  check_top_k(in, c, "num_local_experts");
  c.expert_intermediate = c.intermediate;
  c.attention_bias = in.boolean_or("attention_bias", true);
  c.router_bias = true;
  c.expert_bias = true;
  c.attention_sinks = true;
  c.sliding_window = in.has("sliding_window") ? in.positive_int("sliding_window") : 0;
  // GptOssConfig's default without layer_types: even layers sliding, odd layers full.
  if (!read_layer_types(in, c) && c.sliding_window > 0)
    for (int64_t l = 0; l < c.layers; ++l) c.layer_window.push_back(l % 2 == 0 ? c.sliding_window : 0);
}

// Sizes far beyond any real model are typos (or hostile input) and would overflow the int64
// parameter sums: each field has a generous cap, and the whole model must stay under 1e15 params.
void check_plausible(const JsonIn& in, const ModelConfig& c, const std::string& experts_key) {
  struct Cap { const char* key; int64_t value; int64_t max; };
  const Cap caps[] = {
      {"num_hidden_layers", c.layers, 10000},        {"hidden_size", c.hidden, 1 << 20},
      {"num_attention_heads", c.heads, 1 << 16},     {"head_dim", c.head_dim, 1 << 16},
      {"intermediate_size", c.intermediate, 1 << 24}, {"vocab_size", c.vocab, 1 << 24},
      {"max_position_embeddings", c.max_context, int64_t(1) << 32},
      {"moe_intermediate_size", c.expert_intermediate, 1 << 24},
      {"shared_expert_intermediate_size", c.shared_intermediate, 1 << 26},
      {"n_shared_experts", c.shared_experts, 1024},  {"kv_lora_rank", c.kv_lora_rank, 1 << 16},
      {"q_lora_rank", c.q_lora_rank, 1 << 16},       {"qk_rope_head_dim", c.qk_rope_head_dim, 1 << 16},
      {"qk_nope_head_dim", c.qk_nope_head_dim, 1 << 16}, {"v_head_dim", c.v_head_dim, 1 << 16},
      {"moe_layer_freq", c.moe_layer_freq, 10000},
  };
  for (const auto& cap : caps)
    if (cap.value > cap.max)
      in.fail(cap.key, "implausibly large: " + std::to_string(cap.value) + " (at most " + std::to_string(cap.max) +
                           " is accepted); check for a typo");
  if (c.experts > (1 << 16))
    in.fail(experts_key, "implausibly large: " + std::to_string(c.experts) + " experts (at most 65536 is accepted)");
  // A double estimate of the parameter count (routed experts dominate MoE models).
  double h = double(c.hidden);
  double attn = c.mla ? h * double(c.heads) * double(c.head_dim + c.v_head_dim) * 2 + h * double(c.kv_lora_rank + c.q_lora_rank)
                      : h * double(c.heads + c.kv_heads) * double(c.head_dim) * 2;
  double mlp = 3 * h * (double(c.intermediate) + double(c.experts) * double(c.expert_intermediate) + double(c.shared_intermediate));
  double total = double(c.layers) * (attn + mlp) + 2 * h * double(c.vocab);
  if (total > 1e15)
    in.fail("hidden_size", "the sizes in this config give about " + std::to_string(total) +
                               " parameters (over 1e15, a thousand times the largest models); check the sizes for a typo");
}

std::string name_from_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (std::string id = hf_repo_id_of_path(path); !id.empty()) return id;  // a hub cache snapshot: its id, not the hash
  fs::path p(path);
  if (p.filename() == "config.json") {
    std::string dir = p.parent_path().filename().string();
    if (!dir.empty() && dir != "." && dir != "..") return dir;
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec).parent_path();
    if (!ec && !abs.filename().empty()) return abs.filename().string();
  }
  return p.stem().string();
}

ModelConfig from_json(const json& j, const std::string& origin) {
  JsonIn in(j, origin);
  if (!in.is_object()) in.fail("", "expected a JSON object (a HuggingFace config.json)");
  const FamilyInfo& fam = detect_family(in);
  ModelConfig c;
  c.source_file = origin;
  c.architecture = fam.architecture;
  c.model_type = in.str_or("model_type", fam.model_type);
  const bool mla = fam.family == Family::DeepseekV2 || fam.family == Family::DeepseekV3;
  read_common(in, c, mla);

  switch (fam.family) {
    case Family::Llama:
      c.attention_bias = in.boolean_or("attention_bias", false);
      break;
    case Family::Mistral:
    case Family::Phi3:  // fused qkv_proj / gate_up_proj in the weights; the counts are the same
      read_window_every_layer(in, c);
      break;
    case Family::Qwen2:
      c.attention_bias = true;  // Qwen2Attention: q/k/v projections always carry a bias
      read_qwen2_window(in, c);
      break;
    case Family::Qwen3:
      c.attention_bias = in.boolean_or("attention_bias", false);
      c.qk_norm = true;
      break;
    case Family::Mixtral:
      c.experts = in.positive_int("num_local_experts");
      c.experts_per_token = in.positive_int("num_experts_per_tok");
      check_top_k(in, c, "num_local_experts");
      c.expert_intermediate = c.intermediate;  // Mixtral's intermediate_size is each expert's
      read_window_every_layer(in, c);
      break;
    case Family::Qwen2Moe:
      c.attention_bias = true;
      c.experts = in.positive_int("num_experts");
      c.experts_per_token = in.positive_int("num_experts_per_tok");
      check_top_k(in, c, "num_experts");
      c.expert_intermediate = in.positive_int("moe_intermediate_size");
      c.shared_intermediate = in.nonnegative_int_or("shared_expert_intermediate_size", 0);
      c.shared_experts = c.shared_intermediate > 0 ? 1 : 0;
      c.shared_expert_gate = c.shared_experts > 0;  // Linear(hidden, 1) sigmoid gate on the shared expert
      read_qwen_moe_layout(in, c);
      read_qwen2_window(in, c);
      break;
    case Family::Qwen3Moe:
      c.attention_bias = in.boolean_or("attention_bias", false);
      c.qk_norm = true;
      c.experts = in.positive_int("num_experts");
      c.experts_per_token = in.positive_int("num_experts_per_tok");
      check_top_k(in, c, "num_experts");
      c.expert_intermediate = in.positive_int("moe_intermediate_size");
      read_qwen_moe_layout(in, c);
      break;
    case Family::DeepseekV2:
      read_deepseek(in, c, false);
      break;
    case Family::DeepseekV3:
      read_deepseek(in, c, true);
      break;
    case Family::GptOss:
      read_gpt_oss(in, c);
      break;
  }
  if (auto q = in.opt("quantization_config"); q) {
    c.quant = parse_quantization(*q);
    if (c.quant.kv_dtype) c.kv_dtype = *c.quant.kv_dtype;
  }
  if (c.kv_dtype == DType::BF16) c.kv_dtype = c.dense_dtype();
  check_plausible(in, c, fam.family == Family::Mixtral || fam.family == Family::GptOss ? "num_local_experts"
                         : mla                          ? "n_routed_experts"
                                                        : "num_experts");
  if (auto n = in.opt("_name_or_path"); n && n->raw().is_string()) c.name = n->as_str();
  return c;
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (!is_moe() || layer < first_dense_layers) return false;
  if (std::find(dense_layers.begin(), dense_layers.end(), layer) != dense_layers.end()) return false;
  return (layer + moe_layer_phase) % moe_layer_freq == 0;
}

void apply_precision(ModelConfig& cfg, std::optional<DType> weights, std::optional<DType> kv_dtype) {
  if (weights) cfg.quant = weights_override(*weights);
  if (kv_dtype) {
    if (*kv_dtype != DType::BF16 && *kv_dtype != DType::FP8_E4M3)
      throw InputError("--kv-dtype", "", std::string("bf16 or fp8, got ") + dtype_name(*kv_dtype));
    cfg.kv_dtype = *kv_dtype == DType::BF16 ? cfg.dense_dtype() : *kv_dtype;
  }
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> v;
  for (const auto& f : kFamilies) v.emplace_back(f.architecture);
  return v;
}

ModelConfig load_model_config(const std::string& path) {
  if (is_gguf_path(path)) return gguf_model_config(read_gguf(path));  // llama.cpp's format: its header (gguf.hpp)
  json j = load_json_file(path, file_kind::kModelConfig);
  ModelConfig c = from_json(j, path);
  c.name = name_from_path(path);  // the directory users name it by, not the hub id
  return c;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  json j = parse_json_text(json_text, origin);
  ModelConfig c = from_json(j, origin);
  if (c.name.empty()) c.name = name_from_path(origin);
  return c;
}

}  // namespace peerplan
