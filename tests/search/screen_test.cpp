// Screening (planner/search/screen.hpp): the rule on hand-made timings, the causality it rests on
// (a run over the first n requests IS the full run until request n+1 arrives), and searches with
// screening that recommend exactly what the full search recommends on shipped cases.
#include "planner/search/screen.hpp"

#include <gtest/gtest.h>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload_requests.hpp"
#include "planner/search/search.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "planner/topology/machine.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;

namespace {

RequestTiming timing(double arrival, double first, double finish, int64_t outputs) {
  return {0, arrival, first, finish, 100, outputs};
}

Workload chat(int64_t n, double rate) {
  Workload w = load_workload(resolve_workload_path("chat"));
  w.num_requests = n;
  w.rate_rps = rate;
  return w;
}

}  // namespace

TEST(Screen, CountsOnlyMissesTheFullRunCannotUndo) {
  const Slo slo{0.5, 0.05, 60};
  const double cut = 10;
  std::vector<RequestTiming> t = {
      timing(0, 0.1, 2.0, 21),   // finished before the cut, TPOT 95 ms: a sure miss
      timing(0, 0.1, 1.0, 21),   // finished, TTFT 0.1 s, TPOT 45 ms: meets
      timing(1, 2.0, -1, 10),    // first token 1 s late: a sure miss
      timing(9, -1, -1, 10),     // still waiting 1 s after arrival at the cut: TTFT > 0.5 s, a sure miss
      timing(9.8, -1, -1, 10),   // waiting 0.2 s: may still meet
      timing(5, 5.1, -1, 11),    // decoding 4.9 s for at most 10 tokens: TPOT >= 0.49 s, a sure miss
      timing(9, 9.1, -1, 1001),  // decoding 0.9 s of 1000 tokens: may still meet
      timing(0, 0.1, 10.5, 1001),  // finished after the cut: TTFT met, TPOT >= 9.9 ms so far: may meet
  };
  ScreenVerdict v = screen_timings(t, cut, 400, slo, 0.99);
  EXPECT_EQ(v.sure_misses, 4);
  EXPECT_EQ(v.allowed, 4);  // 396 / 400 = 0.99 still meets
  EXPECT_FALSE(v.proves_miss);
  v = screen_timings(t, cut, 300, slo, 0.99);  // at most 3 of 300 may miss
  EXPECT_EQ(v.allowed, 3);
  EXPECT_TRUE(v.proves_miss);
  EXPECT_NE(v.why.find("4 already miss"), std::string::npos) << v.why;
}

TEST(Screen, ShortRunIsTheFullRunUntilTheNextArrival) {
  // Llama-3.1-8B on one H200 under a load that queues: every time the short run records before
  // request n+1 arrives is the full run's time, to the bit.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Topology topo(load_machine(resolve_machine_path("h200x2-nvlink")));
  const Workload w = chat(240, 30);
  const RequestSource src(w);
  const Plan p = test_plans::tp({0}, int(cfg.layers), "single");
  SimulateOptions so;
  so.per_request = true;
  const Simulation full = simulate_plan(p, cfg, fig, topo, w, src, so);
  std::vector<Request> reqs = src.all();
  const int64_t n = 80;
  const double cut = reqs[size_t(n)].arrival_s;
  reqs.resize(size_t(n));
  const Simulation part = simulate_plan(p, cfg, fig, topo, w, reqs, so);
  int known = 0;
  for (int64_t i = 0; i < n; ++i) {
    const RequestTiming& a = part.metrics.per_request[size_t(i)];
    const RequestTiming& b = full.metrics.per_request[size_t(i)];
    if (a.first_token_s >= 0 && a.first_token_s < cut) {
      EXPECT_EQ(a.first_token_s, b.first_token_s) << "request " << i;
      ++known;
    }
    if (a.finish_s >= 0 && a.finish_s < cut) {
      EXPECT_EQ(a.finish_s, b.finish_s) << "request " << i;
    }
  }
  EXPECT_GT(known, n / 2);
  // And the verdict on the same plan: a proven miss is a miss of the full run.
  ScreenVerdict v = screen_plan(p, cfg, fig, topo, w, src, n, 0.99, so);
  ASSERT_TRUE(v.ran);
  if (v.proves_miss) {
    EXPECT_FALSE(meets_slos(full.metrics, 0.99)) << v.why;
  }
}

namespace {

// A search with screening and the same search without: the same recommendation with the same
// figures and capacity; every plan both simulated fully has the same figures; a screened-out plan
// misses the SLOs in the full search; a plan skipped for its GPU count has more GPUs than the
// recommended one.
bool expect_same_recommendation(const std::string& model, const std::string& machine, double rate, int64_t n,
                                int64_t screen) {
  SCOPED_TRACE(model + " on " + machine);
  ModelConfig cfg = load_model_config(resolve_model_path(model));
  ModelFigures fig = derive_figures(cfg);
  Topology topo(load_machine(resolve_machine_path(machine)));
  const Workload w = chat(n, rate);
  SearchOptions so;
  so.screen_requests = screen;
  SearchResult fast = search_plans(cfg, fig, topo, w, so);
  so.screen_requests = 0;
  SearchResult full = search_plans(cfg, fig, topo, w, so);
  EXPECT_GE(full.recommended, 0);
  EXPECT_GE(fast.recommended, 0);
  if (full.recommended < 0 || fast.recommended < 0) return false;
  const CandidateResult& a = fast.ranked[size_t(fast.recommended)];
  const CandidateResult& b = full.ranked[size_t(full.recommended)];
  EXPECT_EQ(a.plan.name, b.plan.name);
  EXPECT_EQ(a.meets_slos, b.meets_slos);
  EXPECT_EQ(a.metrics.goodput_rps, b.metrics.goodput_rps);
  EXPECT_EQ(a.metrics.tpot.p50, b.metrics.tpot.p50);
  EXPECT_EQ(a.metrics.e2e.p99, b.metrics.e2e.p99);
  EXPECT_EQ(a.distinct_shapes, b.distinct_shapes);
  EXPECT_EQ(a.capacity.rate_rps, b.capacity.rate_rps);
  EXPECT_EQ(a.capacity.miss_rps, b.capacity.miss_rps);
  EXPECT_EQ(a.capacity.probes, b.capacity.probes);
  for (const CandidateResult& c : fast.ranked)
    for (const CandidateResult& f : full.ranked)
      if (c.plan.name == f.plan.name) {
        EXPECT_EQ(c.metrics.slo_attainment, f.metrics.slo_attainment) << c.plan.name;
        EXPECT_EQ(c.metrics.ttft.p50, f.metrics.ttft.p50) << c.plan.name;
      }
  int screened = 0;
  for (const CandidateResult& c : fast.rejected) {
    if (c.pruned_by == "screen") {
      ++screened;
      for (const CandidateResult& f : full.ranked)
        if (f.plan.name == c.plan.name) {
          EXPECT_FALSE(f.meets_slos) << c.plan.name << ": " << c.why_not;
        }
    }
    if (c.pruned_by == "gpus") {
      EXPECT_GT(c.plan.num_gpus(), a.plan.num_gpus()) << c.plan.name;
    }
  }
  EXPECT_EQ(fast.ranked.size() + fast.rejected.size(), full.ranked.size() + full.rejected.size());
  if (a.meets_slos) {
    EXPECT_GT(fast.pruned, 0) << "screening saved nothing here";
  }
  (void)screened;
  return a.meets_slos;
}

}  // namespace

TEST(Screen, Llama70bOnHgxRecommendsWhatTheFullSearchDoes) {
  EXPECT_TRUE(expect_same_recommendation("llama-3.1-70b", "hgx-h100x8", 4, 400, 80));
}

TEST(Screen, MixtralOnPcieRecommendsWhatTheFullSearchDoes) {
  expect_same_recommendation("mixtral-8x7b", "pcie-gen5x8-2socket", 4, 320, 80);
}

TEST(Screen, WhenNoPlanMeetsTheSlosEveryPlanIsSimulatedFully) {
  // 70B on two H200s at 20 req/s: nothing meets the SLOs, so the ranking falls back to goodput
  // over every plan, as without screening.
  EXPECT_FALSE(expect_same_recommendation("llama-3.1-70b", "h200x2-nvlink", 20, 200, 50));
}

TEST(Screen, CapacityProbesOverTwoThreadsAreTheSequentialSearchs) {
  // The recommended plan's capacity search runs the probe it would make next on a second thread
  // and keeps it only when the search makes it: the same capacity, bracket and probe count as on
  // one thread, with screened probes (100 of 600 requests).
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-70b"));
  ModelFigures fig = derive_figures(cfg);
  Topology topo(load_machine(resolve_machine_path("hgx-h100x8")));
  SearchOptions so;
  so.strategy_files = {resolve_strategy("tensor_parallel")};
  so.compare_p2p = false;
  so.screen_requests = 100;
  so.threads = 1;
  const Workload w = chat(600, 4);
  SearchResult one = search_plans(cfg, fig, topo, w, so);
  so.threads = 2;
  SearchResult two = search_plans(cfg, fig, topo, w, so);
  ASSERT_GE(one.recommended, 0);
  ASSERT_GE(two.recommended, 0);
  const Capacity& a = one.ranked[size_t(one.recommended)].capacity;
  const Capacity& b = two.ranked[size_t(two.recommended)].capacity;
  EXPECT_TRUE(a.searched);
  EXPECT_GT(a.rate_rps, 0);
  EXPECT_EQ(a.rate_rps, b.rate_rps);
  EXPECT_EQ(a.miss_rps, b.miss_rps);
  EXPECT_EQ(a.output_tokens_per_s, b.output_tokens_per_s);
  EXPECT_EQ(a.probes, b.probes);
  EXPECT_EQ(a.note, b.note);
  EXPECT_EQ(one.verdict, two.verdict);
}
