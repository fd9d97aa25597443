// The default Lua budget (planner/strategy/lua_limits.hpp, issue 16): a runaway script is stopped
// within about a second, by the clock or the instruction count, whichever comes first. Not a timed
// test: the message says which limit stopped it, and the bound only has to fail the old defaults
// (2e9 instructions and 10 s: a runaway ran 5-10 s on the 2-core VM) on a loaded CI box.
#include <chrono>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

std::string runaway(const std::string& body) {
  return "return { name = 'runaway',\n  candidates = function(model, machine, options)\n" + body + "\n  end }\n";
}

struct Stopped {
  std::string message;
  double seconds = 0;
};

Stopped run_default(const std::string& name, const std::string& script) {
  static auto m = testing::model("llama-3.1-8b");
  static auto topo = testing::machine("pcie-2socket-8");
  std::string path = testing::write_script(name, script);
  Stopped s;
  auto t0 = std::chrono::steady_clock::now();
  try {
    run_strategies({path}, m.cfg, m.fig, CostModel(*topo), {}, MemoryOptions{}, LuaLimits{});
    ADD_FAILURE() << name << ": a runaway script ran to completion";
  } catch (const InputError& e) {
    s.message = e.what();
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

bool stopped_by_a_limit(const std::string& m) {
  return m.find("time limit of") != std::string::npos || m.find("instruction limit of") != std::string::npos;
}

TEST(DefaultLimits, AreAboutASecond) {
  LuaLimits d;
  EXPECT_LE(d.seconds, 1.0);
  EXPECT_LE(d.instructions, 500'000'000);
}

TEST(DefaultLimits, AnEndlessLoopIsStoppedFarSoonerThanBefore) {
  for (const char* body : {"    while true do end", "    local i = 0\n    while true do i = i + 1 end",
                           "    while true do pcall(function() while true do end end) end"}) {
    Stopped s = run_default("runaway.lua", runaway(body));
    SCOPED_TRACE(body);
    EXPECT_TRUE(stopped_by_a_limit(s.message)) << s.message;
    EXPECT_NE(s.message.find("runaway.lua"), std::string::npos) << s.message;
    EXPECT_LT(s.seconds, 4.0) << "the old defaults let it run 5-10 s; the new ones stop it in about 1 s";
  }
}

}  // namespace
}  // namespace peerplan
