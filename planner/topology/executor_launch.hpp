#pragma once
// How the executor that timed a profile launched its decode kernels: "pdl" (programmatic dependent
// launch, each kernel starting under the previous one's tail: the executor's default on sm_90+ since
// session 19, profiler/kernels/pdl.cuh) or "serial". A profile without the key was timed serially (every
// profile before then); a machine without measurements says "" (it prices no launches). Validate warns
// when this host's executor launches the other way: at batch 1-2 the two differ by up to ~15 % of a
// decode step (docs/moe_executor.md, "Programmatic dependent launch").
#include <string>

#include "planner/topology/machine.hpp"

namespace peerplan {

inline constexpr const char* kExecutorLaunchKey = "executor_launch";

inline std::string executor_launch(const Machine& m) {
  if (!m.measurements) return "";
  const auto it = m.meta.find(kExecutorLaunchKey);
  return it != m.meta.end() && it->is_string() ? it->get<std::string>() : "serial";
}

}  // namespace peerplan
