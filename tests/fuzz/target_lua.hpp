#pragma once
// Fuzz target "lua": the input is the text of a strategy script, run exactly as `peerplan plans
// --strategy FILE` runs it (sandboxed LuaHost, helper library, model and machine tables, the
// machine.transfer_time/link bindings, plan conversion and validation, memory check), under small
// limits so runaway scripts end quickly. The machine is the measured 2-GPU profile: its Lua table
// is ~16x smaller than an 8-GPU one, and copying that table was a third of a short input's time. Invariants: whatever the script does, the host either
// returns validated plans or throws an InputError naming the script; it never crashes, hangs
// (libFuzzer's -timeout) or lets the script allocate past its memory cap (-rss_limit_mb).
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "planner/strategy/strategy_runner.hpp"
#include "tests/fuzz/fixtures.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

// Scripts are files to the runner (errors name them), so each input is written to one per process.
inline const std::string& lua_script_path() {
  static const std::string path = [] {
    auto dir = std::filesystem::temp_directory_path() / ("peerplan-fuzz-lua-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    return (dir / "strategy.lua").string();
  }();
  return path;
}

inline LuaLimits small_lua_limits() {
  LuaLimits l;
  // Mutated scripts loop forever all the time: a short budget keeps the fuzzer fast (at 2 s it ran
  // 7 inputs/s; at 5 M instructions ~25). The built-in strategies fit (pipeline_parallel, the
  // largest, needs 0.5 M instructions and < 4 MiB on an 8-GPU machine: the replay test checks them).
  l.instructions = 1'000'000;
  l.seconds = 1.0;  // wall clock is a backstop for slow C calls; loops hit the instruction budget in ~10 ms
  l.memory_bytes = 8LL << 20;
  l.isolate = false;  // in this process: libFuzzer must see the coverage (a child's is lost)
  return l;
}

inline bool fuzz_lua(const std::string& data) {
  const std::string& path = lua_script_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), std::streamsize(data.size()));
  }
  const ModelFixture& m = dense_model();
  const Topology& topo = two_gpus_measured();
  return accepts(path, [&] {
    std::vector<CandidatePlan> plans = run_strategies({path}, m.cfg, m.fig, CostModel(topo), {}, MemoryOptions{}, small_lua_limits());
    for (const auto& c : plans) {
      FUZZ_CHECK(!c.plan.stages.empty(), "a validated plan with no stages");
      for (int g : c.plan.all_gpus()) FUZZ_CHECK(g >= 0 && g < topo.gpu_count(), "a plan GPU outside the machine");
    }
  }, /*qualified=*/true);
}

}  // namespace peerplan::fuzz
