#pragma once
// The switch of programmatic dependent launch (profiler/kernels/pdl.cuh has the contract and the launch):
// one switch per process, PEERPLAN_PDL (unset or 1 on, 0 off), readable from host-only code. On by default
// since session 19: a profile timed with it prices steps run with it (docs/moe_executor.md, "Programmatic
// dependent launch"); GPUs before sm_90 launch the same kernels without the attribute.
#include <cstdlib>
#include <string>

#include "planner/core/error.hpp"

namespace peerplan::kernels::pdl {

// PEERPLAN_PDL: unset, empty or 1 on, 0 off; anything else is an error naming the variable.
inline bool parse_env(const char* v) {
  if (!v || !*v || std::string(v) == "1") return true;
  if (std::string(v) == "0") return false;
  throw RuntimeError("PEERPLAN_PDL=" + std::string(v) + ": expected 0 or 1 (programmatic dependent launch of the "
                     "executor's own decode kernels; on unless 0)");
}

// One switch per process (benches toggle it between runs of the same graph-free code path).
inline bool& flag() {
  static bool on = parse_env(std::getenv("PEERPLAN_PDL"));
  return on;
}
inline bool enabled() { return flag(); }
inline void set_enabled(bool on) { flag() = on; }

// GPUs of this compute capability take the launch attribute and griddepcontrol (Hopper and later).
inline bool supported(int cc_major) { return cc_major >= 9; }

// How the executor launches its decode kernels on GPUs of compute capability cc_major, as a profile's meta
// records it (planner/topology/executor_launch.hpp): "pdl" or "serial".
inline const char* launch_mode(int cc_major) { return enabled() && supported(cc_major) ? "pdl" : "serial"; }

}  // namespace peerplan::kernels::pdl
