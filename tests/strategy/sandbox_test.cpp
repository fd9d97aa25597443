// The Lua sandbox's promises, each checked by the message a hostile script gets.
#include <chrono>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

using testing::write_script;

// Wraps `body` as the candidates() of a strategy; the body starts on line 4.
std::string strategy(const std::string& body) {
  return "-- hostile test script\nreturn { name = 'hostile',\n  candidates = function(model, machine, options)\n" + body +
         "\n  end }\n";
}

struct Outcome {
  bool threw = false;
  std::string message, file;
  double seconds = 0;
};

Outcome run(const std::string& name, const std::string& script, LuaLimits limits = {}) {
  static auto m = testing::model("llama-3.1-8b");
  static auto topo = testing::machine("pcie-2socket-8");
  std::string path = write_script(name, script);
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  try {
    run_strategies({path}, m.cfg, m.fig, CostModel(*topo), {}, MemoryOptions{}, limits);
  } catch (const InputError& e) {
    o.threw = true;
    o.message = e.what();
    o.file = e.file();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

#define EXPECT_HAS(hay, needle) EXPECT_NE((hay).find(needle), std::string::npos) << "expected \"" << (needle) << "\" in:\n" << (hay)

TEST(Sandbox, OpeningAFileFindsNoIoLibrary) {
  Outcome o = run("io.lua", strategy("    local f = io.open('/etc/passwd')"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "io.lua:4:");             // names the script line
  EXPECT_HAS(o.message, "global 'io'");           // io is simply absent
  EXPECT_HAS(o.message, "stack traceback");
  EXPECT_HAS(o.file, "io.lua");
}

TEST(Sandbox, OsExecuteIsAbsent) {
  Outcome o = run("os.lua", strategy("    os.execute('touch /tmp/pwned')"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "os.lua:4:");
  EXPECT_HAS(o.message, "global 'os'");
}

TEST(Sandbox, RequireIsAbsent) {
  Outcome o = run("require.lua", strategy("    local x = require('socket')"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "global 'require'");
}

TEST(Sandbox, EndlessLoopStopsAtTheTimeLimitWithinASecondOfIt) {
  LuaLimits l;
  l.seconds = 0.3;
  Outcome o = run("loop.lua", strategy("    local i = 0\n    while true do i = i + 1 end"), l);
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "loop.lua:5:");
  EXPECT_HAS(o.message, "time limit of 0.3 s exceeded");
  EXPECT_LT(o.seconds, 1.3);  // stopped within a second of the limit
}

TEST(Sandbox, EndlessLoopStopsAtTheInstructionBudget) {
  LuaLimits l;
  l.instructions = 1'000'000;
  Outcome o = run("budget.lua", strategy("    while true do end"), l);
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "budget.lua:4:");
  EXPECT_HAS(o.message, "instruction limit of 1000000 exceeded");
}

TEST(Sandbox, TableGrowingWithoutBoundHitsTheMemoryCap) {
  LuaLimits l;
  l.memory_bytes = 16 << 20;
  l.seconds = 60;  // the cap is under test, not the clock: a loaded CI box under ASan is slow
  Outcome o = run("grow.lua", strategy("    local t = {}\n    for i = 1, 1e12 do t[i] = i end"), l);
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "memory cap of 16 MiB exceeded");
  EXPECT_HAS(o.message, "grow.lua:5");
}

TEST(Sandbox, StringRepBombHitsTheMemoryCap) {
  LuaLimits l;
  l.memory_bytes = 16 << 20;
  l.seconds = 60;  // the cap is under test, not the clock: a loaded CI box under ASan is slow
  Outcome o = run("rep.lua", strategy("    local s = ('x'):rep(1e12)"), l);
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "memory cap of 16 MiB exceeded");
  EXPECT_HAS(o.message, "rep.lua:4:");
  // Doubling a string: each step is legal, the total is not.
  Outcome d = run("double.lua", strategy("    local s = 'x'\n    while true do s = s .. s end"), l);
  ASSERT_TRUE(d.threw);
  EXPECT_HAS(d.message, "memory cap of 16 MiB exceeded");
}

TEST(Sandbox, BadArgumentToACallbackNamesTheScriptLine) {
  Outcome o = run("cb.lua", strategy("    local x = 1\n    return machine.transfer_time(0, 99, 1e6)"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "cb.lua:5:");
  EXPECT_HAS(o.message, "bad argument #2 to 'transfer_time' (GPU id 99 out of range 0..7)");
  Outcome m = run("mode.lua", strategy("    return machine.transfer_time(0, 1, 1e6, 'teleport')"));
  ASSERT_TRUE(m.threw);
  EXPECT_HAS(m.message, "invalid option 'teleport'");
  Outcome n = run("nan.lua", strategy("    return machine.transfer_time(0, 1, 0/0)"));
  ASSERT_TRUE(n.threw);
  EXPECT_HAS(n.message, "bytes must be >= 0 and finite");
}

TEST(Sandbox, ErrorRaisedInsideALuaCallbackCarriesItsLineAndTraceback) {
  Outcome o = run("sort.lua", strategy("    local t = {3, 1, 2}\n    table.sort(t, function(a, b)\n      error('comparator broke')\n    end)"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "sort.lua:6: comparator broke");
  EXPECT_HAS(o.message, "in function 'table.sort'");
}

TEST(Sandbox, BytecodeIsRefusedByLoad) {
  Outcome o = run("bc.lua", strategy("    assert(load('\\27Lua' .. string.rep('\\0', 40)))"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "attempt to load a binary chunk");
  Outcome b = run("mode_b.lua", strategy("    load('return 1', 'x', 'b')"));
  ASSERT_TRUE(b.threw);
  EXPECT_HAS(b.message, "text chunks only");
  // Text chunks do load, bound to the sandbox (no io there either).
  Outcome t = run("text.lua", strategy("    local f = assert(load('return io'))\n    assert(f() == nil)\n    return {}"));
  EXPECT_FALSE(t.threw) << t.message;
}

TEST(Sandbox, DumpDofileLoadfileAndCollectgarbageAreGone) {
  Outcome o = run("gone.lua", strategy(
      "    assert(string.dump == nil and dofile == nil and loadfile == nil and collectgarbage == nil)\n"
      "    assert(debug == nil and package == nil)\n    return {}"));
  EXPECT_FALSE(o.threw) << o.message;
}

TEST(Sandbox, PathologicalPatternIsRefusedBeforeItRuns) {
  // The guard's message is the proof it never ran: run, this pattern backtracks for minutes.
  Outcome o = run("pat.lua", strategy("    local s = string.rep('a', 20000)\n    return s:find(string.rep('a-', 12) .. 'b')"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "pattern limit: 12 repetition items over a 20000-byte string");
  Outcome ok = run("pat_ok.lua", strategy("    assert(('tp2[0,1]'):match('^tp(%d+)') == '2')\n    return {}"));
  EXPECT_FALSE(ok.threw) << ok.message;
}

TEST(Sandbox, MetamethodsOnTheReturnedTableNeverRun) {
  // Fields are read raw: an __index that errors or loops is simply not consulted.
  Outcome o = run("meta.lua", "return setmetatable({}, {__index = function(t, k) while true do end end})");
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "field 'name'");
}

TEST(Sandbox, ErrorObjectsThatAreNotStringsAreNamedNotCalled) {
  Outcome o = run("tbl.lua", strategy("    error(setmetatable({}, {__tostring = function() while true do end end}))"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "tbl.lua:4: (error object is a table value)");
}

TEST(Sandbox, FinalizersAreRefusedBecauseLuaRunsThemWithHooksOff) {
  // A looping __gc would run at lua_close (or any GC step) where no hook can stop it.
  Outcome o = run("gc.lua", strategy("    setmetatable({}, {__gc = function() while true do end end})\n    error('stop')"));
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "gc.lua:4: the sandbox does not run __gc finalizers");
  EXPECT_LT(o.seconds, 3.0);
  Outcome ok = run("mt.lua", strategy("    local t = setmetatable({}, {__index = function() return 7 end})\n    assert(t.x == 7)\n    return {}"));
  EXPECT_FALSE(ok.threw) << ok.message;
}

TEST(Sandbox, SharedSubtablesCannotAmplifyPastTheCap) {
  LuaLimits l;
  l.memory_bytes = 16 << 20;
  l.seconds = 60;  // the cap is under test, not the clock: a loaded CI box under ASan is slow
  Outcome o = run("dag.lua", strategy("    local x = {}\n    for i = 1, 22 do x = {x, x} end\n"
                                      "    return {{name = 'dag', stages = {{gpus = {0}, layer_begin = 0, layer_end = model.layers}}, extra = {x}}}"),
                  l);
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "plan #1");
  EXPECT_HAS(o.message, "memory cap of 16 MiB once converted");
}

TEST(Sandbox, ScriptMustReturnAStrategyTable) {
  Outcome o = run("num.lua", "return 42");
  ASSERT_TRUE(o.threw);
  EXPECT_HAS(o.message, "expected the script to return a table");
  Outcome s = run("syntax.lua", "this is not lua");
  ASSERT_TRUE(s.threw);
  EXPECT_HAS(s.message, "syntax error");
  EXPECT_HAS(s.message, "syntax.lua:1:");
}

}  // namespace
}  // namespace peerplan
