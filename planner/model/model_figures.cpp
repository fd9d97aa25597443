// ModelConfig -> parameter counts, bytes, FLOPs and every weight matrix's shape, per layer.
// Counting follows the transformers modules of each family (see docs/model.md for the formulas).
#include "planner/model/model_figures.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace peerplan {

namespace {

void add(LayerFigures& l, std::string name, int64_t k, int64_t n, int64_t count = 1, bool active = true) {
  l.matrices.push_back(MatrixShape{std::move(name), k, n, count, active});
}

int64_t params_of(const std::vector<MatrixShape>& m, size_t from) {
  int64_t p = 0;
  for (size_t i = from; i < m.size(); ++i) p += m[i].k * m[i].n * m[i].count;
  return p;
}

// Attention block: matrices, parameters (with biases) and the per-context-token FLOPs slope.
void attention(const ModelConfig& c, LayerFigures& l) {
  const int64_t h = c.hidden;
  size_t first = l.matrices.size();
  int64_t extra = 0;  // biases and the low-rank layernorms, which are not matrices
  if (c.mla) {
    const int64_t qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
    if (c.q_lora_rank > 0) {
      add(l, "q_a", h, c.q_lora_rank);
      add(l, "q_b", c.q_lora_rank, c.heads * qk);
      l.norm_params += c.q_lora_rank;  // q_a_layernorm
      if (c.attention_bias) extra += c.q_lora_rank;
    } else {
      add(l, "q", h, c.heads * qk);
    }
    add(l, "kv_a", h, c.kv_lora_rank + c.qk_rope_head_dim);  // compressed KV + the shared rope key
    l.norm_params += c.kv_lora_rank;                         // kv_a_layernorm
    add(l, "kv_b", c.kv_lora_rank, c.heads * (c.qk_nope_head_dim + c.v_head_dim));
    add(l, "o", c.heads * c.v_head_dim, h);
    if (c.attention_bias) extra += c.kv_lora_rank + c.qk_rope_head_dim + h;
    // Scores over q·k (nope + rope dims) and the weighted sum over v, per head, per context token.
    l.attn_flops_per_context_token = 2.0 * double(c.heads) * double(qk) + 2.0 * double(c.heads) * double(c.v_head_dim);
    // The cache holds the compressed latent and the rope key (what vLLM/SGLang store), not K and V.
    l.kv_bytes_per_token = (c.kv_lora_rank + c.qk_rope_head_dim) * c.kv_elem_bytes();
  } else {
    const int64_t qkv_out = (c.heads + 2 * c.kv_heads) * c.head_dim;
    add(l, "qkv", h, qkv_out);
    add(l, "o", c.heads * c.head_dim, h);
    if (c.attention_bias) extra += qkv_out;
    if (c.qk_norm) l.norm_params += 2 * c.head_dim;
    if (c.attention_sinks) extra += c.heads;  // one sink logit per head
    l.attn_flops_per_context_token = 4.0 * double(c.heads) * double(c.head_dim);  // QK^T and PV
    l.kv_bytes_per_token = 2 * c.kv_heads * c.head_dim * c.kv_elem_bytes();        // K and V
  }
  l.attn_params = params_of(l.matrices, first) + extra;
}

void dense_mlp(const ModelConfig& c, LayerFigures& l) {
  size_t first = l.matrices.size();
  add(l, c.gated_mlp ? "gate_up" : "up", c.hidden, (c.gated_mlp ? 2 : 1) * c.intermediate);
  add(l, "down", c.intermediate, c.hidden);
  l.mlp_params = params_of(l.matrices, first);
}

void moe_mlp(const ModelConfig& c, LayerFigures& l) {
  const int64_t h = c.hidden;
  size_t first = l.matrices.size();
  add(l, "router", h, c.experts);
  l.router_params = h * c.experts + (c.router_bias ? c.experts : 0);
  add(l, "expert.gate_up", h, 2 * c.expert_intermediate, c.experts, false);
  add(l, "expert.down", c.expert_intermediate, h, c.experts, false);
  l.expert_params = 3 * h * c.expert_intermediate;
  if (c.shared_intermediate > 0) {
    add(l, "shared.gate_up", h, 2 * c.shared_intermediate);
    add(l, "shared.down", c.shared_intermediate, h);
    l.shared_expert_params = 3 * h * c.shared_intermediate;
    if (c.shared_expert_gate) {
      add(l, "shared_gate", h, 1);
      l.shared_expert_params += h;
    }
  }
  // gpt-oss: each expert's gate_up (2 x intermediate) and down (hidden) biases.
  const int64_t expert_biases = c.expert_bias ? c.experts * (2 * c.expert_intermediate + h) : 0;
  if (c.expert_bias) l.expert_params += 2 * c.expert_intermediate + h;
  l.mlp_params = params_of(l.matrices, first) + (c.router_bias ? c.experts : 0) + expert_biases;
}

LayerFigures layer(const ModelConfig& c, int64_t index) {
  LayerFigures l;
  l.index = index;
  l.moe = c.is_moe_layer(index);
  l.norm_params = 2 * c.hidden;  // input_layernorm + post_attention_layernorm
  attention(c, l);
  if (l.moe) moe_mlp(c, l); else dense_mlp(c, l);
  l.params = l.attn_params + l.mlp_params + l.norm_params;
  // A token touches every matrix once, except routed experts: top-k of them.
  double matmul_flops = 0;
  int64_t inactive = 0;
  for (const auto& m : l.matrices) {
    int64_t used = m.per_token_active ? m.count : c.experts_per_token;
    matmul_flops += 2.0 * double(m.k) * double(m.n) * double(used);
    inactive += m.k * m.n * (m.count - used);
  }
  l.active_params = l.params - inactive;
  if (c.expert_bias) l.active_params -= (c.experts - c.experts_per_token) * (2 * c.expert_intermediate + c.hidden);
  l.window = c.window_of(index);
  // Stored bytes: each matrix in its format; norms, biases and sinks in the model's dtype.
  const DType dense = c.dense_dtype();
  double matrix_bytes = 0;
  int64_t matrix_params = 0;
  for (auto& m : l.matrices) {
    m.format = matrix_format(c.quant, m.name, index, c.model_type, dense);
    m.bytes = stored_bytes(m.format, m.k, m.n, m.count, c.dtype_bytes);
    matrix_bytes += m.bytes;
    matrix_params += m.params();
  }
  l.weight_bytes = int64_t(std::llround(matrix_bytes)) + (l.params - matrix_params) * c.dtype_bytes;
  l.flops_per_token = matmul_flops + l.attn_flops_per_context_token;  // attention over a context of 1
  return l;
}

}  // namespace

ModelFigures derive_figures(const ModelConfig& cfg) {
  ModelFigures f;
  int64_t layer_params = 0, layer_active = 0;
  double layer_flops = 0, slope = 0;
  for (int64_t i = 0; i < cfg.layers; ++i) {
    f.layers.push_back(layer(cfg, i));
    const LayerFigures& l = f.layers.back();
    layer_params += l.params;
    layer_active += l.active_params;
    layer_flops += l.flops_per_token;
    slope += l.attn_flops_per_context_token;
    f.kv_bytes_per_token += l.kv_bytes_per_token;
  }
  f.embedding_params = cfg.vocab * cfg.hidden;
  f.lm_head_params = cfg.tied_embeddings ? 0 : cfg.vocab * cfg.hidden;
  f.final_norm_params = cfg.hidden;
  f.dense_dtype = cfg.dense_dtype();
  f.model_matrices.push_back(MatrixShape{"embedding", cfg.vocab, cfg.hidden, 1, true});
  f.model_matrices.push_back(MatrixShape{"lm_head", cfg.hidden, cfg.vocab, 1, true});
  for (auto& m : f.model_matrices) {
    m.format = matrix_format(cfg.quant, m.name, -1, cfg.model_type, cfg.dense_dtype());
    m.bytes = stored_bytes(m.format, m.k, m.n, m.count, cfg.dtype_bytes);
  }
  f.params_total = layer_params + f.embedding_params + f.lm_head_params + f.final_norm_params;
  // The LM head multiplies vocab x hidden weights for every token, tied or not; the embedding is a row lookup.
  f.params_active = layer_active + cfg.vocab * cfg.hidden + f.final_norm_params;
  f.weight_bytes = f.final_norm_params * cfg.dtype_bytes + int64_t(std::llround(f.model_matrices[0].bytes));
  if (!cfg.tied_embeddings) f.weight_bytes += int64_t(std::llround(f.model_matrices[1].bytes));
  for (const auto& l : f.layers) f.weight_bytes += l.weight_bytes;
  f.flops_per_token = layer_flops + 2.0 * double(cfg.hidden) * double(cfg.vocab);
  f.flops_per_context_token = slope;
  return f;
}

int64_t ModelFigures::kv_bytes_per_seq(int64_t context) const {
  int64_t b = 0;
  for (const auto& l : layers) b += l.kv_bytes_per_token * (l.window > 0 ? std::min(context, l.window) : context);
  return b;
}

std::vector<std::pair<std::string, int64_t>> ModelFigures::weight_bytes_by_dtype() const {
  std::map<std::string, double> by;
  double matrices = 0;
  auto add_m = [&](const MatrixShape& m) {
    by[dtype_name(m.format.dtype)] += m.bytes;
    matrices += m.bytes;
  };
  for (const auto& l : layers)
    for (const auto& m : l.matrices) add_m(m);
  add_m(model_matrices[0]);
  if (lm_head_params > 0) add_m(model_matrices[1]);
  // Norms, biases and sinks: the rest of weight_bytes, in the model's dense dtype (not the
  // embedding's format: a GGUF's embedding may be quantized while its norms stay dense).
  const std::string dense = dtype_name(dense_dtype);
  by[dense] += double(weight_bytes) - matrices;
  std::vector<std::pair<std::string, int64_t>> out;
  for (const char* n : {"bf16", "fp16", "fp8", "int8", "int4", "mxfp4"})
    if (auto it = by.find(n); it != by.end() && it->second > 0.5) out.push_back({n, int64_t(std::llround(it->second))});
  return out;
}

nlohmann::json precision_json(const ModelConfig& cfg, const ModelFigures& f) {
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [name, b] : f.weight_bytes_by_dtype()) by[name] = b;
  const MatrixShape* q = nullptr;  // a quantized matrix, for the format line
  for (const auto& l : f.layers)
    for (const auto& m : l.matrices)
      if (!q && m.format.scales != ScaleLayout::None) q = &m;
  const std::string dense = dtype_name(cfg.dense_dtype());
  return {{"method", cfg.quant.method},
          {"source", cfg.quant.source},
          {"weights", q ? describe(q->format) : dense},
          {"activations", cfg.quant.quantized() ? cfg.quant.activations : dense},
          {"ignore", cfg.quant.ignore},
          {"weight_bytes", f.weight_bytes},
          {"weight_bytes_by_dtype", by},
          {"kv_dtype", dtype_name(cfg.kv_dtype)}};
}

std::string precision_line(const ModelConfig& cfg, const ModelFigures& f) {
  std::string w;
  for (const auto& [name, b] : f.weight_bytes_by_dtype())
    w += fmt::format("{}{:.1f} GB {}", w.empty() ? "" : " + ", double(b) / 1e9, name);
  return fmt::format("weights {}, KV cache {}", w, dtype_name(cfg.kv_dtype));
}

namespace {

nlohmann::json matrices_json(const std::vector<MatrixShape>& ms) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& m : ms)
    a.push_back({{"name", m.name}, {"k", m.k}, {"n", m.n}, {"count", m.count},
                 {"params", m.k * m.n * m.count}, {"per_token_active", m.per_token_active},
                 {"dtype", dtype_name(m.format.dtype)}, {"bytes", int64_t(std::llround(m.bytes))}});
  return a;
}

nlohmann::json config_json(const ModelConfig& c) {
  nlohmann::json m = {
      {"name", c.name}, {"source_file", c.source_file}, {"architecture", c.architecture},
      {"model_type", c.model_type}, {"dtype", c.dtype}, {"dtype_bytes", c.dtype_bytes},
      {"hidden_size", c.hidden}, {"num_hidden_layers", c.layers}, {"num_attention_heads", c.heads},
      {"num_key_value_heads", c.kv_heads}, {"head_dim", c.head_dim}, {"intermediate_size", c.intermediate},
      {"vocab_size", c.vocab}, {"max_position_embeddings", c.max_context},
      {"tie_word_embeddings", c.tied_embeddings}, {"attention_bias", c.attention_bias},
      {"sliding_window", c.sliding_window}, {"attention", c.mla ? "mla" : (c.kv_heads == c.heads ? "mha" : "gqa")}};
  if (c.mla)
    m["mla"] = {{"q_lora_rank", c.q_lora_rank}, {"kv_lora_rank", c.kv_lora_rank},
                {"qk_rope_head_dim", c.qk_rope_head_dim}, {"qk_nope_head_dim", c.qk_nope_head_dim},
                {"v_head_dim", c.v_head_dim}};
  return m;
}

}  // namespace

nlohmann::json figures_to_json(const ModelConfig& cfg, const ModelFigures& f) {
  nlohmann::json j;
  j["version"] = 1;
  j["params_total"] = f.params_total;
  j["weight_bytes"] = f.weight_bytes;
  j["kv_bytes_per_token"] = f.kv_bytes_per_token;
  j["flops_per_token"] = {
      {"at_context_1", f.flops_per_token},
      {"per_context_token", f.flops_per_context_token},
      {"formula", "flops_per_token(ctx) = at_context_1 + per_context_token * (ctx - 1)"}};
  j["params_active"] = f.params_active;
  j["quantization"] = precision_json(cfg, f);
  j["embedding_params"] = f.embedding_params;
  j["lm_head_params"] = f.lm_head_params;
  j["final_norm_params"] = f.final_norm_params;
  j["model"] = config_json(cfg);
  j["model_matrices"] = matrices_json(f.model_matrices);
  if (cfg.is_moe()) {
    nlohmann::json moe_layers = nlohmann::json::array();
    for (const auto& l : f.layers)
      if (l.moe) moe_layers.push_back(l.index);
    j["experts"] = {{"routed", cfg.experts}, {"per_token", cfg.experts_per_token},
                    {"expert_intermediate", cfg.expert_intermediate}, {"shared", cfg.shared_experts},
                    {"shared_intermediate", cfg.shared_intermediate}, {"shared_expert_gate", cfg.shared_expert_gate},
                    {"moe_layers", moe_layers}};
  } else {
    j["experts"] = nullptr;
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : f.layers)
    layers.push_back({{"index", l.index}, {"moe", l.moe}, {"params", l.params}, {"active_params", l.active_params},
                      {"attn_params", l.attn_params}, {"mlp_params", l.mlp_params},
                      {"router_params", l.router_params}, {"expert_params", l.expert_params},
                      {"shared_expert_params", l.shared_expert_params}, {"norm_params", l.norm_params},
                      {"flops_per_token", l.flops_per_token},
                      {"attn_flops_per_context_token", l.attn_flops_per_context_token},
                      {"kv_bytes_per_token", l.kv_bytes_per_token}, {"window", l.window},
                      {"weight_bytes", l.weight_bytes}, {"matrices", matrices_json(l.matrices)}});
  j["layers"] = layers;
  return j;
}

}  // namespace peerplan
