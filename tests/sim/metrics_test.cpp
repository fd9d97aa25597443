#include "planner/sim/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/core/error.hpp"

using namespace peerplan;

TEST(Metrics, DefinitionsMatchVllmBenchmarkServing) {
  // Two requests: (arrive 0, first 1, finish 3, 5 tokens) and (arrive 1, first 1.5, finish 2, 1 token).
  std::vector<RequestTiming> r = {{0, 0.0, 1.0, 3.0, 100, 5}, {1, 1.0, 1.5, 2.0, 50, 1}};
  Slo slo{1.0, 0.4, 10.0};
  Metrics m = compute_metrics(r, slo);
  EXPECT_EQ(m.completed, 2);
  EXPECT_DOUBLE_EQ(m.ttft.p50, 0.75) << "TTFTs 1.0 and 0.5, numpy-linear median";
  EXPECT_EQ(m.tpot.n, 1) << "a one-token request has no TPOT";
  EXPECT_DOUBLE_EQ(m.tpot.p50, 0.5) << "(3-1)/(5-1)";
  EXPECT_DOUBLE_EQ(m.e2e.max, 3.0);
  EXPECT_DOUBLE_EQ(m.duration_s, 3.0);
  EXPECT_DOUBLE_EQ(m.output_tokens_per_s, 2.0) << "6 tokens over 3 s";
  EXPECT_EQ(m.slo_met, 1) << "request 0 misses TPOT 0.4";
  EXPECT_DOUBLE_EQ(m.goodput_rps, 1.0 / 3.0);
  EXPECT_TRUE(m.e2e_p99_met);
}

TEST(Metrics, UnfinishedRequestsCountAgainstAttainment) {
  std::vector<RequestTiming> r = {{0, 0.0, 0.1, 0.2, 10, 2}, {1, 0.0, -1, -1, 10, 2}};
  Metrics m = compute_metrics(r, Slo{});
  EXPECT_EQ(m.completed, 1);
  EXPECT_DOUBLE_EQ(m.slo_attainment, 0.5);
  EXPECT_FALSE(m.e2e_p99_met);
}

TEST(Metrics, JsonRoundTripKeepsEveryFigure) {
  std::vector<RequestTiming> r = {{0, 0.0, 1.0, 3.0, 100, 5}, {7, 1.0, 1.5, 2.0, 50, 1}};
  Metrics m = compute_metrics(r, Slo{});
  m.plan = "tp2[0,1]";
  m.gpus.push_back({0, 1.0, 0.5, 0.1, 1.4, 1.0 / 3});
  m.links.push_back({"gpu0->gpu1", 1e9, 0.5, 0.2});
  m.busiest_link = "gpu0->gpu1";
  auto j = metrics_to_json(m);
  EXPECT_EQ(j["format"], "peerplan.metrics");
  Metrics back = parse_metrics_json(j, "x.json");
  EXPECT_EQ(back.plan, m.plan);
  EXPECT_NEAR(back.ttft.p99, m.ttft.p99, 1e-12);
  EXPECT_NEAR(back.gpus[0].communication_s, 0.5, 1e-12);
  ASSERT_EQ(back.per_request.size(), 2u);
  EXPECT_EQ(back.per_request[1].id, 7);
  EXPECT_NEAR(back.per_request[1].finish_s, 2.0, 1e-12);
  EXPECT_EQ(back.links[0].link, "gpu0->gpu1");
}

TEST(Metrics, ForeignJsonIsRejectedByName) {
  nlohmann::json j = {{"format", "something else"}};
  try {
    parse_metrics_json(j, "pred.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "pred.json");
    EXPECT_NE(e.field().find("format"), std::string::npos);
  }
}

namespace {
// 300 000 latencies spread over four decades, deterministic.
std::vector<double> spread_latencies(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(0.001 * std::pow(10.0, 2.0 + 2.0 * std::sin(0.37 * i) * std::cos(0.011 * i)));
  return v;
}
}  // namespace

TEST(Metrics, SketchIsExactUpToItsLimit) {
  // Below the limit the sketch keeps every sample: the figures are latency_stats' to the bit.
  std::vector<double> v = spread_latencies(5000);
  LatencySketch s(5000);
  for (double x : v) s.add(x);
  LatencyStats a = s.stats(), b = latency_stats(v);
  EXPECT_TRUE(s.exact());
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.p50, b.p50);
  EXPECT_EQ(a.p90, b.p90);
  EXPECT_EQ(a.p99, b.p99);
  EXPECT_EQ(a.max, b.max);
}

TEST(Metrics, SketchPastItsLimitIsWithinTwoHundredthsOfAPercent) {
  // Past the limit: buckets 0.04 % wide, each order statistic read at its bucket's midpoint, so a
  // percentile is off by at most 0.02 % (plus rounding); mean and max stay exact.
  std::vector<double> v = spread_latencies(300000);
  LatencySketch s(1000);
  for (double x : v) s.add(x);
  LatencyStats a = s.stats(), b = latency_stats(v);
  EXPECT_FALSE(s.exact());
  EXPECT_EQ(a.n, 300000);
  EXPECT_NEAR(a.mean, b.mean, 1e-9 * b.mean);
  EXPECT_EQ(a.max, b.max);
  for (auto [got, want] : {std::pair{a.p50, b.p50}, {a.p90, b.p90}, {a.p99, b.p99}})
    EXPECT_NEAR(got, want, 2.01e-4 * want) << "exact " << want;
}

TEST(Metrics, AccumulatorInAnyOrderIsComputeMetrics) {
  // The simulator adds requests as they finish, not in the order given: exact figures must not
  // depend on that order (samples are sorted before anything is summed).
  std::vector<RequestTiming> r;
  std::vector<double> lat = spread_latencies(2000);
  for (int i = 0; i < 2000; ++i) {
    double a = 0.01 * i, first = a + lat[size_t(i)] / 100, fin = first + lat[size_t(1999 - i)];
    r.push_back({i, a, i % 97 == 0 ? -1 : first, i % 97 == 0 ? -1 : fin, 100 + i % 7, 1 + i % 50});
  }
  Slo slo{0.05, 0.5, 10};
  Metrics want = compute_metrics(r, slo);
  MetricsAccumulator acc(slo, kPerRequestLimit);
  for (auto it = r.rbegin(); it != r.rend(); ++it) acc.add(*it);
  Metrics got = acc.finish();
  EXPECT_TRUE(got.per_request.empty());
  EXPECT_EQ(metrics_to_json(got, false).dump(), metrics_to_json(want, false).dump());
}

TEST(Metrics, PerRequestSectionOnlyWhenEveryTimingIsHeld) {
  // A long simulation keeps no per-request timings: its JSON has no per_request section rather
  // than an empty one that would claim zero requests.
  std::vector<RequestTiming> r = {{0, 0.0, 1.0, 3.0, 100, 5}, {1, 1.0, 1.5, 2.0, 50, 1}};
  Metrics m = compute_metrics(r, Slo{});
  EXPECT_TRUE(metrics_to_json(m).contains("per_request"));
  m.per_request.clear();
  EXPECT_FALSE(metrics_to_json(m).contains("per_request"));
  EXPECT_EQ(parse_metrics_json(metrics_to_json(m), "x.json").requests, 2);
}
