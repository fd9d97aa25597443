#pragma once
// The NCCL sweep shared by the P2P-allowed run (in process) and the P2P-disabled child.
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "profiler/common/bus_bw.hpp"

#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

// GPU groups to measure: the full set, and every pair when there are more than two GPUs;
// with all_groups, every subset of two or more GPUs.
std::vector<std::vector<int>> nccl_groups(int gpus, bool all_groups);

// One rank's part of collective `op` (inside a group call when several ranks share a process):
// send/recv buffers of floats; all_to_all and send_recv as nccl-tests do them.
void enqueue_collective_rank(CollOp op, ncclComm_t comm, int rank, int n, const float* send, float* recv,
                             const CollCounts& c, cudaStream_t stream);
// Mismatching floats in one rank's result, given send buffers filled with rank + 1 on every rank.
size_t verify_collective_rank(CollOp op, int rank, int n, int device, const float* recv, const CollCounts& c,
                              cudaStream_t stream);

// Measures all collectives on every group over `sizes`; appends to ctx.ms.collectives.
void run_nccl_sweep(Context& ctx, const std::vector<int64_t>& sizes, bool p2p);

}  // namespace peerplan::profiler
