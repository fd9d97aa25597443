#pragma once
// Limits every strategy script runs under: a runaway script is stopped within about a second on
// the machines people plan for, far above what the built-ins use.
//
// What the built-ins use (bench/lua_budget.sh; 2-core dev VM shared with two other builds, load
// 3-4, 2026-12-02, Llama-3.1-70B): a Lua VM there runs ~70 M instructions/s (a counting loop:
// 200 M instructions in 2.95 s). On every shipped single host (hgx-h100x8, 8 GPUs) each built-in
// passes with --lua-seconds 0.05. On the 64-GPU cluster hgx-h100x8-x8nodes the heaviest need:
// hybrid 16-32 M instructions and 0.4-0.8 s, data_parallel 8-16 M and 0.8-1.6 s (its C++ calls),
// pipeline_parallel and tensor_parallel < 4 M and < 0.1 s. On 1024 GPUs (bench/make_machine.py
// 128) hybrid needs 128-256 M instructions and ~4 s (data_parallel ~41 s: over any default).
// Memory: under 20 MB per strategy process on 64 GPUs, 600 MB of which the topology on 1024.
//
// So the defaults (kDefaultLuaSeconds, kDefaultLuaInstructions) hold for machines of up to
// kLuaBudgetGpus GPUs: 1 s and 150 M instructions (a runaway stops at the 1 s clock, or at ~150 M
// instructions, ~1-2 s on the loaded VM; the old 10 s / 2e9 ran 5-10 s), 20x the time and 3x the
// instructions of any built-in on an 8-GPU host. Work in the built-ins grows with the GPU count
// (pairs of GPUs, pipeline depths), so limits left at their defaults grow in proportion to it
// beyond kLuaBudgetGpus (for_machine): 64 GPUs get 4 s and 600 M (hybrid 5x / 19x, data_parallel
// 2.5x), 1024 GPUs 64 s and 9.6 G (hybrid 16x / 37x). A limit set explicitly (--lua-seconds,
// --lua-instructions) to anything but its default is used as given.
#include <algorithm>
#include <cstdint>

namespace peerplan {

inline constexpr double kDefaultLuaSeconds = 1.0;
inline constexpr int64_t kDefaultLuaInstructions = 150'000'000;
inline constexpr int kLuaBudgetGpus = 16;

struct LuaLimits {
  int64_t instructions = kDefaultLuaInstructions;  // Lua VM instructions per call (count hook)
  double seconds = kDefaultLuaSeconds;  // wall clock per strategy run (loading it and candidates() together)
  int64_t memory_bytes = 256LL << 20;   // total bytes the Lua state may hold (custom allocator)
  // Run each strategy in a child process (lua_isolate.hpp) with CPU-time and address-space limits
  // and a wall-clock kill, so no script can escape the limits. Off only for the fuzz target.
  bool isolate = true;
};

// The limits for a machine of `gpus` GPUs: those left at their defaults scaled by
// max(1, gpus / kLuaBudgetGpus) (see above); the others unchanged.
inline LuaLimits for_machine(LuaLimits l, int gpus) {
  const double f = std::max(1.0, double(gpus) / kLuaBudgetGpus);
  if (l.seconds == kDefaultLuaSeconds) l.seconds *= f;
  if (l.instructions == kDefaultLuaInstructions) l.instructions = int64_t(double(l.instructions) * f);
  return l;
}

}  // namespace peerplan
