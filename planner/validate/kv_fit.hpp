#pragma once
// The executor's KV cache, sized by the planner's one memory model (check_memory) with the GPUs'
// free memory measured when the run starts as their capacity. The executor measures, the planner
// decides: there is no second memory model in the profiler.
#include <cstdint>
#include <vector>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

struct GpuFreeMemory {
  int gpu = 0;                 // global GPU id of the plan
  int64_t free_bytes = 0;      // cudaMemGetInfo's free memory, before the executor allocates
};

// Sequences of `max_ctx` tokens that every listed GPU can hold in the executor's layout:
// check_memory (max_batched_tokens = max_tokens, its reserve) on `machine` with each listed GPU's
// capacity replaced by its free bytes; per GPU (capacity - weights - activations - MLA scratch -
// reserve) over the KV bytes of one sequence on it, less the executor's padding slot. Per GPU, not
// MemoryReport::max_seqs_that_fit: the executor holds every slot on every GPU of a stage, data-
// parallel replicas included. GPUs of the plan not listed (another MPI rank's) are not looked at;
// INT64_MAX when none is listed (a rank idle in this plan). May be negative: nothing fits.
int64_t executor_kv_slots(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                          const std::vector<GpuFreeMemory>& free, int64_t max_ctx, int64_t max_tokens);

}  // namespace peerplan
