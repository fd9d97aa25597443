#pragma once
// What every measurement gets: the machine (discovered), the measurements being filled, the sweep
// plan, the options and the progress bar. One function per measurement file, listed in
// measure/table.cpp against the registry (profiler/common/registry.hpp).
#include <string>
#include <utility>
#include <vector>

#include "planner/topology/machine.hpp"
#include "profiler/common/progress.hpp"
#include "profiler/common/sweep.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

struct Context {
  const ProfileOptions& opts;
  const SweepPlan& plan;
  Machine& machine;
  Measurements& ms;
  Progress& progress;
  std::string self_exe;  // for the P2P-off NCCL child
  // Per-GPU measurements run on these CUDA ordinals; empty = every GPU of the machine. An MPI rank
  // sets its own GPU (profiler/mpi).
  std::vector<int> own_gpus = {};

  int gpus() const { return machine.gpu_count(); }
  std::vector<int> measured_gpus() const;
  // Ordered pairs whose peer access is usable (capable and verified).
  std::vector<std::pair<int, int>> usable_pairs() const;
  std::vector<std::pair<int, int>> all_pairs() const;
  // Records why a measurement (or part of it) did not run, in measurements.extra.not_applicable.
  void not_applicable(const std::string& what, const std::string& why);
  void note(const std::string& key, const nlohmann::json& value) { ms.extra[key] = value; }
};

using MeasureFn = void (*)(Context&);

// Implementations (one per file in profiler/measure/).
void measure_launch_overhead(Context&);
void measure_hbm(Context&);
void measure_h2d_d2h(Context&);
void measure_p2p_ce(Context&);
void measure_p2p_ce_bidir(Context&);
void measure_p2p_sm(Context&);
void measure_nop2p_runtime(Context&);
void measure_host_staged(Context&);
void measure_latency_ce(Context&);
void measure_latency_sm(Context&);
void measure_nccl(Context&);
void measure_nccl_nop2p(Context&);
void measure_gemm(Context&);
void measure_attention(Context&);

// The implementation registered for `name` (the registry's names); throws if there is none, so a
// registry entry without code cannot slip through.
MeasureFn measure_fn(const std::string& name);

}  // namespace peerplan::profiler
