#pragma once
// What the planner derives from a model config: parameter counts, bytes, FLOPs, per layer.
// Conventions: a FLOP is one multiply or one add (a multiply-add is 2 FLOPs); "per token" is for
// the forward pass; attention FLOPs grow linearly with the context the token attends to.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/model/model_config.hpp"

namespace peerplan {

// One weight matrix of a layer: y[M, n] = x[M, k] * W[k, n] for M tokens.
struct MatrixShape {
  std::string name;  // "qkv", "o", "gate_up", "down", "expert.gate_up", "q_a", "kv_b", ...
  int64_t k = 0;     // input features
  int64_t n = 0;     // output features
  int64_t count = 1; // how many such matrices per layer (e.g. routed experts)
  bool per_token_active = true;  // false for routed experts: only top-k of `count` run per token
  // Stored format (quantization.hpp) and bytes of all `count` matrices, scales and zero points
  // included; set by derive_figures from the config's quantization.
  WeightFormat format;
  double bytes = 0;
  int64_t params() const { return k * n * count; }
  double bytes_per_param() const { return params() > 0 ? bytes / double(params()) : 0; }
};

struct LayerFigures {
  int64_t index = 0;
  bool moe = false;
  int64_t attn_params = 0;
  int64_t mlp_params = 0;           // dense MLP, or all experts + shared + router for MoE layers
  int64_t router_params = 0;
  int64_t expert_params = 0;        // one routed expert
  int64_t shared_expert_params = 0; // all shared experts together
  int64_t norm_params = 0;
  int64_t params = 0;               // total in this layer
  int64_t active_params = 0;        // touched by one token
  double flops_per_token = 0;       // matmul FLOPs at context 1 (2 * active matmul params + attention at ctx 1)
  double attn_flops_per_context_token = 0;  // extra FLOPs per token for each token of context
  int64_t kv_bytes_per_token = 0;   // KV cache this layer stores per token (in the KV dtype)
  int64_t window = 0;               // attention window (0 = full): KV holds at most this many tokens
  int64_t weight_bytes = 0;         // stored: matrices in their formats + norms/biases dense
  std::vector<MatrixShape> matrices;
};

struct ModelFigures {
  int64_t params_total = 0;
  int64_t params_active = 0;        // weights one token multiplies (MoE: top-k experts); excludes the
                                    // embedding table (a token reads one row), includes the LM head
  int64_t weight_bytes = 0;         // stored bytes: each matrix in its format (scales included), the rest dense
  int64_t kv_bytes_per_token = 0;   // summed over layers
  double flops_per_token = 0;       // at context 1
  double flops_per_context_token = 0;  // slope: flops_per_token(ctx) = flops_per_token + slope*(ctx-1)
  int64_t embedding_params = 0;
  int64_t lm_head_params = 0;       // 0 when tied
  int64_t final_norm_params = 0;
  DType dense_dtype = DType::BF16;  // norms, biases, sinks: the model's dense dtype (cfg.dense_dtype())
  std::vector<LayerFigures> layers;
  // Outside the decoder layers: "embedding" (a lookup, not a GEMM: k = vocab, n = hidden) and
  // "lm_head" (k = hidden, n = vocab; a GEMM even when tied, then it reuses the embedding's storage).
  std::vector<MatrixShape> model_matrices;

  // KV bytes one sequence of `context` tokens holds (windowed layers hold at most their window).
  int64_t kv_bytes_per_seq(int64_t context) const;
  // Stored weight bytes by format ("bf16", "fp8", ...), in a fixed order, for summaries.
  std::vector<std::pair<std::string, int64_t>> weight_bytes_by_dtype() const;

  // FLOPs of a token at `context`: flops_per_token plus each layer's attention over the context, a
  // sliding-window layer's over at most its window (issue 18).
  double flops_per_token_at(int64_t context) const {
    bool windowed = false;
    for (const auto& l : layers) windowed = windowed || l.window > 0;
    if (!windowed) return flops_per_token + flops_per_context_token * double(context > 1 ? context - 1 : 0);
    double f = flops_per_token;
    for (const auto& l : layers) {
      const int64_t c = l.window > 0 ? std::min(context, l.window) : context;
      f += l.attn_flops_per_context_token * double(c > 1 ? c - 1 : 0);
    }
    return f;
  }
};

ModelFigures derive_figures(const ModelConfig& cfg);
// JSON with exactly these top-level keys: params_total, weight_bytes, kv_bytes_per_token,
// flops_per_token (object: at_context_1, per_context_token, formula), plus model, layers, experts.
nlohmann::json figures_to_json(const ModelConfig& cfg, const ModelFigures& f);
// The number formats behind the figures, for every output that sizes or prices the model:
// {method, source, weights, activations, ignore, weight_bytes, weight_bytes_by_dtype, kv_dtype}.
nlohmann::json precision_json(const ModelConfig& cfg, const ModelFigures& f);
// One line for tables: "weights 4.2 GB bf16 + 68.5 GB fp8, KV cache bf16".
std::string precision_line(const ModelConfig& cfg, const ModelFigures& f);

}  // namespace peerplan
