#pragma once
// The NCCL sweep shared by the P2P-allowed run (in process) and the P2P-disabled child.
#include <vector>

#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

// GPU groups to measure: the full set, and every pair when there are more than two GPUs;
// with all_groups, every subset of two or more GPUs.
std::vector<std::vector<int>> nccl_groups(int gpus, bool all_groups);

// Measures all collectives on every group over `sizes`; appends to ctx.ms.collectives.
void run_nccl_sweep(Context& ctx, const std::vector<int64_t>& sizes, bool p2p);

}  // namespace peerplan::profiler
