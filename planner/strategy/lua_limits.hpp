#pragma once
// Limits every strategy script runs under. Defaults are generous for any sane strategy (the
// built-ins use well under 1% of each) and small enough that a runaway script stops quickly.
#include <cstdint>

namespace peerplan {

struct LuaLimits {
  int64_t instructions = 2'000'000'000;  // Lua VM instructions per call (count hook)
  double seconds = 10.0;                 // wall clock per strategy run (loading it and candidates() together)
  int64_t memory_bytes = 256LL << 20;    // total bytes the Lua state may hold (custom allocator)
  // Run each strategy in a child process (lua_isolate.hpp) with CPU-time and address-space limits
  // and a wall-clock kill, so no script can escape the limits. Off only for the fuzz target.
  bool isolate = true;
};

}  // namespace peerplan
