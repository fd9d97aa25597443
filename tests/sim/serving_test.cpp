#include "planner/sim/serving.hpp"

#include <random>

#include <gtest/gtest.h>

using namespace peerplan;

namespace {

// A closed-form iteration pricer: fixed stage times whatever the batch.
class FixedPricer : public IterationPricer {
 public:
  explicit FixedPricer(std::vector<double> stages) { cost_.stage_s = std::move(stages); }
  int num_stages() const override { return int(cost_.stage_s.size()); }
  const IterationCost& price(const BatchShape&) override { return cost_; }

 private:
  IterationCost cost_;
};

std::vector<Request> poisson(int n, double rate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<Request> r;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    r.push_back({i, t, 1, 1});
  }
  return r;
}

}  // namespace

TEST(Serving, MD1MeanQueueingDelayMatchesPollaczekKhinchine) {
  // One server, deterministic service D, Poisson arrivals at rho = 0.6; one request per iteration
  // (max_num_seqs = 1) and one output token, so TTFT = wait + D. M/D/1: W = rho D / (2 (1 - rho)).
  const double D = 0.010, rate = 60.0, rho = rate * D;
  SchedulerConfig c;
  c.max_num_seqs = 1;
  Scheduler sched(c);
  FixedPricer p({D});
  auto reqs = poisson(200000, rate, 7);
  ServingRun run = run_serving(reqs, sched, p, 0, 0);
  double sum = 0;
  for (const auto& t : run.requests) sum += t.first_token_s - t.arrival_s - D;
  double W = sum / double(run.requests.size());
  double expect = rho * D / (2 * (1 - rho));
  EXPECT_NEAR(W / expect, 1.0, 0.02) << "simulated mean wait " << W << " s vs M/D/1 " << expect << " s";
}

TEST(Serving, TwoStagePipelineThroughputIsItsSlowestStage) {
  // Stage times 3 ms and 5 ms, two micro-batches in flight, a saturating backlog of 1-token
  // requests (one per micro-batch): steady state completes one iteration per 5 ms.
  SchedulerConfig c;
  c.max_num_seqs = 2;
  c.max_batched_tokens = 1;
  c.micro_batches = 2;
  Scheduler sched(c);
  FixedPricer p({0.003, 0.005});
  std::vector<Request> reqs;
  for (int i = 0; i < 1000; ++i) reqs.push_back({i, 0.0, 1, 1});
  ServingRun run = run_serving(reqs, sched, p, 0, 0);
  EXPECT_EQ(run.iterations, 1000);
  EXPECT_NEAR(run.end_s, 0.003 + 1000 * 0.005, 1e-9) << "fill the first stage once, then one per 5 ms";
  double throughput = 1000 / run.end_s;
  EXPECT_NEAR(throughput, 1 / 0.005, 0.01 * (1 / 0.005));
}

TEST(Serving, OneMicroBatchPipelineSerialisesItsStages) {
  // Without micro-batches in flight a 2-stage pipeline is no faster than its stages in series.
  SchedulerConfig c;
  c.max_num_seqs = 1;
  Scheduler sched(c);
  FixedPricer p({0.003, 0.005});
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back({i, 0.0, 1, 1});
  ServingRun run = run_serving(reqs, sched, p, 0, 0);
  EXPECT_NEAR(run.end_s, 10 * 0.008, 1e-9);
}

TEST(Serving, DecodeTokensAreSpacedByTheIterationTime) {
  // One request, 5 output tokens, iteration 2 ms: first token at 2 ms, finish at 10 ms, TPOT 2 ms.
  Scheduler sched(SchedulerConfig{});
  FixedPricer p({0.002});
  ServingRun run = run_serving({{0, 0.0, 16, 5}}, sched, p, 0, 0);
  Metrics m = compute_metrics(run.requests, Slo{});
  EXPECT_NEAR(m.ttft.p50, 0.002, 1e-12);
  EXPECT_NEAR(m.tpot.p50, 0.002, 1e-12);
  EXPECT_NEAR(m.e2e.p50, 0.010, 1e-12);
}

TEST(Serving, StreamingGivesTheSameMetricsAndHoldsNoTimings) {
  // A long run streams each request into the metrics as it finishes (memory follows the requests
  // in flight): same figures as keeping every timing, and nothing per request is left in the run.
  std::vector<Request> reqs;
  for (int i = 0; i < 3000; ++i) reqs.push_back({i, 0.004 * i + 0.001 * (i % 7), 16 + i % 200, 1 + (i * 7) % 40});
  Slo slo{0.05, 0.01, 30};
  SchedulerConfig c;
  c.max_num_seqs = 8;
  Scheduler keep_sched(c), stream_sched(c);
  FixedPricer p1({0.002}), p2({0.002});
  ServingRun kept = run_serving(reqs, keep_sched, p1, 0, 0);
  MetricsAccumulator acc(slo, kPerRequestLimit);
  ServingRun streamed = run_serving(reqs, stream_sched, p2, 0, 0, 0, false, &acc);
  EXPECT_TRUE(streamed.requests.empty());
  EXPECT_EQ(streamed.iterations, kept.iterations);
  Metrics want = compute_metrics(kept.requests, slo), got = acc.finish();
  EXPECT_EQ(got.completed, 3000);
  EXPECT_EQ(metrics_to_json(got, false).dump(), metrics_to_json(want, false).dump());
}

TEST(Serving, AWorkloadStreamServesExactlyAsItsRequestVector) {
  // The serving loop draws requests from a stream as the previous one arrives and holds only those
  // in flight; the result must be the one the whole vector gave, kept or streamed into metrics.
  Workload w = load_workload(resolve_workload_path("chat"));
  w.num_requests = 3000;
  const RequestSource src(w);
  const std::vector<Request> all = src.all();
  SchedulerConfig c;
  c.max_num_seqs = 16;
  Slo slo{0.5, 0.05, 20};
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed into metrics" : "timings kept");
    Scheduler s1(c), s2(c);
    FixedPricer p1({0.004}), p2({0.004});
    MetricsAccumulator a1(slo, kPerRequestLimit), a2(slo, kPerRequestLimit);
    ServingRun from_vector = run_serving(all, s1, p1, 0, 0, 0, false, streamed ? &a1 : nullptr);
    WorkloadStream in = src.stream();
    ServingRun from_stream = run_serving(in, s2, p2, 0, 0, 0, false, streamed ? &a2 : nullptr);
    EXPECT_EQ(from_stream.iterations, from_vector.iterations);
    EXPECT_EQ(from_stream.events, from_vector.events);
    EXPECT_EQ(from_stream.end_s, from_vector.end_s);
    Metrics mv = streamed ? a1.finish() : compute_metrics(from_vector.requests, slo);
    Metrics ms = streamed ? a2.finish() : compute_metrics(from_stream.requests, slo);
    EXPECT_EQ(metrics_to_json(ms, true).dump(), metrics_to_json(mv, true).dump());
  }
}

TEST(Serving, OutOfOrderRequestsAreServedByArrivalAndReportedInTheOrderGiven) {
  std::vector<Request> ordered;
  for (int i = 0; i < 50; ++i) ordered.push_back({i, 0.01 * i, 32, 4});
  std::vector<Request> reversed(ordered.rbegin(), ordered.rend());
  Scheduler s1(SchedulerConfig{}), s2(SchedulerConfig{});
  FixedPricer p1({0.002}), p2({0.002});
  ServingRun a = run_serving(ordered, s1, p1, 0, 0);
  ServingRun b = run_serving(reversed, s2, p2, 0, 0);
  ASSERT_EQ(b.requests.size(), 50u);
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(b.requests[i].id, reversed[i].id) << "in the order given";
    EXPECT_EQ(b.requests[i].finish_s, a.requests[size_t(reversed[i].id)].finish_s);
  }
}
