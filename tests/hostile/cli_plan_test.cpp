// Hostile plan files and run options, given to `peerplan simulate --plan FILE ... --out OUT --trace
// TRACE` and to `peerplan validate`. Each case: exit 2, the message names the file (or option) and
// the field, and neither the metrics file nor the trace is written or changed.
#include <gtest/gtest.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

const nlohmann::json& tp2() {
  static const nlohmann::json j = shipped_json("tests/fuzz/seeds/plan/tp2.plan.json");
  return j;
}

std::vector<std::string> simulate_args(const std::string& plan, const ScratchDir& d, const std::string& out,
                                       const std::string& requests = "4") {
  return {"simulate", "--plan", plan, "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--workload", "chat",
          "--requests", requests, "--out", out, "--trace", (d / "out" / "trace.json").string()};
}

// `extra` are further options; `file` is what the message must name ("" for an option error).
void expect_simulate_rejected(const std::string& text, const std::vector<std::string>& mentions,
                              const std::vector<std::string>& extra = {}, bool names_plan = true,
                              const std::string& requests = "4") {
  ScratchDir d;
  PreviousOutput prev(d);  // the trace would land beside it: expect_untouched sees it too
  std::string file = d.write("my.plan.json", text);
  auto args = simulate_args(file, d, prev.path(), requests);
  args.insert(args.end(), extra.begin(), extra.end());
  CliResult r = run_peerplan(args);
  expect_input_error(r, names_plan ? file : "", mentions);
  prev.expect_untouched();
}

TEST(CliPlanHostile, TheUnmodifiedPlanIsSimulated) {
  // The baseline the cases below modify: it must succeed, or they would prove nothing.
  ScratchDir d;
  std::string file = d.write("my.plan.json", tp2().dump(1));
  fs::create_directories(d / "out");
  CliResult r = run_peerplan(simulate_args(file, d, (d / "out" / "m.json").string()));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(d / "out" / "m.json")) << r.describe();
  EXPECT_TRUE(fs::exists(d / "out" / "trace.json")) << r.describe();
}

TEST(CliPlanHostile, P2pOffIsSimulatedAsValidateRunsIt) {
  // `simulate --p2p off` prices the plan validate --p2p off executes: NCCL without P2P, slower for TP2.
  ScratchDir d;
  std::string file = d.write("my.plan.json", tp2().dump(1));
  fs::create_directories(d / "out");
  auto tpot = [&](const std::string& p2p) {
    auto args = simulate_args(file, d, (d / "out" / ("m-" + p2p + ".json")).string(), "40");
    args.insert(args.end(), {"--p2p", p2p});
    CliResult r = run_peerplan(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return nlohmann::json::parse(read_file((d / "out" / ("m-" + p2p + ".json")).string()))["tpot"]["p50_us"].get<double>();
  };
  EXPECT_GT(tpot("off"), tpot("on") * 1.02);
  auto bad = simulate_args(file, d, (d / "out" / "bad.json").string());
  bad.insert(bad.end(), {"--p2p", "maybe"});
  CliResult r = run_peerplan(bad);  // CLI11's own check: exit 2, the option named
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--p2p"), std::string::npos) << r.describe();
  EXPECT_FALSE(fs::exists(d / "out" / "bad.json"));
}

TEST(CliPlanHostile, EmptyTruncatedDeep) {
  expect_simulate_rejected("", {"empty"});
  expect_simulate_rejected(tp2().dump(1).substr(0, 100), {"line"});
  expect_simulate_rejected(deep_array(10000), {"nested"});
  expect_simulate_rejected(deep_object(10000), {"nested"});
}

TEST(CliPlanHostile, AGpuTheMachineDoesNotHave) {
  expect_simulate_rejected(with_value(tp2(), "/stages/0/gpus", {0, 9}), {"stages/0/gpus/1", "9"});
  expect_simulate_rejected(with_value(tp2(), "/stages/0/gpus", {-1, 0}), {"stages/0/gpus/0"});
}

TEST(CliPlanHostile, TheSameGpuTwiceInAStage) {
  expect_simulate_rejected(with_value(tp2(), "/stages/0/gpus", {1, 1}), {"stages/0/gpus/1"});
}

TEST(CliPlanHostile, NegativeNanAndWrongTypes) {
  expect_simulate_rejected(with_value(tp2(), "/stages/0/layer_end", -3), {"stages/0/layer_end"});
  expect_simulate_rejected(with_raw(tp2(), "/stages/0/layer_end", "1e999"), {"1e999"});  // a parse error: no field yet
  expect_simulate_rejected(with_value(tp2(), "/stages/0/tp", "two"), {"stages/0/tp"});
  expect_simulate_rejected(with_value(tp2(), "/stages/0/tp", "NaN"), {"stages/0/tp"});
  expect_simulate_rejected(with_value(tp2(), "/micro_batches", 0), {"micro_batches"});
  expect_simulate_rejected(with_value(tp2(), "/stages", nlohmann::json::array()), {"stages"});
}

TEST(CliPlanHostile, LayersNotCoveredOnce) {
  expect_simulate_rejected(with_value(tp2(), "/stages/0/layer_end", 31), {"stages/0/layer_end", "32 layers"});  // one missing
  expect_simulate_rejected(with_value(tp2(), "/stages/0/layer_end", 33), {"stages/0/layer_end", "32 layers"});  // one too many
}

TEST(CliPlanHostile, RateAndRequestOverridesOutOfRange) {
  // Found 2026-12-01: --rate nan / inf / 1e-320 and any --requests were taken as given (a workload
  // file's rate_rps and num_requests are range-checked); NaN arrivals then ran to "success".
  const std::string ok = tp2().dump(1);
  for (const char* rate : {"nan", "inf", "1e-320", "-1"})
    expect_simulate_rejected(ok, {"--rate"}, {"--rate", rate}, false);
  expect_simulate_rejected(ok, {"--requests"}, {}, false, "100000000000");
  expect_simulate_rejected(ok, {"--requests"}, {}, false, "-5");
}

TEST(CliPlanHostile, PlanRateOverrideOutOfRange) {
  // Same finding for `peerplan plan` (the search only checked --rate > 0: inf and 1e-320 passed;
  // --requests was not capped). validate got the same checks (not testable without a GPU build).
  for (const char* rate : {"nan", "inf", "1e-320"}) {
    ScratchDir d;
    PreviousOutput prev(d);
    CliResult r = run_peerplan({"plan", "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--strategy", "single_gpu",
                                "--rate", rate, "--json-out", prev.path()});
    expect_input_error(r, "", {"--rate"});
    prev.expect_untouched();
  }
  ScratchDir d;
  PreviousOutput prev(d);
  CliResult r = run_peerplan({"plan", "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--strategy", "single_gpu",
                              "--requests", "100000000000", "--json-out", prev.path()});
  expect_input_error(r, "", {"--requests"});
  prev.expect_untouched();
}

TEST(CliPlanHostile, ValidateWithAProfileFromAnotherHostWritesNothing) {
  // The shipped 2xH200 profile, its GPU UUIDs and host name changed. A CPU-only build refuses
  // validate outright ("built without CUDA"); a CUDA build on a host without GPUs says "no CUDA
  // GPU" naming the plan; on any GPU host it is "profile from another host" naming the profile
  // (preflight, tested field by field in validate_preflight_test.cpp). Every way: exit 2 before
  // anything runs, and no report directory.
  ScratchDir d;
  nlohmann::json prof = shipped_json("models/hardware/h200x2-nvlink.json");
  prof["host"] = "some-other-node";
  for (auto& g : prof["gpus"]) g["uuid"] = "GPU-00000000-0000-0000-0000-000000000000";
  std::string profile = d.write("other-host.json", prof.dump());
  std::string plan = d.write("my.plan.json", tp2().dump(1));
  const fs::path report = d / "report";
  CliResult r = run_peerplan({"validate", "--plan", plan, "--model", "llama-3.1-8b", "--workload", "chat",
                              "--machine", profile, "--requests", "4", "--out", report.string()});
  expect_input_error(r, "", {});
  EXPECT_TRUE(r.err.find(plan) != std::string::npos || r.err.find(profile) != std::string::npos ||
              r.err.find("without CUDA") != std::string::npos)
      << r.describe();
  EXPECT_FALSE(fs::exists(report)) << "a refused validation created its report directory";
}

}  // namespace
}  // namespace peerplan::hostile
