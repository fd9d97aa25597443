#pragma once
// What the MPI measurements share: the rank's own Context (its GPU, its progress bar, its
// results), the rank layout and the merged machine skeleton (global GPU ids, peer capability).
#include "planner/topology/machine.hpp"
#include "profiler/common/rank_layout.hpp"
#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

struct MpiContext {
  Context& ctx;            // ctx.ms collects this rank's results in global GPU ids
  const RankLayout& layout;
  const Machine& global;   // merged discovery (no measurements): p2p, NUMA, names by global id
  int me = 0;              // world rank = global GPU id
  int device = 0;          // CUDA ordinal of this rank's GPU on its host
  int64_t job = 0;         // rank 0's pid: unique names for shared-memory segments
  // PEERPLAN_MPI_SHARE_GPU=1 (smoke test on one GPU): ranks share a GPU, so what needs distinct
  // GPUs (NCCL, both copy directions at once) records why it did not run.
  bool shared_gpus = false;
};

// The MPI entries of the registry rows whose `mpi` column is Own: `mpi_measure_<name>`, in
// profiler/mpi/ (profiler/common/registry.hpp). They are what those rows run under --mpi:
//   p2p_ce: same-host ordered pairs by copy engine through CUDA IPC, then cross-host pairs
//     (mpi_measure_network);
//   p2p_ce_bidir: same-host unordered pairs, both directions at once through CUDA IPC;
//   host_staged: same-host ordered pairs through shared pinned host memory;
//   nccl: collectives with one rank per GPU (ncclCommInitRank, unique id broadcast over MPI).
#define PEERPLAN_DECLARE_MPI_Own(name) void mpi_measure_##name(MpiContext&);
#define PEERPLAN_DECLARE_MPI_EachRank(name)
#define PEERPLAN_DECLARE_MPI_RankZero(name)
#define PEERPLAN_DECLARE_MPI_None(name)
#define PEERPLAN_DECLARE_MPI(name, group, scope, mpi, models, est, help) PEERPLAN_DECLARE_MPI_##mpi(name)
PEERPLAN_MEASUREMENTS(PEERPLAN_DECLARE_MPI)
#undef PEERPLAN_DECLARE_MPI
#undef PEERPLAN_DECLARE_MPI_Own
#undef PEERPLAN_DECLARE_MPI_EachRank
#undef PEERPLAN_DECLARE_MPI_RankZero
#undef PEERPLAN_DECLARE_MPI_None

// Cross-host pairs (sampled by plan_pairs) with NCCL send/recv (mode "net_nccl").
void mpi_measure_network(MpiContext& m);

}  // namespace peerplan::profiler
