#pragma once
// Rank 0's side of an MPI profile: one machine file out of every host's discovery and every rank's
// measurements. GPUs are numbered in rank order; a host's vertices keep their ids when there is one
// host (so an `-np N` profile of a host reads like a single-process one) and get an "h<i>." prefix
// when there are several; hosts are joined by network links between their NICs. CPU-only.
#include <map>
#include <vector>

#include "planner/topology/machine.hpp"
#include "profiler/common/rank_layout.hpp"

namespace peerplan::profiler {

// Renames GPU ids in a rank's measurements (CUDA ordinals on its host -> global ids). Host
// endpoints (-1) stay; ids not in the map are an error (a rank measured a GPU it does not own).
void remap_gpu_ids(Measurements& ms, const std::map<int, int>& local_to_global);

// Appends `from`'s figures to `to` (per-GPU figures of different GPUs, or pair curves).
void append_measurements(Measurements& to, Measurements from);

// How a rank sends its figures to rank 0: the measurements schema, except that per-GPU HBM figures
// travel as {"gpu id": GB/s} (a rank's hbm_gbps has zeros for the GPUs it does not own, which the
// schema rightly refuses). `origin` names the rank in errors.
std::string rank_result_to_json(const Measurements& ms);
Measurements rank_result_from_json(const std::string& text, const std::string& origin);

struct MergeInput {
  RankLayout layout;
  std::vector<Machine> host_machines;     // discovery of each host (index = layout.hosts), local ids
  std::vector<Measurements> rank_results; // per rank, already in global ids
  std::string name;                       // --name, or "" for the host name(s)
  nlohmann::json how;                     // recorded in meta.mpi (launcher, options)
};

// Throws RuntimeError if the inputs disagree (wrong counts, a rank's device missing from its
// host's discovery). The result passes validate_machine.
Machine merge_mpi_profile(const MergeInput& in);

// Nominal figures for a network link whose bandwidth was not measured (200 Gb/s class NIC).
inline constexpr double kNominalNetworkGbps = 25.0;

}  // namespace peerplan::profiler
