#pragma once
// What every measurement gets: the machine (discovered), the measurements being filled, the sweep
// plan, the options and the progress bar. One function per measurement file, named by its row of
// the registry table (profiler/common/registry.hpp).
#include <string>
#include <utility>
#include <vector>

#include "planner/topology/machine.hpp"
#include "profiler/common/progress.hpp"
#include "profiler/common/registry.hpp"
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

// The single-process entries, one per row of the registry table: `measure_<name>`, defined in
// profiler/measure/<name>.cpp.
#define PEERPLAN_DECLARE_MEASURE(name, group, scope, mpi, models, est, help) void measure_##name(Context&);
PEERPLAN_MEASUREMENTS(PEERPLAN_DECLARE_MEASURE)
#undef PEERPLAN_DECLARE_MEASURE

// The single-process entry of a registry row (every row has one).
MeasureFn measure_fn(const MeasurementInfo& m);
// The same by name; throws RuntimeError for a name that is not in the table.
MeasureFn measure_fn(const std::string& name);

}  // namespace peerplan::profiler
