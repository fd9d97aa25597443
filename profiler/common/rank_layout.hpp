#pragma once
// Rank bookkeeping of an MPI profile or validation (one rank per GPU): which host and GPU each
// rank has, the global GPU numbering (= rank order), and which GPU pairs are measured, which are
// inferred from symmetry. CPU-only, no MPI: each rank describes itself, rank 0 gathers the
// descriptions (as JSON) and builds the layout, so everything here is tested without mpirun.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace peerplan::profiler {

struct RankInfo {
  int rank = 0;
  std::string host;        // MPI processor name
  int local_rank = 0;      // rank among the ranks on this host
  int local_size = 1;
  int device = 0;          // CUDA ordinal on its host (= local_rank unless PEERPLAN_DEVICE overrides)
  int device_count = 0;    // GPUs its process sees
  std::string uuid;        // GPU UUID ("" when unknown): detects two ranks on one GPU
  int64_t memory_bytes = 0;  // its GPU's memory (0 when unknown): `validate --mpi` checks the plan against it
};

nlohmann::json rank_info_to_json(const RankInfo& r);
// `origin` names the source in errors (e.g. "rank 3's description").
RankInfo rank_info_from_json(const std::string& text, const std::string& origin);

struct RankLayout {
  std::vector<RankInfo> ranks;        // index = rank = global GPU id
  std::vector<std::string> hosts;     // distinct hosts, in order of their first rank
  std::vector<int> host_of;           // rank -> index into hosts
  bool shared_gpus = false;           // smoke-test mode: ranks may share a GPU (see make_rank_layout)

  int size() const { return int(ranks.size()); }
  bool same_host(int a, int b) const { return host_of[size_t(a)] == host_of[size_t(b)]; }
  std::vector<int> ranks_on(int host) const;
  int leader_of(int host) const { return ranks_on(host).front(); }  // lowest rank on the host
};

// Validates and orders the gathered descriptions. Throws RuntimeError with a fix when ranks are
// missing or duplicated, a rank's device does not exist, or two ranks share one GPU (the usual
// mistake: more ranks per host than GPUs, or a launcher binding every rank to GPU 0).
// split_hosts: treat every rank as its own host (exercises the cross-host path on one machine).
// share_gpus (PEERPLAN_MPI_SHARE_GPU=1, for testing the cross-process paths on a one-GPU machine):
// ranks may share a GPU; the caller gives rank i GPU local_rank % device_count.
RankLayout make_rank_layout(std::vector<RankInfo> ranks, bool split_hosts = false, bool share_gpus = false);

// Which ordered pairs an MPI profile measures. Same-host pairs are all measured (peer copies
// through CUDA IPC, host-staged copies through shared memory). Cross-host pairs go over the
// network with NCCL send/recv: by default one representative pair per ordered pair of hosts (the
// hosts' leaders), the others inferred from it, since pairs grow as N^2 while distinct network
// paths grow as hosts^2; all_pairs measures every cross-host pair.
struct PairPlan {
  std::vector<std::pair<int, int>> intra;     // same host, measured
  std::vector<std::pair<int, int>> inter;     // different hosts, measured
  std::vector<std::pair<std::pair<int, int>, std::pair<int, int>>> inferred;  // pair -> the measured pair it copies
};
PairPlan plan_pairs(const RankLayout& layout, bool all_pairs);

// The launch rules (--mpi needs an MPI build and a launcher; an MPI launch needs --mpi) are the
// commands' own: planner/validate/launch.hpp.

}  // namespace peerplan::profiler
