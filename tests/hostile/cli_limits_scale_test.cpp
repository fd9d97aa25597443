// Issue 21, classes 1, 4, 5 and the plan/measurement parts of 6, from outside the process: a
// strategy cannot escape its limits (pcall, xpcall, a long C call), what it hands over is bounded,
// a failing strategy leaves the others' plans standing; absurd physical figures and unknown names
// in machines, profiles and plans are refused with the ceiling or the nearest valid name; a
// 1024-GPU machine loads, routes and lists in bounded time. Every case here failed on 9259f41.
#include <chrono>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

using Clock = std::chrono::steady_clock;

std::string strategy(const std::string& body) {
  return "return {\n  name = \"hostile\",\n  candidates = function(model, machine, options)\n" + body + "\n  end,\n}\n";
}
const std::string kOnePlan =
    "{name = \"one\", stages = {{gpus = {0}, layer_begin = 0, layer_end = model.layers, tp = 1}}";

struct Timed {
  CliResult r;
  double seconds = 0;
};

Timed run_plans(const ScratchDir& d, const std::string& script, std::vector<std::string> extra = {},
                const std::string& seconds = "1") {
  std::string file = d.write("hostile.lua", script);
  std::vector<std::string> args = {"plans", "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--strategy", file,
                                   "--lua-seconds", seconds, "--lua-memory-mib", "64",
                                   // These cases are about the clock: an instruction budget far out of reach,
                                   // else the 150 M default fires first on a fast host (either stops it in ~1 s).
                                   "--lua-instructions", "100000000000"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto t0 = Clock::now();
  Timed t;
  t.r = run_peerplan(args, "", std::chrono::seconds(60));
  t.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return t;
}

// The limit is 1 s; the target is "stopped within 1 s of it", which the sandbox's own clock checks
// (tests/strategy). Here, end to end through the CLI, the bound only has to tell "stopped by the
// limit" from the old behaviour (running until killed, 60 s here): 10 s does that without failing
// on a loaded 2-core CI box, where starting the binary alone once took 2.2 s.
constexpr double kStoppedBy = 10.0;

TEST(LimitsHostile, EndlessLoopInsidePcallIsStopped) {
  ScratchDir d;
  Timed t = run_plans(d, strategy("    while true do pcall(function() while true do end end) end"));
  expect_input_error(t.r, (d / "hostile.lua").string(), {"time limit"});
  EXPECT_LT(t.seconds, kStoppedBy) << t.r.describe();
}

TEST(LimitsHostile, EndlessLoopInsideXpcallAndNestedPcallIsStopped) {
  ScratchDir d;
  Timed t = run_plans(d, strategy("    local function spin() while true do end end\n"
                                  "    while true do xpcall(function() pcall(spin); spin() end, function(e) return e end) end"));
  expect_input_error(t.r, (d / "hostile.lua").string(), {"time limit"});
  EXPECT_LT(t.seconds, kStoppedBy) << t.r.describe();
}

TEST(LimitsHostile, TimeInsideOneCFunctionCountsAgainstTheClock) {
  // 'a*b' over 99 999 'a's passes the pattern guard ((n+1)^2 <= 1e10) but backtracks ~5e9 steps
  // inside one string.find call, where the count hook never fires: ~10 s of C.
  ScratchDir d;
  Timed t = run_plans(d, strategy("    local s = string.rep('a', 99999)\n    s:find('a*b')\n    return {}"));
  expect_input_error(t.r, (d / "hostile.lua").string(), {"time limit", "hostile.lua:"});
  EXPECT_LT(t.seconds, kStoppedBy) << t.r.describe();
}

TEST(LimitsHostile, BalancedPatternOverALongStringIsRefused) {
  ScratchDir d;
  Timed t = run_plans(d, strategy("    local s = string.rep('(', 300000)\n    s:find('%b()')\n    return {}"), {}, "20");
  expect_input_error(t.r, (d / "hostile.lua").string(), {"pattern limit"});
  EXPECT_LT(t.seconds, kStoppedBy) << t.r.describe();
}

TEST(LimitsHostile, ARunawayStrategyIsReportedAndTheOthersPlansStillComeOut) {
  ScratchDir d;
  Timed t = run_plans(d, strategy("    while true do pcall(function() while true do end end) end"),
                      {"--strategy", "single_gpu", "--json"});
  EXPECT_EQ(t.r.exit_code, 0) << "the other strategy's plans must still come out: " << t.r.describe();
  EXPECT_NE(t.r.err.find("hostile.lua"), std::string::npos) << t.r.describe();
  EXPECT_NE(t.r.err.find("time limit"), std::string::npos) << t.r.describe();
  nlohmann::json doc = nlohmann::json::parse(t.r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << t.r.describe();
  ASSERT_EQ(doc["plans"].size(), 1u) << "single_gpu proposes one plan on the 8-GPU box: " << t.r.out;
  EXPECT_EQ(doc["plans"][0]["strategy"], "single_gpu");
  EXPECT_LT(t.seconds, kStoppedBy) << t.r.describe();
}

TEST(LimitsHostile, WhatCrossesIntoCppIsBounded) {
  // One 8 MiB string handed to 40 plans: 8 MiB inside Lua, 320 MiB of copies outside it before.
  ScratchDir d;
  std::string plans = "    local s = ('x'):rep(8 << 20)\n    local out = {}\n"
                      "    for i = 1, 40 do out[i] = " + kOnePlan + ", name = 'p' .. i, notes = {s}} end\n    return out";
  expect_input_error(run_plans(d, strategy(plans), {}, "10").r, (d / "hostile.lua").string(),
                     {"plan #1", "notes[1]", "at most 4096 bytes"});
  expect_input_error(run_plans(d, strategy("    return {" + kOnePlan + ", name = ('n'):rep(10000)}}"), {}, "10").r,
                     (d / "hostile.lua").string(), {"field 'name'", "at most 8192 bytes"});
  expect_input_error(run_plans(d, strategy("    return {" + kOnePlan + ", extra = {blob = ('e'):rep(300000)}}}"), {}, "10").r,
                     (d / "hostile.lua").string(), {"field 'extra'", "KiB"});
  expect_input_error(run_plans(d, strategy("    local p = " + kOnePlan + "}\n    local out = {}\n"
                                           "    for i = 1, 10001 do out[i] = p end\n    return out"), {}, "10").r,
                     (d / "hostile.lua").string(), {"at most 10000 plans"});
}

TEST(LimitsHostile, PositionsInAScriptsPlanAreReportedOneBasedAsTheScriptWroteThem) {
  // stages[2] of the script's plan starts at layer 10 instead of 16: the error said
  // 'stages/1/layer_begin' (the JSON position), which is stages[1] to the script.
  ScratchDir d;
  Timed t = run_plans(d, strategy("    return {{name = 'gap', stages = {{gpus = {0}, layer_begin = 0, layer_end = 16},\n"
                                  "                                    {gpus = {1}, layer_begin = 10, layer_end = model.layers}}}}"),
                      {}, "10");
  expect_input_error(t.r, (d / "hostile.lua").string(), {"plan #1", "field 'stages[2].layer_begin'"});
}

// ---- class 4: physical figures and names in machines and profiles --------------------------------

CliResult topo_of(const ScratchDir& d, const std::string& text) {
  std::string file = d.write("machine.json", text);
  return run_peerplan({"topo", "--machine", file}, "", std::chrono::seconds(30));
}

TEST(FiguresHostile, AbsurdLinkBandwidthIsRefusedWithTheCeiling) {
  // 1e10 GB/s made simulate spin forever (every transfer finished at the same instant).
  ScratchDir d;
  nlohmann::json m = shipped_json("models/hardware/h200x2-nvlink.json");
  for (auto& l : m["links"])
    if (l["kind"] == "nvlink") l["gbps"] = 1e10;
  expect_input_error(topo_of(d, m.dump()), (d / "machine.json").string(), {"gbps", "100000"});
}

TEST(FiguresHostile, GpuFiguresAboveTheirCeilingsAreRefused) {
  ScratchDir d;
  nlohmann::json m = shipped_json("models/hardware/hgx-h100x8.json");
  expect_input_error(topo_of(d, with_value(m, "/gpus/0/peak_bf16_tflops", 1e12)), (d / "machine.json").string(),
                     {"gpus/0/peak_bf16_tflops", "100000"});
  expect_input_error(topo_of(d, with_value(m, "/gpus/3/hbm_gbps", 1e9)), (d / "machine.json").string(),
                     {"gpus/3/hbm_gbps", "100000"});
  expect_input_error(topo_of(d, with_value(m, "/links/0/latency_us", 1e12)), (d / "machine.json").string(),
                     {"links/0/latency_us"});
}

TEST(FiguresHostile, UnknownMeasurementNamesSuggestTheNearest) {
  ScratchDir d;
  nlohmann::json m = shipped_json("models/hardware/h200x2-nvlink.json");
  expect_input_error(topo_of(d, with_value(m, "/measurements/collectives/0/op", "allreduce")),
                     (d / "machine.json").string(), {"collectives/0/op", "did you mean \"all_reduce\""});
  expect_input_error(topo_of(d, with_value(m, "/measurements/transfers/0/mode", "teleport")),
                     (d / "machine.json").string(), {"transfers/0/mode", "p2p_ce", "host_staged"});
}

TEST(FiguresHostile, ACurveThatGetsFasterAtTheTopIsRefused) {
  // A decreasing time at the top of a curve extrapolated to unbounded bandwidth.
  ScratchDir d;
  nlohmann::json m = shipped_json("models/hardware/h200x2-nvlink.json");
  auto& pts = m["measurements"]["transfers"][0]["points"];
  size_t last = pts.size() - 1;
  double before = pts[last - 1]["median_us"].get<double>();
  for (const char* k : {"min_us", "p10_us", "median_us", "p90_us", "p99_us", "max_us", "mean_us"})
    pts[last][k] = before / 2;
  expect_input_error(topo_of(d, m.dump()), (d / "machine.json").string(), {"median_us", "grows with size"});
}

// ---- class 6: plan keys ------------------------------------------------------------------------

TEST(PlanKeysHostile, AMisspeltPlanKeyIsAnErrorSuggestingTheNearest) {
  ScratchDir d;
  std::string plan = d.write("plan.json", R"({"version": 1, "name": "pp2", "micro_batch": 4, "stages": [
      {"gpus": [0], "layer_begin": 0, "layer_end": 16}, {"gpus": [1], "layer_begin": 16, "layer_end": 32}]})");
  CliResult r = run_peerplan({"simulate", "--plan", plan, "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink",
                              "--workload", "chat", "--requests", "5"});
  expect_input_error(r, plan, {"micro_batch", "did you mean \"micro_batches\""});
  std::string stage = d.write("stage.json", R"({"version": 1, "name": "one", "stages": [
      {"gpus": [0], "layer_begin": 0, "layer_end": 32, "tensor_parallel": 1}]})");
  r = run_peerplan({"simulate", "--plan", stage, "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--workload",
                    "chat", "--requests", "5"});
  expect_input_error(r, stage, {"stages/0/tensor_parallel", "layer_begin"});
}

// ---- class 5: scale ------------------------------------------------------------------------------

// HOSTS HGX-like hosts of 8 GPUs (as bench/make_machine.py writes them), NIC full mesh.
std::string cluster(int hosts) {
  nlohmann::json m = {{"schema", "peerplan.machine"}, {"version", 1}, {"name", "cluster"}, {"origin", "nominal"},
                      {"gpus", nlohmann::json::array()}, {"nodes", nlohmann::json::array()},
                      {"links", nlohmann::json::array()}, {"p2p", "nvlink_only"}};
  auto pcie = [](const std::string& a, const std::string& b) {
    return nlohmann::json{{"a", a}, {"b", b}, {"kind", "pcie"}, {"pcie_gen", 5}, {"pcie_width", 16}};
  };
  for (int h = 0; h < hosts; ++h) {
    std::string p = "h" + std::to_string(h) + "-";
    for (int s = 0; s < 2; ++s)
      m["nodes"].push_back({{"id", p + "cpu" + std::to_string(s)}, {"kind", "cpu_socket"}, {"numa", 2 * h + s}, {"mem_gbps", 307.2}});
    m["nodes"].push_back({{"id", p + "nvswitch"}, {"kind", "nvswitch"}});
    for (int w = 0; w < 4; ++w) {
      std::string W = std::to_string(w);
      m["nodes"].push_back({{"id", p + "hb" + W}, {"kind", "host_bridge"}});
      m["nodes"].push_back({{"id", p + "sw" + W}, {"kind", "pcie_switch"}});
      m["nodes"].push_back({{"id", p + "nic" + W}, {"kind", "nic"}});
      m["links"].push_back(pcie(p + "sw" + W, p + "hb" + W));
      m["links"].push_back(pcie(p + "hb" + W, p + "cpu" + std::to_string(w / 2)));
      m["links"].push_back(pcie(p + "nic" + W, p + "sw" + W));
    }
    for (int i = 0; i < 8; ++i) {
      int g = 8 * h + i;
      m["gpus"].push_back({{"id", g}, {"name", "NVIDIA H100 80GB HBM3"}, {"memory_bytes", 85520809984LL},
                           {"peak_bf16_tflops", 989.4}, {"hbm_gbps", 3350}});
      m["links"].push_back(pcie("gpu" + std::to_string(g), p + "sw" + std::to_string(i / 2)));
      m["links"].push_back({{"a", "gpu" + std::to_string(g)}, {"b", p + "nvswitch"}, {"kind", "nvlink"}, {"nvlinks", 18},
                            {"gbps_per_link", 25}});
    }
    m["links"].push_back({{"a", p + "cpu0"}, {"b", p + "cpu1"}, {"kind", "smp"}, {"gbps", 96}});
  }
  for (int a = 0; a < hosts; ++a)
    for (int b = a + 1; b < hosts; ++b)
      m["links"].push_back({{"a", "h" + std::to_string(a) + "-nic0"}, {"b", "h" + std::to_string(b) + "-nic0"},
                            {"kind", "network"}, {"gbps", 50}, {"latency_us", 5}});
  return m.dump();
}

TEST(ScaleHostile, HybridStaysWithinItsDefaultLimitsOn32And64Gpus) {
  // It hit its instruction/time limits on 32 and 64 GPUs and the whole command failed.
  for (int hosts : {4, 8}) {
    ScratchDir d;
    std::string file = d.write("cluster.json", cluster(hosts));
    CliResult r = run_peerplan({"plans", "--model", "llama-3.1-70b", "--machine", file, "--strategy", "hybrid", "--json"},
                               "", std::chrono::seconds(120));
    ASSERT_EQ(r.exit_code, 0) << hosts * 8 << " GPUs: " << r.describe();
    nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_GT(doc["plans"].size(), 0u) << r.out.substr(0, 400);
  }
}

TEST(ScaleHostile, A1024GpuMachineLoadsRoutesAndLists) {
  // 145 s and 7.3 GB before; bench/scale.sh measures the <= 10 s target (a benchmark, not a timed
  // test). This checks that a 1024-GPU machine loads, routes and lists at all, and that no built-in
  // strategy runs out of its default limits on it.
  ScratchDir d;
  std::string file = d.write("cluster.json", cluster(128));
  CliResult r = run_peerplan({"topo", "--machine", file}, "", std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 0) << r.describe().substr(0, 2000);
  r = run_peerplan({"plans", "--model", "llama-3.1-70b", "--machine", file, "--json"}, "", std::chrono::seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.describe().substr(0, 2000);
  EXPECT_EQ(r.err.find("failed"), std::string::npos) << "every built-in stays within its default limits: " << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_GT(doc["plans"].size(), 10u);
}

}  // namespace
}  // namespace peerplan::hostile
