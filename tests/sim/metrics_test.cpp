#include "planner/sim/metrics.hpp"

#include <gtest/gtest.h>

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
