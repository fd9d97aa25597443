// The single-process entries of the registry table, in its row order (one table: the rows live in
// profiler/common/registry.hpp; a row without its measure_<name> fails to link).
#include "planner/core/error.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

MeasureFn measure_fn(const MeasurementInfo& m) {
  static const MeasureFn fns[] = {
#define PEERPLAN_ENTRY(name, group, scope, mpi, models, est, help) measure_##name,
      PEERPLAN_MEASUREMENTS(PEERPLAN_ENTRY)
#undef PEERPLAN_ENTRY
  };
  return fns[m.index];
}

MeasureFn measure_fn(const std::string& name) {
  const MeasurementInfo* m = find_measurement(name);
  if (!m) throw RuntimeError("no measurement named '" + name + "' in the registry table");
  return measure_fn(*m);
}

std::vector<std::pair<int, int>> Context::usable_pairs() const {
  std::vector<std::pair<int, int>> v;
  for (int i = 0; i < gpus(); ++i)
    for (int j = 0; j < gpus(); ++j)
      if (i != j && machine.p2p[size_t(i)][size_t(j)].usable()) v.push_back({i, j});
  return v;
}

std::vector<int> Context::measured_gpus() const {
  if (!own_gpus.empty()) return own_gpus;
  std::vector<int> v;
  for (int i = 0; i < gpus(); ++i) v.push_back(i);
  return v;
}

std::vector<std::pair<int, int>> Context::all_pairs() const {
  std::vector<std::pair<int, int>> v;
  for (int i = 0; i < gpus(); ++i)
    for (int j = 0; j < gpus(); ++j)
      if (i != j) v.push_back({i, j});
  return v;
}

void Context::not_applicable(const std::string& what, const std::string& why) {
  ms.extra["not_applicable"][what] = why;
  progress.message("  " + what + ": not applicable: " + why);
}

}  // namespace peerplan::profiler
