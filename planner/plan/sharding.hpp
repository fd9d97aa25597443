#pragma once
// How a plan splits the model: per stage, the parallel layout, and per layer and rank the exact
// weight shards (the vLLM conventions: column-parallel qkv/gate_up split N by tp, row-parallel
// o/down split K by tp, KV heads replicated when tp > kv_heads, vocab-parallel embedding and LM
// head, routed experts either TP-sharded (ep == 1) or whole on their EP rank).
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"

namespace peerplan {

struct StageLayout {
  int tp = 1;   // TP degree of attention and dense MLPs
  int dp = 1;   // attention replicas (EP with ep_attention == "replicated"): each runs 1/dp of the batch
  int ep = 1;   // EP degree of MoE layers (1: experts TP-sharded like a dense MLP)
};
StageLayout stage_layout(const Plan& p, size_t stage);

// Query heads, KV heads and head dims one attention rank holds.
struct AttnShard {
  int64_t heads = 0, kv_heads = 0;
  int64_t qk_dim = 0, v_dim = 0;    // per head; equal to head_dim except MLA
  int64_t rope_dim = 0;             // per head dims that get rotary embedding
  int64_t kv_bytes_per_token = 0;   // this rank's KV cache per token for one layer
};
AttnShard attn_shard(const ModelConfig& cfg, const LayerFigures& layer, int tp);

// The multiple a TP rank's share of a routed expert's intermediate size is padded to (layer_shards; the
// profiler's weight_shapes): 64 for MXFP4 experts split by TP, as engines pad them at load; 1 (none) otherwise.
inline constexpr int64_t kMxfp4ShardQuantum = 64;
inline int64_t expert_shard_padding(DType expert_format, int64_t tp) {
  return expert_format == DType::MXFP4 && tp > 1 ? kMxfp4ShardQuantum : 1;
}

struct MatrixShard {
  std::string name;   // the model's matrix name ("qkv", "expert.down", ...)
  int64_t k = 0, n = 0, count = 1;
  bool routed = false;  // routed experts: run on tokens routed to them, not every token
  WeightFormat format;          // the model matrix's stored format (dense, fp8, int4, ...)
  double bytes_per_param = 2;   // its stored bytes per weight, scales included
  int64_t params() const { return k * n * count; }
  double bytes() const { return double(params()) * bytes_per_param; }
};
// The shards rank `rank` of stage `stage` holds for `layer`, in the model's matrix order.
std::vector<MatrixShard> layer_shards(const Plan& p, size_t stage, int rank, const ModelConfig& cfg,
                                      const LayerFigures& layer);
int64_t local_experts(const Plan& p, size_t stage, int rank, const ModelConfig& cfg);
// The routed experts rank `rank` of stage `stage` holds, as [first, first + count) of the model's
// expert ids: all of them when ep == 1 (TP-sharded), else the rank's block of expert_gpu. Throws
// InputError naming the plan when a GPU's experts are not one contiguous block (the executor's
// routing and grouped GEMM take a contiguous range).
struct ExpertBlock {
  int64_t first = 0, count = 0;
};
ExpertBlock expert_block(const Plan& p, size_t stage, int rank, const ModelConfig& cfg);

// Weight bytes one rank holds for one layer: its matrix shards in their stored formats (a shard
// keeps its matrix's bytes per weight: scales split with the weights) plus every non-matrix
// parameter (norms, biases), which each rank keeps whole in the model's dtype.
int64_t layer_weight_bytes(const Plan& p, size_t stage, int rank, const ModelConfig& cfg, const LayerFigures& layer);

// Throws InputError naming the plan when the model cannot be split this way (heads not divisible
// by tp, KV heads neither dividing nor divided by tp).
void check_shardable(const Plan& p, const ModelConfig& cfg);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace peerplan
