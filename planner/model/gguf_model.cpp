// GGUF metadata -> the HF config.json it stands for (llama.cpp's convert_hf_to_gguf.py writes one
// from the other: gguf-py/gguf/constants.py Keys.LLM / Keys.Attention name the keys), read by the
// config.json reader so that a GGUF model passes the same checks as its config.json would.
#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/error.hpp"
#include "planner/model/gguf.hpp"

namespace peerplan {

namespace {

struct ArchMap {
  const char* gguf;          // general.architecture
  const char* hf;            // architectures[0]
  const char* hf_moe;        // when <arch>.expert_count > 0 (nullptr: dense only / MoE only)
};

// llama.cpp writes Mistral and Mixtral checkpoints as "llama" (Mixtral with expert_count set).
constexpr ArchMap kArchs[] = {
    {"llama", "LlamaForCausalLM", "MixtralForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM", nullptr},
    {"qwen3", "Qwen3ForCausalLM", nullptr},
    {"phi3", "Phi3ForCausalLM", nullptr},
    {"qwen2moe", nullptr, "Qwen2MoeForCausalLM"},
    {"qwen3moe", nullptr, "Qwen3MoeForCausalLM"},
};

class Meta {
 public:
  explicit Meta(const GgufFile& f) : f_(f) {}
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    throw InputError(f_.path, "metadata '" + key + "'", expected);
  }
  const GgufKV* get(const std::string& key) const { return f_.find(key); }
  std::string str(const std::string& key) const {
    const GgufKV* kv = get(key);
    if (!kv) fail(key, "required key is missing");
    if (kv->type != GgufValueType::String) fail(key, "a string");
    return kv->value.get<std::string>();
  }
  // A non-negative integer (any GGUF integer type). A per-layer array (some architectures vary the
  // head count per layer) is refused: the planner's model has one value per model.
  std::optional<int64_t> integer(const std::string& key) const {
    const GgufKV* kv = get(key);
    if (!kv) return std::nullopt;
    if (kv->type == GgufValueType::Array)
      fail(key, "one integer for every layer (per-layer arrays, as this file has, are not modelled)");
    if (!kv->value.is_number_integer()) fail(key, fmt::format("an integer, got a {}", kv->value.type_name()));
    if (kv->value.is_number_unsigned() ? kv->value.get<uint64_t>() > uint64_t(INT64_MAX) : kv->value.get<int64_t>() < 0)
      fail(key, "a non-negative integer within 63 bits");
    return kv->value.get<int64_t>();
  }
  int64_t required(const std::string& key) const {
    auto v = integer(key);
    if (!v) fail(key, "required key is missing (the model's shape cannot be read without it)");
    return *v;
  }
  std::optional<double> real(const std::string& key) const {
    const GgufKV* kv = get(key);
    if (!kv) return std::nullopt;
    if (!kv->value.is_number()) fail(key, "a number");
    return kv->value.get<double>();
  }

 private:
  const GgufFile& f_;
};

const GgufTensor* tensor(const GgufFile& f, const std::string& name) {
  for (const auto& t : f.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

std::vector<std::string> gguf_supported_architectures() {
  std::vector<std::string> v;
  for (const auto& a : kArchs) v.emplace_back(a.gguf);
  return v;
}

nlohmann::json gguf_hf_config(const GgufFile& f) {
  Meta m(f);
  const std::string arch = m.str("general.architecture");
  const ArchMap* map = nullptr;
  for (const auto& a : kArchs)
    if (arch == a.gguf) map = &a;
  if (!map)
    m.fail("general.architecture", fmt::format("one of {} (the GGUF architectures peerplan models), got '{}'",
                                               fmt::join(gguf_supported_architectures(), ", "), arch));
  const std::string p = arch + ".";
  const int64_t experts = m.integer(p + "expert_count").value_or(0);
  const char* hf = experts > 0 ? map->hf_moe : map->hf;
  if (!hf)
    m.fail(p + "expert_count", experts > 0 ? fmt::format("0 for architecture '{}' (a dense model), got {}", arch, experts)
                                           : fmt::format("> 0 for architecture '{}' (a mixture of experts)", arch));

  nlohmann::json j;
  j["architectures"] = {hf};
  j["hidden_size"] = m.required(p + "embedding_length");
  j["num_hidden_layers"] = m.required(p + "block_count");
  j["num_attention_heads"] = m.required(p + "attention.head_count");
  j["num_key_value_heads"] = m.integer(p + "attention.head_count_kv").value_or(j["num_attention_heads"].get<int64_t>());
  if (auto kl = m.integer(p + "attention.key_length")) j["head_dim"] = *kl;
  if (auto ctx = m.integer(p + "context_length")) j["max_position_embeddings"] = *ctx;
  if (auto theta = m.real(p + "rope.freq_base")) j["rope_theta"] = *theta;
  if (auto eps = m.real(p + "attention.layer_norm_rms_epsilon")) j["rms_norm_eps"] = *eps;
  if (auto sw = m.integer(p + "attention.sliding_window"); sw && *sw > 0) j["sliding_window"] = *sw;
  // The dense MLP width; MoE families without one still need the key: their experts' width stands in.
  const int64_t expert_ff = m.integer(p + "expert_feed_forward_length").value_or(0);
  if (auto ff = m.integer(p + "feed_forward_length")) j["intermediate_size"] = *ff;
  else if (expert_ff > 0) j["intermediate_size"] = expert_ff;
  else m.required(p + "feed_forward_length");
  if (experts > 0) {
    j[arch == "llama" ? "num_local_experts" : "num_experts"] = experts;
    j["num_experts_per_tok"] = m.required(p + "expert_used_count");
    if (arch != "llama") j["moe_intermediate_size"] = expert_ff > 0 ? expert_ff : m.required(p + "expert_feed_forward_length");
    if (auto sh = m.integer(p + "expert_shared_feed_forward_length")) j["shared_expert_intermediate_size"] = *sh;
  }
  // Vocabulary: <arch>.vocab_size when written, else the tokenizer's token list, else the embedding's rows.
  if (auto v = m.integer(p + "vocab_size")) {
    j["vocab_size"] = *v;
  } else if (const GgufKV* tok = m.get("tokenizer.ggml.tokens"); tok && tok->type == GgufValueType::Array) {
    j["vocab_size"] = tok->array_count;
  } else if (const GgufTensor* emb = tensor(f, "token_embd.weight"); emb && emb->dims.size() == 2) {
    j["vocab_size"] = emb->dims[1];
  } else {
    m.fail("tokenizer.ggml.tokens", "the vocabulary (tokenizer.ggml.tokens, " + p + "vocab_size or a token_embd.weight tensor)");
  }
  // No separate output matrix: the LM head reuses the token embedding (llama.cpp does the same).
  j["tie_word_embeddings"] = !f.tensors.empty() && tensor(f, "output.weight") == nullptr;
  j["torch_dtype"] = "bfloat16";  // the compute type engines run GGUF models at; stored bytes come from the tensors
  if (const GgufKV* n = m.get("general.name"); n && n->type == GgufValueType::String) j["_name_or_path"] = n->value;
  return j;
}

namespace {

// The planner matrix (layer, name) a GGUF weight tensor is part of (llama.cpp's tensor names,
// src/llama-arch.cpp); nullopt for vectors and tensors the planner has no matrix for.
std::optional<std::pair<int64_t, std::string>> planner_matrix(const GgufTensor& t, bool gated) {
  const std::string& n = t.name;
  if (t.dims.size() < 2) return std::nullopt;  // norms, biases, rope factors
  if (n == "token_embd.weight") return std::pair<int64_t, std::string>{-1, "embedding"};
  if (n == "output.weight") return std::pair<int64_t, std::string>{-1, "lm_head"};
  const std::string weight = ".weight";
  if (n.rfind("blk.", 0) != 0 || n.size() <= weight.size() || n.compare(n.size() - weight.size(), weight.size(), weight))
    return std::nullopt;
  const size_t dot = n.find('.', 4);
  if (dot == std::string::npos || dot == 4) return std::nullopt;
  int64_t layer = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (n[i] < '0' || n[i] > '9' || layer > (int64_t(1) << 40)) return std::nullopt;
    layer = layer * 10 + (n[i] - '0');
  }
  std::string part = n.substr(dot + 1, n.size() - weight.size() - dot - 1);
  // Mixtral files of early 2024 store experts one by one: blk.N.ffn_gate.E.weight.
  bool per_expert = false;
  if (auto d = part.find('.'); d != std::string::npos) {
    const std::string e = part.substr(d + 1);
    if (e.empty() || e.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    part = part.substr(0, d), per_expert = true;
  }
  auto m = [&](const char* name) { return std::optional<std::pair<int64_t, std::string>>{{layer, name}}; };
  if (per_expert) {
    if (part == "ffn_gate" || part == "ffn_up") return m("expert.gate_up");
    if (part == "ffn_down") return m("expert.down");
    return std::nullopt;
  }
  if (part == "attn_q" || part == "attn_k" || part == "attn_v" || part == "attn_qkv") return m("qkv");
  if (part == "attn_output") return m("o");
  if (part == "ffn_gate") return m("gate_up");
  if (part == "ffn_up") return m(gated ? "gate_up" : "up");
  if (part == "ffn_down") return m("down");
  if (part == "ffn_gate_inp") return m("router");
  if (part == "ffn_gate_exps" || part == "ffn_up_exps") return m("expert.gate_up");
  if (part == "ffn_down_exps") return m("expert.down");
  if (part == "ffn_gate_shexp" || part == "ffn_up_shexp") return m("shared.gate_up");
  if (part == "ffn_down_shexp") return m("shared.down");
  if (part == "ffn_gate_inp_shexp") return m("shared_gate");
  return std::nullopt;
}

}  // namespace

Quantization gguf_quantization(const GgufFile& f, const ModelConfig& c) {
  struct Acc {
    uint64_t elements = 0, bytes = 0;
    std::vector<std::string> types;  // in the order met
  };
  std::map<std::pair<int64_t, std::string>, Acc> acc;
  for (const auto& t : f.tensors) {
    auto key = planner_matrix(t, c.gated_mlp);
    if (!key) continue;
    Acc& a = acc[*key];
    a.elements += t.elements, a.bytes += t.bytes;
    const std::string type = ggml_type_info(t.ggml_type).name;
    if (std::find(a.types.begin(), a.types.end(), type) == a.types.end()) a.types.push_back(type);
  }
  Quantization q;
  q.method = "gguf";
  q.source = "GGUF tensor types";
  q.lm_head = true;  // output.weight has its own type like every other tensor
  for (const auto& [key, a] : acc) {
    WeightFormat w;
    const bool dense = std::all_of(a.types.begin(), a.types.end(), [](const std::string& n) { return n == "F16" || n == "BF16"; });
    if (dense) {
      w.dtype = a.types.size() == 1 && a.types[0] == "F16" ? DType::FP16 : DType::BF16;  // 2 bytes each way
    } else {
      w.scales = ScaleLayout::Ggml;
      w.bits_per_weight = a.elements ? 8.0 * double(a.bytes) / double(a.elements) : 0;
      w.ggml_types = fmt::format("{}", fmt::join(a.types, "+"));
      // The label the cost model prices by (tensor rate, measured table rows); the bytes are exact.
      w.dtype = w.bits_per_weight >= 15   ? DType::BF16  // F32 matrices: dense compute, 4 bytes stored
                : a.types == std::vector<std::string>{"MXFP4"} ? DType::MXFP4
                : w.bits_per_weight >= 8  ? DType::INT8
                                          : DType::INT4;
    }
    q.per_matrix[key] = w;
  }
  if (!q.quantized()) {  // an F16/BF16 file: the model's dense weights, as a config.json without quantization_config
    Quantization none;
    none.source = "GGUF tensor types";
    return none;
  }
  return q;
}

ModelConfig gguf_model_config(const GgufFile& f) {
  nlohmann::json j = gguf_hf_config(f);
  ModelConfig c = parse_model_config(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                                     f.path + ": metadata read as config.json");
  c.source_file = f.path;
  c.quant = gguf_quantization(f, c);
  return c;
}

}  // namespace peerplan
