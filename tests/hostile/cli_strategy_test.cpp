// `peerplan plans --strategy FILE` with hostile strategy scripts: the sandbox's promises (see
// docs/robustness.md, "Threat model of strategy scripts") checked from outside the process. Each
// hostile script must end in exit 2 with the script named, within the limits given, leaving the
// previous --out file untouched. (A test named *_FINDING would be an open hole; none is open.)
#include <gtest/gtest.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

// Wraps a candidates() body into a complete strategy.
std::string strategy(const std::string& body, const std::string& prelude = "") {
  return prelude + "\nreturn {\n  name = \"hostile\",\n  candidates = function(model, machine, options)\n" + body +
         "\n  end,\n}\n";
}
const std::string kOnePlan =
    "return {{name = \"one\", stages = {{gpus = {0}, layer_begin = 0, layer_end = model.layers, tp = 1}}}}";

CliResult run_script(const ScratchDir& d, const std::string& script, const std::string& out,
                     std::chrono::seconds deadline = std::chrono::seconds(60), const std::string& lua_seconds = "2") {
  std::string file = d.write("hostile.lua", script);
  return run_peerplan({"plans", "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--strategy", file,
                       "--lua-seconds", lua_seconds, "--lua-memory-mib", "64", "--out", out},
                      "", deadline);
}

void expect_script_rejected(const std::string& script, const std::vector<std::string>& mentions,
                            std::chrono::seconds deadline = std::chrono::seconds(60), const std::string& lua_seconds = "2") {
  ScratchDir d;
  PreviousOutput prev(d);
  CliResult r = run_script(d, script, prev.path(), deadline, lua_seconds);
  expect_input_error(r, (d / "hostile.lua").string(), mentions);
  prev.expect_untouched();
}

TEST(CliStrategyHostile, AWellBehavedScriptSucceeds) {
  ScratchDir d;
  CliResult r = run_script(d, strategy(kOnePlan), (d / "plans.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

TEST(CliStrategyHostile, TheSandboxHasNoFilesProcessesOrBytecode) {
  // What a script can reach: every escape hatch of the standard library is absent. The script
  // succeeds (exit 0) only if all of them are nil.
  ScratchDir d;
  std::string body =
      "  assert(io == nil and os == nil and require == nil and package == nil and debug == nil, 'io/os/require/debug present')\n"
      "  assert(dofile == nil and loadfile == nil and collectgarbage == nil, 'dofile/loadfile/collectgarbage present')\n"
      "  assert(string.dump == nil, 'string.dump present')\n"
      "  local f, err = load('\\27Lua' .. string.rep('\\0', 40))\n"
      "  assert(f == nil, 'bytecode was loaded')\n"
      "  local ok = pcall(load, 'return 1', 'x', 'b')\n"
      "  assert(not ok, 'binary mode accepted')\n" + kOnePlan;
  CliResult r = run_script(d, strategy(body), (d / "plans.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

TEST(CliStrategyHostile, EndlessLoopHitsTheLimitAndNamesTheLine) {
  expect_script_rejected(strategy("    while true do end"), {"hostile.lua:5", "limit"});
}

TEST(CliStrategyHostile, MemoryBombHitsTheCap) {
  // 1 MB per entry: the 64 MiB cap, not the clock, is under test; a 30 s limit because under ASan
  // on a loaded 2-core machine the 64 allocations took over 2 s (2026-12-02).
  expect_script_rejected(strategy("    local t = {}\n    for i = 1, 1e9 do t[i] = ('x'):rep(1000000) .. i end"), {"memory cap"},
                         std::chrono::seconds(60), "30");
  // One 128 MiB request, above the allocator's hard cap (1.5 x the cap): refused outright.
  expect_script_rejected(strategy("    return ('x'):rep(2^27)"), {"memory cap"}, std::chrono::seconds(60), "30");
}

TEST(CliStrategyHostile, InfiniteRecursionIsAStackOverflowError) {
  expect_script_rejected(strategy("    local function f(n) return f(n + 1) + 1 end\n    return f(1)"), {"stack overflow"});
}

TEST(CliStrategyHostile, ScriptErrorNamesFileAndLine) {
  expect_script_rejected(strategy("    local x = nil\n    return x.field"), {"hostile.lua:6"});
  expect_script_rejected(strategy("    error({})"), {"table"});
  expect_script_rejected("return 42", {"expected the script to return a table"});
  expect_script_rejected("this is not lua", {"syntax error"});
}

TEST(CliStrategyHostile, APlanNamingAGpuThatDoesNotExist) {
  expect_script_rejected(
      strategy("    return {{name = \"ghost\", stages = {{gpus = {99}, layer_begin = 0, layer_end = model.layers, tp = 1}}}}"),
      {"plan #1", "99"});
}

TEST(CliStrategyHostile, APlanWithNanOrNegativeLayers) {
  expect_script_rejected(
      strategy("    return {{name = \"nan\", stages = {{gpus = {0}, layer_begin = 0/0, layer_end = model.layers, tp = 1}}}}"),
      {"plan #1", "layer_begin"});
  expect_script_rejected(
      strategy("    return {{name = \"neg\", stages = {{gpus = {0}, layer_begin = -4, layer_end = model.layers, tp = 1}}}}"),
      {"plan #1"});
}

TEST(CliStrategyHostile, ParameterDeclarationsOfTheWrongType) {
  // Found by the lua fuzz target (2026-12-01): `type = #"int"` (a number) ended in an uncaught
  // nlohmann type_error, i.e. std::terminate, instead of an error naming the field.
  const std::string body = "    " + kOnePlan;
  auto with_params = [&](const std::string& params) {
    return "return {\n  name = \"hostile\",\n  params = " + params +
           ",\n  candidates = function(model, machine, options)\n" + body + "\n  end,\n}\n";
  };
  expect_script_rejected(with_params("{tp = {type = #\"int\", default = 1}}"), {"params/tp/type", "a string"});
  expect_script_rejected(with_params("{tp = {type = \"int\", default = 1, help = {}}}"), {"params/tp/help", "a string"});
}

TEST(CliStrategyHostile, BindingsRejectBadArguments) {
  expect_script_rejected(strategy("    machine.transfer_time(0, 99, 1e6)"), {"out of range"});
  expect_script_rejected(strategy("    machine.transfer_time(0, 1, 0/0)"), {"bytes"});
  expect_script_rejected(strategy("    machine.transfer_time(0, 1, 1e6, 'teleport')"), {"teleport"});
}

TEST(CliStrategyHostile, ErroringMetamethodOnTheReturnedTable) {
  // Found 2026-11-30: the runner read name/candidates with lua_getfield, running __index outside
  // any protected call (a Lua panic: abort). Fixed in 881b886: fields are read raw.
  expect_script_rejected("return setmetatable({}, {__index = function(t, k) error('no field ' .. k) end})", {});
}

TEST(CliStrategyHostile, EndlessMetamethodOnTheReturnedTable) {
  // Same place, looping (the limits were not armed outside calls). Fixed in 881b886.
  expect_script_rejected("return setmetatable({}, {__index = function(t, k) while true do end end})", {},
                         std::chrono::seconds(30));
}

TEST(CliStrategyHostile, ErrorObjectWhoseTostringLoops) {
  // Found 2026-11-30: the traceback handler disarmed the limits, then called the error object's
  // __tostring. Fixed in 881b886: only string and number error objects are shown.
  expect_script_rejected(strategy("    error(setmetatable({}, {__tostring = function() while true do end end}))"), {},
                         std::chrono::seconds(30));
}

TEST(CliStrategyHostile, FinalizerThatLoopsForever) {
  // Found 2026-11-30: hung in ~LuaHost -> lua_close -> luaC_freeallobjects -> GCTM. Keeping the
  // hook armed cannot help: Lua 5.4's GCTM sets L->allowhook = 0 while ANY finalizer runs, so no
  // count hook fires inside __gc, ever. Fixed in b167459: the sandbox's setmetatable refuses a
  // metatable with a __gc field (Lua only marks an object for finalization if __gc is present
  // when setmetatable is called, so that check is sufficient).
  expect_script_rejected(strategy("    setmetatable({}, {__gc = function() while true do end end})\n    error('stop')"), {},
                         std::chrono::seconds(30));
}

TEST(CliStrategyHostile, PathologicalPatternIsStopped) {
  // Found 2026-11-30: one string.find call ran in C for minutes where the count hook never fires,
  // so the wall-clock limit could not stop it. Fixed in 881b886: a "pattern limit" guard.
  expect_script_rejected(strategy("    local s = string.rep('a', 20000)\n    s:find(string.rep('a-', 12) .. 'b')"), {"limit"},
                         std::chrono::seconds(30));
}

TEST(CliStrategyHostile, SharedSubtablesCannotAmplifyPastTheMemoryCap) {
  // Found 2026-11-30; fixed in 881b886 (the conversion is charged against the memory cap).
  // 23 tables in Lua, 2^22 (4 M) nodes after conversion to JSON: lua_to_json copies shared subtables,
  // so a few bytes under the Lua cap become gigabytes outside it.
  expect_script_rejected(strategy("    local x = {}\n    for i = 1, 22 do x = {x, x} end\n"
                                  "    return {{name = \"dag\", stages = {{gpus = {0}, layer_begin = 0, layer_end = model.layers, tp = 1}}, extra = {x}}}"),
                         {}, std::chrono::seconds(30));
}

}  // namespace
}  // namespace peerplan::hostile
