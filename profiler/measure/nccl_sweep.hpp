#pragma once
// The NCCL sweep, one loop for every way a collective is issued: in one process over several GPUs
// (P2P allowed, and the P2P-disabled child) and with one rank per GPU under MPI.
#include <functional>
#include <string>
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

// How one group of GPUs issues, times and checks a collective: every member's communicator in
// this process (run_nccl_sweep, measure/nccl.cpp), or this rank's member of a per-rank
// communicator (mpi_measure_nccl, profiler/mpi/nccl_mpi.cpp). The sweep itself is one loop,
// sweep_collectives.
struct CollectiveGroup {
  std::vector<int> gpus;   // the group, as recorded in each curve
  int ranks = 0;           // its members (the collective's n)
  bool p2p = true;         // NCCL P2P allowed (recorded; fewer reps per region without it)
  bool records = true;     // this process records the curves (MPI: the group's first rank only)
  std::string progress_prefix, progress_suffix;  // around "<op> [<gpus>] <size>" on the progress bar
  std::string where;       // after "NCCL <op>" in the error of a failed check
  // Seconds of one timed region of `reps` back-to-back calls with counts `c` (MPI: the members'
  // mean, as nccl-tests); behind the spin gate when `gated`.
  std::function<double(CollOp op, const CollCounts& c, int reps, bool gated)> time_region;
  // Wrong values over the whole group after the timed loop of `op` (its last counts `c`).
  std::function<size_t(CollOp op, const CollCounts& c)> wrong_values;
  // Optional (one process over the group): `samples` timings, seconds per call, of `reps` calls
  // captured in one CUDA graph and the graph launched behind the gate (after `warmup` launches),
  // as the executor's decode graphs run a tensor-parallel all-reduce.
  std::function<std::vector<double>(CollOp op, const CollCounts& c, int reps, int warmup, int samples)> graph_samples;
};

// The largest all-reduce timed inside a graph: a decode step's (256 tokens x 8192 hidden x bf16).
inline constexpr int64_t kGraphTimedCollectiveMaxBytes = int64_t(4) << 20;

// Every collective of all_coll_ops() on `group` over `sizes` (nccl-tests' size convention): per
// size warm-up regions (the first never gated: NCCL connects lazily inside the first calls), then
// ctx.plan.samples timed regions, one sample = region / reps; then the check. With
// group.graph_samples, all_reduce again up to kGraphTimedCollectiveMaxBytes inside a CUDA graph (a
// second curve, graph = true). Appends the curves to ctx.ms.collectives when group.records. `index` of `count` groups places the progress bar.
void sweep_collectives(Context& ctx, const CollectiveGroup& group, const std::vector<int64_t>& sizes, size_t index,
                       size_t count);

// Measures all collectives on every group over `sizes` in this process (ncclCommInitAll);
// appends to ctx.ms.collectives.
void run_nccl_sweep(Context& ctx, const std::vector<int64_t>& sizes, bool p2p);

}  // namespace peerplan::profiler
