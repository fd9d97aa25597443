// Issue 21, class 6 (the part in planner/core, model and validate): nonsense that was accepted.
// Numeric options out of range or NaN, prompts longer than the model's context, and
// `validate --compare` on metrics of different runs. Each case failed on 9259f41.
#include <gtest/gtest.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

const std::string kPlan = std::string(PEERPLAN_SOURCE_DIR) + "/docs/validation/plans/llama8b-tp2.json";

std::vector<std::string> plans_with(std::vector<std::string> extra) {
  std::vector<std::string> a{"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy", "single_gpu"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> simulate_with(const std::string& workload, std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"simulate", "--plan", kPlan, "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink",
                             "--workload", workload, "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(CliRangesHostile, NumericOptionsOutOfRangeOrNanAreRefusedNamingTheOption) {
  // Was: all accepted (negative sequences and reserves, a NaN time limit, -1 grid points; 1e300
  // read into an integer option). Now exit 2 naming the option and its range.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {plans_with({"--max-seqs", "-1"}), "--max-seqs"},
      {plans_with({"--max-seqs", "1e300"}), "--max-seqs"},
      {plans_with({"--reserve-bytes", "-4096"}), "--reserve-bytes"},
      {plans_with({"--reserve-bytes", "1e300"}), "--reserve-bytes"},
      {plans_with({"--context", "0"}), "--context"},
      {plans_with({"--lua-seconds", "nan"}), "--lua-seconds"},
      {plans_with({"--lua-seconds", "inf"}), "--lua-seconds"},
      {plans_with({"--lua-memory-mib", "nan"}), "--lua-memory-mib"},
      {simulate_with("chat", {"--shape-points", "-1"}), "--shape-points"},
      {{"plan", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--shape-points", "-1"}, "--shape-points"},
  };
  for (const auto& [args, option] : cases) {
    CliResult r = run_peerplan(args);
    SCOPED_TRACE(option + " " + args.back());
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find(option), std::string::npos) << r.describe();
    EXPECT_NE(r.err.find(" in ["), std::string::npos) << "the message gives the range: " << r.describe();
  }
}

// A workload with prompts of `prompt` tokens or a uniform range, 20 requests.
std::string workload(const ScratchDir& d, const nlohmann::json& prompt) {
  nlohmann::json w = {{"name", "long-prompts"},
                      {"arrival", {{"process", "poisson"}, {"rate_rps", 2}}},
                      {"num_requests", 20},
                      {"prompt_tokens", prompt},
                      {"output_tokens", {{"dist", "fixed"}, {"value", 16}}},
                      {"batching", {{"max_num_seqs", 4}, {"max_batched_tokens", 8192}}}};
  return d.write("long.json", w.dump());
}

TEST(CliRangesHostile, PromptsLongerThanTheModelsContextAreRefused) {
  // 200k-token prompts on Llama-3.1-8B (131072-token context) were simulated as if they fit.
  ScratchDir d;
  const std::string w = workload(d, {{"dist", "fixed"}, {"value", 200000}});
  CliResult r = run_peerplan(simulate_with(w));
  expect_input_error(r, w, {"prompt_tokens", "20 of 20 requests", "131072 tokens", "--drop-over-context"});
}

TEST(CliRangesHostile, DropOverContextDropsThemAsEnginesDoAndSaysHowMany) {
  ScratchDir d;
  const std::string w = workload(d, {{"dist", "uniform"}, {"min", 100000}, {"max", 160000}});
  CliResult refused = run_peerplan(simulate_with(w));
  EXPECT_EQ(refused.exit_code, 2) << refused.describe();
  CliResult r = run_peerplan(simulate_with(w, {"--drop-over-context"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto m = nlohmann::json::parse(r.out);
  const int kept = m.value("requests", 0);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 20) << "uniform in [100k, 160k]: about half are longer than 131072";
  EXPECT_NE(r.err.find("dropped " + std::to_string(20 - kept) + " request"), std::string::npos)
      << "the count is reported: " << r.describe();
}

TEST(CliRangesHostile, CompareRefusesMetricsOfDifferentRunsAndSaysWhatDiffers) {
  // Was: metrics of different plans, models or workloads compared without a word.
  ScratchDir d;
  const std::string dir = std::string(PEERPLAN_SOURCE_DIR) + "/docs/validation/runs/tp2/";
  const std::string pred = dir + "predicted.metrics.json";
  nlohmann::json other = shipped_json("docs/validation/runs/tp2/measured.metrics.json");
  other["model"] = "mixtral-8x7b";
  other["plan"] = "ep2[0,1]";
  const std::string meas = d.write("measured.metrics.json", other.dump());
  CliResult r = run_peerplan({"validate", "--compare", pred, meas});
  expect_input_error(r, meas, {"predicted.metrics.json", "model 'llama-3.1-8b' vs 'mixtral-8x7b'", "plan 'tp2[0,1]'"});
  EXPECT_EQ(r.err.find("workload '"), std::string::npos) << "the workload is the same, so not listed";

  CliResult same = run_peerplan({"validate", "--compare", pred, dir + "measured.metrics.json"});
  EXPECT_EQ(same.exit_code, 0) << "one run's prediction and measurement still compare: " << same.describe();
}

}  // namespace
}  // namespace peerplan::hostile
