// The GPU side of the one registry table: name -> implementation. The names, groups and
// descriptions live in profiler/common/registry.cpp; check_table() makes the two agree.
#include <map>

#include "planner/core/error.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

namespace {
const std::map<std::string, MeasureFn>& impls() {
  static const std::map<std::string, MeasureFn> m = {
      {"launch_overhead", measure_launch_overhead}, {"hbm", measure_hbm},
      {"h2d_d2h", measure_h2d_d2h},                 {"p2p_ce", measure_p2p_ce},
      {"p2p_ce_bidir", measure_p2p_ce_bidir},       {"p2p_sm", measure_p2p_sm},
      {"nop2p_runtime", measure_nop2p_runtime},     {"host_staged", measure_host_staged},
      {"latency_ce", measure_latency_ce},           {"latency_sm", measure_latency_sm},
      {"nccl", measure_nccl},                       {"nccl_nop2p", measure_nccl_nop2p},
      {"gemm", measure_gemm},                       {"attention", measure_attention},
  };
  for (const auto& info : measurement_table())
    if (!m.count(info.name)) throw RuntimeError(std::string("registry entry '") + info.name + "' has no implementation");
  return m;
}
}  // namespace

MeasureFn measure_fn(const std::string& name) {
  auto it = impls().find(name);
  if (it == impls().end()) throw RuntimeError("no measurement implementation named '" + name + "'");
  return it->second;
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
