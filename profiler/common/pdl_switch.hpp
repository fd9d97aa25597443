#pragma once
// The switch of programmatic dependent launch (profiler/kernels/pdl.cuh has the contract and the launch):
// one switch per process, PEERPLAN_PDL (unset or 0 off, 1 on), readable from host-only code.
#include <cstdlib>
#include <string>

#include "planner/core/error.hpp"

namespace peerplan::kernels::pdl {

// PEERPLAN_PDL: unset or 0 off, 1 on; anything else is an error naming the variable.
inline bool parse_env(const char* v) {
  if (!v || !*v || std::string(v) == "0") return false;
  if (std::string(v) == "1") return true;
  throw RuntimeError("PEERPLAN_PDL=" + std::string(v) + ": expected 0 or 1 (programmatic dependent launch of the "
                     "executor's own decode kernels)");
}

// One switch per process (benches toggle it between runs of the same graph-free code path).
inline bool& flag() {
  static bool on = parse_env(std::getenv("PEERPLAN_PDL"));
  return on;
}
inline bool enabled() { return flag(); }
inline void set_enabled(bool on) { flag() = on; }

}  // namespace peerplan::kernels::pdl
