#pragma once
// The GEMM shapes a model runs, per tensor-parallel degree, which the profiler times so the cost
// model prices compute from measured kernels of the very same shapes (y[M,n] = x[M,k] W[k,n]).
// Column-parallel matrices split n by tp (qkv, gate_up, lm_head); row-parallel ones split k (o, down).
// KV heads fewer than tp are replicated (one per rank), as vLLM / Megatron do.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/model_config.hpp"

namespace peerplan::profiler {

struct WeightShape {
  std::string name;  // "qkv", "o", "gate_up", "down", "expert.gate_up", "expert.down", "router", "lm_head", ...
  int tp = 1;
  int64_t n = 0, k = 0;
  bool dense = false;  // stays bf16 whatever the model's weight format (router, shared_gate): timed in bf16 only
};

// The TP degrees 1..max_tp that divide the model's attention heads.
std::vector<int> tp_degrees(const ModelConfig& cfg, int max_tp);
// Weight shapes for each TP degree, sharded as planner/plan/sharding.cpp shards them (MLA: q or q_a / q_b,
// kv_a, kv_b, o). MoE layers' router (and Qwen-MoE's shared-expert gate) are replicated on every rank:
// [experts x hidden] (1 x hidden).
std::vector<WeightShape> weight_shapes(const ModelConfig& cfg, int max_tp);

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  bool operator<(const GemmProblem& o) const { return m != o.m ? m < o.m : n != o.n ? n < o.n : k < o.k; }
  bool operator==(const GemmProblem& o) const { return m == o.m && n == o.n && k == o.k; }
};
// Unique (m, n, k) over all models' weight shapes and all token counts, sorted.
std::vector<GemmProblem> gemm_problems(const std::vector<ModelConfig>& models, int max_tp,
                                       const std::vector<int64_t>& tokens);

}  // namespace peerplan::profiler
