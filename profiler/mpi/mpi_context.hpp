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
};

// Same-host ordered pairs by copy engine through CUDA IPC (mode "p2p_ce").
void mpi_measure_p2p_ce(MpiContext& m);
// Same-host unordered pairs, both directions at once through CUDA IPC (mode "p2p_ce_bidir").
void mpi_measure_p2p_ce_bidir(MpiContext& m);
// Same-host ordered pairs through shared pinned host memory (mode "host_staged").
void mpi_measure_host_staged(MpiContext& m);
// Cross-host pairs (sampled by plan_pairs) with NCCL send/recv (mode "net_nccl").
void mpi_measure_network(MpiContext& m);
// NCCL collectives with one rank per GPU (ncclCommInitRank, unique id broadcast over MPI).
void mpi_measure_nccl(MpiContext& m);

}  // namespace peerplan::profiler
