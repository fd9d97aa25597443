// apply_overrides (planner/model/workload.hpp): `--rate` and `--requests`, one rule for plan,
// simulate, validate and plan --validate (there were four copies, and two of them left a trace's
// arrivals in place when --rate was given).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model_test_util.hpp"
#include "planner/core/error.hpp"
#include "planner/model/workload.hpp"

namespace peerplan {
namespace {

Workload trace_workload() {
  nlohmann::json j = {{"arrival", {{"process", "trace"}, {"file", "trace.csv"}}}};
  return parse_workload(j.dump(), test::test_data("workload-under-test.json"));
}

std::string refusal(Workload w, WorkloadOverrides o) {
  try {
    apply_overrides(w, o);
  } catch (const InputError& e) {
    return e.field() + ": " + e.expected();
  }
  return "";
}

TEST(WorkloadOverrides, ZeroKeepsTheWorkloadsOwn) {
  Workload w = load_workload(resolve_workload_path("chat"));
  const Workload before = w;
  apply_overrides(w, {});
  EXPECT_EQ(w.rate_rps, before.rate_rps);
  EXPECT_EQ(w.num_requests, before.num_requests);
  EXPECT_EQ(w.arrival, Workload::Arrival::Poisson);
}

TEST(WorkloadOverrides, RateAndCountReplaceAPoissonWorkloads) {
  Workload w = load_workload(resolve_workload_path("chat"));  // 4 req/s, 2000 requests
  apply_overrides(w, {6.0, 100});
  EXPECT_EQ(w.rate_rps, 6.0);
  EXPECT_EQ(w.num_requests, 100);
  EXPECT_EQ(w.generate().size(), 100u);
}

TEST(WorkloadOverrides, ARateOnATraceSwitchesToPoissonAndKeepsTheRecordedLengths) {
  // trace.csv: 5 requests over 3 s, prompts 512, 1024, 300, 2000, 50. With --rate 100 the
  // arrivals are Poisson at 100 req/s (the last of 5 arrives well before 3 s), the lengths stay.
  Workload w = trace_workload();
  apply_overrides(w, {100.0, 0});
  EXPECT_EQ(w.arrival, Workload::Arrival::Poisson);
  const auto r = w.generate();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_LT(r.back().arrival_s, 1.0) << "Poisson at 100 req/s, not the trace's 3 s";
  EXPECT_GT(r[0].arrival_s, 0.0) << "the first Poisson arrival is after one gap, not at the trace's 0";
  EXPECT_EQ(r[0].prompt_tokens, 512);
  EXPECT_EQ(r[3].prompt_tokens, 2000);
}

TEST(WorkloadOverrides, MoreRequestsThanATraceHoldsIsRefusedUnlessTheRateReplacesIt) {
  // The trace has 5 rows: 6 requests would loop silently (a workload file's num_requests is
  // refused the same way). With --rate the trace's timestamps are gone, so 6 is fine.
  EXPECT_NE(refusal(trace_workload(), {0, 6}).find("--requests: at most 5 requests"), std::string::npos);
  EXPECT_EQ(refusal(trace_workload(), {0, 5}), "");
  EXPECT_EQ(refusal(trace_workload(), {10.0, 6}), "");
}

TEST(WorkloadOverrides, OutOfRangeValuesNameTheOption) {
  // NaN, inf and denormals passed a `> 0` check once (robustness finding): the same ranges as a
  // workload file's rate_rps and num_requests.
  const Workload chat = load_workload(resolve_workload_path("chat"));
  for (double rate : {std::nan(""), std::numeric_limits<double>::infinity(), 1e-320, -1.0})
    EXPECT_NE(refusal(chat, {rate, 0}).find("--rate: a request rate in [1e-6, 1e9]"), std::string::npos) << rate;
  EXPECT_NE(refusal(chat, {0, 100'000'000'000}).find("--requests"), std::string::npos);
  EXPECT_NE(refusal(chat, {0, -5}).find("--requests"), std::string::npos);
}

}  // namespace
}  // namespace peerplan
