// Hostile workload files, given to `peerplan plans --workload FILE` (which sizes the KV cache from
// it). Each case: exit 2, the message names the file and the field, the previous output stays.
#include <gtest/gtest.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

const nlohmann::json& chat() {
  static const nlohmann::json j = nlohmann::json::parse(R"({
    "version": 1, "name": "hostile-base",
    "arrival": {"process": "poisson", "rate_rps": 4},
    "num_requests": 200,
    "prompt_tokens": {"dist": "lognormal", "mean": 800, "sigma": 0.8, "max": 8192},
    "output_tokens": {"dist": "uniform", "min": 16, "max": 512},
    "batching": {"max_num_seqs": 64, "max_batched_tokens": 8192},
    "slo": {"ttft_ms": 1000, "tpot_ms": 100, "e2e_p99_ms": 60000}
  })");
  return j;
}

CliResult run_with(const ScratchDir& d, const std::string& text, const std::string& out) {
  std::string file = d.write("workload.json", text);
  return run_peerplan({"plans", "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--strategy", "single_gpu",
                       "--workload", file, "--out", out});
}

void expect_workload_rejected(const std::string& text, const std::vector<std::string>& mentions) {
  ScratchDir d;
  PreviousOutput prev(d);
  CliResult r = run_with(d, text, prev.path());
  expect_input_error(r, (d / "workload.json").string(), mentions);
  prev.expect_untouched();
}

TEST(CliWorkloadHostile, TheBaseWorkloadIsAccepted) {
  ScratchDir d;
  CliResult r = run_with(d, chat().dump(1), (d / "plans.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

TEST(CliWorkloadHostile, EmptyTruncatedDeep) {
  expect_workload_rejected("", {"empty"});
  expect_workload_rejected(chat().dump(1).substr(0, 120), {"line"});
  expect_workload_rejected(deep_object(10000), {"nested"});
}

TEST(CliWorkloadHostile, ZeroOrNegativeRate) {
  expect_workload_rejected(with_value(chat(), "/arrival/rate_rps", 0), {"arrival/rate_rps"});
  expect_workload_rejected(with_value(chat(), "/arrival/rate_rps", -3), {"arrival/rate_rps"});
  expect_workload_rejected(with_value(chat(), "/arrival/rate_rps", "NaN"), {"arrival/rate_rps"});
}

TEST(CliWorkloadHostile, ZeroSizesAndLimits) {
  expect_workload_rejected(with_value(chat(), "/num_requests", 0), {"num_requests"});
  expect_workload_rejected(with_value(chat(), "/output_tokens/min", 0), {"output_tokens/min"});
  expect_workload_rejected(with_value(chat(), "/batching/max_num_seqs", 0), {"batching/max_num_seqs"});
  expect_workload_rejected(with_value(chat(), "/slo/ttft_ms", -1), {"slo/ttft_ms"});
  expect_workload_rejected(with_value(chat(), "/prompt_tokens/sigma", 0), {"prompt_tokens/sigma"});
}

TEST(CliWorkloadHostile, MinAboveMax) {
  expect_workload_rejected(with_value(chat(), "/output_tokens/min", 4096), {"output_tokens/min"});
}

TEST(CliWorkloadHostile, UnknownDistributionAndProcessListTheValidOnes) {
  expect_workload_rejected(with_value(chat(), "/prompt_tokens/dist", "zipf"), {"prompt_tokens/dist", "lognormal"});
  expect_workload_rejected(with_value(chat(), "/arrival/process", "bursty"), {"arrival/process", "poisson"});
}

TEST(CliWorkloadHostile, LognormalWithoutACapAndAHugeSigmaIsRefused) {
  // No "max": the loader derives the cap as exp(mu + 4 sigma); with mu = 5, sigma = 1000 that is
  // +inf and int64_t(+inf) was undefined behaviour (UBSan: workload.cpp:77); without the sanitizer
  // the message was about fields the user never wrote. Found 2026-11-30, fixed in 1a65ba0.
  nlohmann::json w = chat();
  w["prompt_tokens"] = {{"dist", "lognormal"}, {"mu", 5}, {"sigma", 1000}};
  expect_workload_rejected(w.dump(1), {"prompt_tokens/sigma"});
}

TEST(CliWorkloadHostile, RatesAndSlosThatUnderflowAreRefused) {
  // 1e-320 requests/s passes "> 0" but makes every inter-arrival time infinite; an SLO of 1e-322 ms
  // becomes 0 s after the ms -> s division. Both must be refused naming the field (fixed in 1a65ba0).
  expect_workload_rejected(with_value(chat(), "/arrival/rate_rps", 1e-320), {"arrival/rate_rps"});
  expect_workload_rejected(with_value(chat(), "/slo/ttft_ms", 1e-322), {"slo/ttft_ms"});
}

TEST(CliWorkloadHostile, MissingTraceIsReportedAgainstTheWorkloadField) {
  // Was: "<dir>/no-such-trace.csv: cannot open file", which named neither the workload that
  // refers to it nor the field (arrival/file). Found 2026-11-30, fixed in 7ed85e7.
  nlohmann::json w = chat();
  w["arrival"] = {{"process", "trace"}, {"file", "no-such-trace.csv"}};
  expect_workload_rejected(w.dump(1), {"no-such-trace.csv", "arrival/file"});
}

TEST(CliWorkloadHostile, PlansRefusesPromptsLongerThanTheModelsContext) {
  // `plans --workload` sized the KV cache for 160k-token prompts on a 131k-context model without a
  // word, where plan and simulate refuse them (issue 21, class 6). Now the same rule: refused
  // naming the workload, the field and the count, or dropped under --drop-over-context.
  nlohmann::json w = chat();
  w["prompt_tokens"] = {{"dist", "uniform"}, {"min", 100000}, {"max", 160000}};
  w["output_tokens"] = {{"dist", "fixed"}, {"value", 512}};
  w["num_requests"] = 50;
  expect_workload_rejected(w.dump(1), {"prompt_tokens", "of 50 requests", "131072 tokens", "--drop-over-context"});
  ScratchDir d;
  const std::string file = d.write("workload.json", w.dump(1));
  CliResult r = run_peerplan({"plans", "--model", "llama-3.1-8b", "--machine", "hgx-h100x8", "--strategy", "single_gpu",
                              "--workload", file, "--drop-over-context", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("as --drop-over-context asks"), std::string::npos) << "the count is reported: " << r.describe();
  EXPECT_EQ(nlohmann::json::parse(r.out)["memory_options"]["context"], 131072 + 512)
      << "memory for the longest prompt that is kept";
}

// A workload replaying a public trace fixture (tests/data/model), copied beside it.
std::string public_trace_workload(const ScratchDir& d, const std::string& fixture) {
  d.write(fixture, read_file(std::string(PEERPLAN_TEST_DATA) + "/model/" + fixture));
  nlohmann::json w = {{"arrival", {{"process", "trace"}, {"file", fixture}}}};
  return d.write("workload.json", w.dump());
}

const std::string kPlan = std::string(PEERPLAN_SOURCE_DIR) + "/docs/validation/plans/llama8b-tp2.json";

std::vector<std::string> simulate_args(const std::string& workload, std::vector<std::string> extra) {
  std::vector<std::string> a = {"simulate", "--plan", kPlan, "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink",
                                "--workload", workload, "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(CliWorkloadHostile, PublicTracesReplayAsTheyAreWithAWindowAndASpeedup) {
  ScratchDir d;
  for (const char* fixture : {"azure-code-2023.csv", "azure-conv-2024.csv", "burstgpt.csv"}) {
    SCOPED_TRACE(fixture);
    const std::string w = public_trace_workload(d, fixture);
    CliResult all = run_peerplan(simulate_args(w, {}));
    ASSERT_EQ(all.exit_code, 0) << all.describe();
    const int n = nlohmann::json::parse(all.out).value("requests", 0);
    EXPECT_GE(n, 36);
    CliResult half = run_peerplan(simulate_args(w, {"--trace-window", "0:3", "--trace-speedup", "2"}));
    ASSERT_EQ(half.exit_code, 0) << half.describe();
    const auto m = nlohmann::json::parse(half.out);
    EXPECT_GT(m.value("requests", 0), 0);
    EXPECT_LT(m.value("requests", 0), n) << "a 3 s window of a longer trace";
    EXPECT_NE(half.err.find("peerplan: note: replaying requests 0.."), std::string::npos) << half.describe();
  }
  const std::string burst = public_trace_workload(d, "burstgpt.csv");
  CliResult skipped = run_peerplan(simulate_args(burst, {}));
  EXPECT_NE(skipped.err.find("skipped 3 rows with 0 prompt or output tokens"), std::string::npos) << skipped.describe();
}

TEST(CliWorkloadHostile, TraceWindowMistakesNameTheOption) {
  ScratchDir d;
  const std::string w = public_trace_workload(d, "azure-code-2023.csv");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--trace-window", "5"}, {"--trace-window", "9:3"}, {"--trace-window", "5000:6000"},
        {"--trace-speedup", "2", "--rate", "3"}}) {
    CliResult r = run_peerplan(simulate_args(w, extra));
    SCOPED_TRACE(extra[0] + " " + extra[1]);
    expect_input_error(r, "", {extra[0]});
  }
  for (const char* bad : {"0", "nan", "-2", "1e9"}) {  // refused by the option's range check, as other numeric options
    CliResult r = run_peerplan(simulate_args(w, {"--trace-speedup", bad}));
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find("--trace-speedup"), std::string::npos) << r.describe();
    EXPECT_NE(r.err.find("[0.001, 1000]"), std::string::npos) << r.describe();
  }
  CliResult poisson = run_peerplan(simulate_args("chat", {"--trace-window", "0:10"}));
  expect_input_error(poisson, "chat.json", {"--trace-window", "Poisson"});
}

}  // namespace
}  // namespace peerplan::hostile
