#pragma once
// The plan compiler: plan + model + batch shape -> op graph of one iteration; and the memory check.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

struct MemoryOptions {
  int64_t max_seqs = 256;          // concurrent sequences the KV cache must hold
  int64_t context = 4096;          // tokens per sequence (prompt + output)
  int64_t max_batched_tokens = 8192;  // activations are sized for this many tokens in flight
  double reserve_fraction = 0.10;  // CUDA context, allocator fragmentation, NCCL buffers
  int64_t reserve_bytes = 2LL << 30;  // added to the fraction: fixed per-GPU overhead
};

struct GpuMemory {
  int gpu = 0;
  int64_t capacity = 0, weights = 0, kv_cache = 0, activations = 0, reserve = 0;
  // MLA models: the executor's prefill expansion scratch, kv_b output, absorbed query / output rows
  // and decode workspace (planner/compile/mla_memory.hpp), beyond the activations above; 0 otherwise.
  int64_t mla_scratch = 0;
  int64_t used() const { return weights + kv_cache + activations + mla_scratch + reserve; }
  bool fits() const { return used() <= capacity; }
};

struct MemoryReport {
  bool fits = true;
  std::vector<GpuMemory> gpus;
  std::string why;  // for a plan that does not fit: which GPU and by how much, with the numbers
  int64_t max_seqs_that_fit = 0;  // at the given context, the most sequences every GPU can hold
  // Number formats behind the figures (issue 15): the KV cache's dtype, what one sequence of the
  // given context holds in it (whole model, before sharding), and the model's stored weight
  // bytes by format ("bf16", "fp8", "int4", ...; scales counted with their weights).
  DType kv_dtype = DType::BF16;
  int64_t kv_bytes_per_seq = 0;
  std::vector<std::pair<std::string, int64_t>> weight_bytes_by_dtype;
};

MemoryReport check_memory(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                          const Machine& machine, const MemoryOptions& opt);

// MoE layers route the iteration's tokens with cfg.moe_routing (planner/model/routing_model.hpp):
// per GPU, the rows its experts receive, how many of them are touched and the busiest one's rows
// come from the same per-token draws the executor makes.
struct CompileOptions {
  // routing_layers[l]: the decoder layers compiled layer l stands for (the simulator's reduced
  // model compiles one layer per kind): its routed counts are their average, rank by rank with
  // each layer's ranks sorted busiest first. Null, or an empty entry: layer l routes as itself.
  const std::vector<std::vector<int>>* routing_layers = nullptr;
  // A MoE layer's shared experts on the auxiliary stream at up to kSharedStreamMaxTokens tokens:
  // -1 as the machine's profile says its executor ran them (executor_launch.hpp shared_expert_stream),
  // 0 never, 1 always (the executor's PEERPLAN_SHARED_STREAM).
  int shared_stream = -1;
  // A gated MLP's activation in the gate_up GEMV's epilogue where the executor's kernel does it
  // (act_fusion.hpp): -1 as the machine's profile says (executor_launch.hpp fused_gate_up_act), 0 never,
  // 1 where it pays, 2 wherever a kernel can (the executor's PEERPLAN_FUSED_ACT=0 / 1 / all).
  int fused_act = -1;
  // Whether the executor launches its decode kernels with programmatic dependent launch (bf16 GEMVs, and so
  // their activation epilogue, run only then): -1 as the machine's profile says (executor_launch.hpp), 0, 1
  // (the executor itself, which knows: profiler/kernels/pdl.cuh).
  int pdl = -1;
};

// Iterations of more tokens run the shared experts on the compute stream. vLLM's default
// (VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD) is 256; with this executor's kernels the second stream
// gained 7-11 % at 1-2 tokens and 5-7 % at 8 but lost 1-7 % at 32 and 64 (Qwen1.5-MoE and
// DeepSeek-V2-Lite decode, H100, session 21 A), so it forks up to 8 tokens, the largest measured gain.
inline constexpr int64_t kSharedStreamMaxTokens = 8;
// Whether the layer's shared-expert matrices are all stored in bf16 (or it has none): only such shared
// experts take the auxiliary stream (the executor keeps one quantized GEMM runner per GPU).
bool shared_in_bf16(const LayerFigures& lf);

OpGraph compile_iteration(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                          const Machine& machine, const BatchShape& shape, const CompileOptions& opt = {});

// For a caller that compiles ONE plan for many batch shapes (the simulator's pricer compiles
// thousands): what the plan and model alone decide (the plan's checks, each rank's weight shards
// and expert block, the layer name prefixes), the MoE loads by layer and token count, and the last
// graph, whose op slots the next compile reuses (an op graph was ~10^3 small allocations). Valid
// for the plan, model, figures and CompileOptions::routing_layers of its first use only.
struct CompileCacheData;
struct CompileCache {
  CompileCache();
  ~CompileCache();
  CompileCache(CompileCache&&) noexcept;
  CompileCache& operator=(CompileCache&&) noexcept;
  std::unique_ptr<CompileCacheData> data;  // opaque (compiler.cpp)
};
// compile_iteration into `cache`: the same graph, op for op. The reference stays valid until the
// next call with this cache.
const OpGraph& compile_iteration(CompileCache& cache, const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                 const Machine& machine, const BatchShape& shape, const CompileOptions& opt = {});

}  // namespace peerplan
