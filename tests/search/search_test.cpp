#include "planner/search/search.hpp"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload_requests.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;
namespace fs = std::filesystem;

namespace {

Workload small_chat(int64_t n) {
  Workload w = load_workload(resolve_workload_path("chat"));
  w.num_requests = n;
  return w;
}

std::vector<std::string> shipped(const std::string& dir, bool dirs) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(PEERPLAN_SOURCE_DIR) / dir))
    if (dirs ? e.is_directory() : e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(Search, PlanWorksOnEveryShippedModelAndMachine) {
  // Every model card x every machine file: either a recommendation, or the clear "nothing fits".
  auto models = shipped("models/llm", true);
  auto machines = shipped("models/hardware", false);
  ASSERT_FALSE(models.empty());
  ASSERT_FALSE(machines.empty());
  SearchOptions so;
  so.num_requests = 40;
  // What this test checks is that every pair ranks or says "nothing fits"; P2P variants and the
  // capacity search have their own tests and would multiply its time (it runs under ASan in CI).
  so.compare_p2p = false;
  so.capacity_recommended = false;
  for (const auto& md : models) {
    ModelConfig cfg = load_model_config(md + "/config.json");
    ModelFigures fig = derive_figures(cfg);
    for (const auto& mf : machines) {
      SCOPED_TRACE(md + " on " + mf);
      Machine m = load_machine(mf);
      // Clusters (64 GPUs: 150-200 candidates, 20-50 s a model here) are planned by the search
      // benchmark (bench/search.sh) and tests/topology's cluster tests, not 12 times over here.
      if (m.gpu_count() > 8) continue;
      Topology topo(m);
      SearchResult r = search_plans(cfg, fig, topo, small_chat(40), so);
      if (r.ranked.empty()) {
        EXPECT_EQ(r.recommended, -1);
        EXPECT_EQ(r.verdict.rfind("Nothing fits", 0), 0u) << r.verdict;
      } else {
        ASSERT_GE(r.recommended, 0);
        EXPECT_EQ(r.verdict.rfind("Recommended: ", 0), 0u) << r.verdict;
        for (const auto& c : r.ranked) EXPECT_EQ(c.metrics.completed + (c.metrics.requests - c.metrics.completed), 40);
      }
    }
  }
}

TEST(Search, NothingFitsSaysSoAndWhy) {
  // Llama-3.1-70B (~141 GB of weights) on a machine of 2 x 16 GB GPUs.
  std::string text = R"({"schema": "peerplan.machine", "version": 1, "name": "tiny", "origin": "nominal",
    "gpus": [{"id": 0, "name": "T", "memory_bytes": 17179869184, "peak_bf16_tflops": 100, "hbm_gbps": 900},
             {"id": 1, "name": "T", "memory_bytes": 17179869184, "peak_bf16_tflops": 100, "hbm_gbps": 900}],
    "nodes": [{"id": "cpu0", "kind": "cpu_socket", "numa": 0}, {"id": "sw0", "kind": "pcie_switch"}],
    "links": [{"a": "gpu0", "b": "sw0", "kind": "pcie", "gbps": 25}, {"a": "gpu1", "b": "sw0", "kind": "pcie", "gbps": 25},
              {"a": "sw0", "b": "cpu0", "kind": "pcie", "gbps": 25}],
    "p2p": "all"})";
  Machine m = parse_machine_json(text, "tiny.json");
  Topology topo(m);
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-70b"));
  SearchOptions so;
  so.num_requests = 10;
  SearchResult r = search_plans(cfg, derive_figures(cfg), topo, small_chat(10), so);
  EXPECT_TRUE(r.ranked.empty());
  EXPECT_EQ(r.recommended, -1);
  EXPECT_NE(r.verdict.find("Nothing fits"), std::string::npos);
  EXPECT_NE(r.verdict.find("GB of weights"), std::string::npos) << "says how big the model is";
  EXPECT_FALSE(r.rejected.empty());
}

TEST(Search, EachMultiGpuPlanIsComparedWithP2POnAndOff) {
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  Plan p;
  p.name = "pp2[0|1]";
  PlanStage a, b;
  a.gpus = {0};
  a.layer_begin = 0;
  a.layer_end = 16;
  b.gpus = {1};
  b.layer_begin = 16;
  b.layer_end = 32;
  p.stages = {a, b};
  p.boundary_modes = {"host_staged"};
  auto v = p2p_variants(p, topo, true);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].p2p);
  EXPECT_EQ(v[0].boundary_modes[0], "peer") << "NVLink peers: the P2P-on variant copies peer to peer";
  EXPECT_FALSE(v[1].p2p);
  EXPECT_EQ(v[1].boundary_modes[0], "host_staged");
  Plan single;
  single.stages = {a};
  single.stages[0].layer_end = 32;
  EXPECT_EQ(p2p_variants(single, topo, true).size(), 1u) << "one GPU: nothing to compare";
}

TEST(Search, ABiggerPlanMustBeatTheBestSmallerOne) {
  // Llama-3.1-8B at a light load on 8 H100s: splitting cuts latency, so a multi-GPU plan wins;
  // with an absurd required gain (10x) the single-GPU plan must be recommended instead.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  SearchOptions so;
  so.objective = Objective::Goodput;  // the min-gain rule (objective gpus recommends by the SLOs instead)
  so.capacity_recommended = false;
  so.num_requests = 60;
  so.min_gain = 9.0;
  SearchResult r = search_plans(cfg, fig, topo, small_chat(60), so);
  ASSERT_GE(r.recommended, 0);
  EXPECT_EQ(r.ranked[size_t(r.recommended)].plan.num_gpus(), 1) << r.verdict;
  EXPECT_NE(r.verdict.find("smaller plan is recommended"), std::string::npos) << r.verdict;
}

TEST(Search, ObjectivesOrderAsDocumented) {
  Metrics fast, slow;
  fast.requests = fast.completed = slow.requests = slow.completed = 10;
  fast.e2e.p99 = 1.0;
  slow.e2e.p99 = 2.0;
  fast.goodput_rps = 3;
  slow.goodput_rps = 2;
  fast.output_tokens_per_s = 100;
  slow.output_tokens_per_s = 50;
  for (Objective o : {Objective::Goodput, Objective::P99, Objective::Throughput})
    EXPECT_GT(objective_score(fast, o), objective_score(slow, o)) << to_string(o);
  slow.completed = 9;
  slow.goodput_rps = 5;
  fast.goodput_rps = 4.5;
  EXPECT_GT(objective_score(fast, Objective::Goodput), objective_score(slow, Objective::Goodput))
      << "a plan that leaves requests unfinished loses";
  EXPECT_FALSE(objective_from_string("fastest"));
}

TEST(Search, CliPlanAndSimulateRunAndRejectBadInput) {
  std::string bin = PEERPLAN_BINARY;
  fs::path tmp = fs::temp_directory_path() / "peerplan_search_test";
  fs::create_directories(tmp);
  std::string best = (tmp / "best.json").string();
  std::string cmd = bin + " plan --model llama-3.1-8b --machine pcie-gen5x8-2socket --requests 30 --best-out " + best +
                    " --csv " + (tmp / "p.csv").string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(fs::exists(best));
  std::string out = (tmp / "m.json").string(), trace = (tmp / "t.json").string();
  cmd = bin + " simulate --plan " + best + " --model llama-3.1-8b --machine pcie-gen5x8-2socket --requests 30 --out " +
        out + " --trace " + trace + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(fs::exists(trace));
  cmd = bin + " plan --model llama-3.1-8b --machine hgx-h100x8 --objective fastest > /dev/null 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2) << "an unknown objective is bad usage";
  cmd = bin + " simulate --plan " + (tmp / "missing.json").string() +
        " --model llama-3.1-8b --machine hgx-h100x8 > /dev/null 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2) << "a missing plan file is bad input";
}

TEST(Search, GpusObjectivePicksTheFewestGpusThatMeetTheSlos) {
  // Llama-3.1-8B on 8 H100s at the chat rate: under goodput a split plan ranks first (it cuts
  // latency); under gpus one GPU meets the SLOs, so one GPU is recommended and nothing smaller exists.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  SearchOptions so;
  so.num_requests = 60;
  so.capacity_recommended = false;
  so.objective = Objective::Goodput;
  SearchResult good = search_plans(cfg, fig, topo, small_chat(60), so);
  ASSERT_FALSE(good.ranked.empty());
  EXPECT_GT(good.ranked.front().plan.num_gpus(), 1) << "under goodput a wider plan ranks first";
  so.objective = Objective::Gpus;
  SearchResult r = search_plans(cfg, fig, topo, small_chat(60), so);
  ASSERT_EQ(r.recommended, 0);
  const CandidateResult& rec = r.ranked.front();
  EXPECT_TRUE(rec.meets_slos);
  int fewest = 1 << 30;
  for (const auto& c : r.ranked)
    if (c.meets_slos) fewest = std::min(fewest, c.plan.num_gpus());
  EXPECT_EQ(rec.plan.num_gpus(), fewest);
  EXPECT_EQ(rec.plan.num_gpus(), 1) << r.verdict;
  // Ties among plans on as many GPUs that meet the SLOs: goodput first.
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    const auto& a = r.ranked[i - 1];
    const auto& b = r.ranked[i];
    EXPECT_GE(a.meets_slos, b.meets_slos) << "plans meeting the SLOs rank first";
    if (a.meets_slos && b.meets_slos) {
      EXPECT_LE(a.plan.num_gpus(), b.plan.num_gpus());
      if (a.plan.num_gpus() == b.plan.num_gpus()) EXPECT_GE(a.metrics.goodput_rps, b.metrics.goodput_rps);
    }
  }
  EXPECT_NE(r.verdict.find("fewest GPUs that meet the SLOs"), std::string::npos) << r.verdict;
  // What each GPU count buys: one line per count, ascending, each its count's best-ranked plan.
  ASSERT_GT(r.gpu_steps.size(), 1u);
  for (size_t i = 0; i < r.gpu_steps.size(); ++i) {
    const GpuStep& g = r.gpu_steps[i];
    if (i) EXPECT_LT(r.gpu_steps[i - 1].gpus, g.gpus);
    EXPECT_EQ(r.ranked[size_t(g.rank)].plan.num_gpus(), g.gpus);
    for (int k = 0; k < g.rank; ++k) EXPECT_NE(r.ranked[size_t(k)].plan.num_gpus(), g.gpus) << "the first at its count";
    EXPECT_NE(r.verdict.find(r.ranked[size_t(g.rank)].plan.name + " "), std::string::npos) << r.verdict;
  }
}

TEST(Search, MeetingTheSlosNeedsEveryRequestFinishedAndTheThreshold) {
  Metrics m;
  m.requests = 100;
  m.completed = 100;
  m.slo_attainment = 0.99;
  EXPECT_TRUE(meets_slos(m, 0.99));
  EXPECT_FALSE(meets_slos(m, 0.995));
  m.completed = 99;
  m.slo_attainment = 1.0;
  EXPECT_FALSE(meets_slos(m, 0.5)) << "an unfinished request misses";
  m.requests = m.completed = 0;
  EXPECT_FALSE(meets_slos(m, 0.5)) << "no requests, no evidence";
  EXPECT_EQ(objective_from_string("gpus"), Objective::Gpus);
  EXPECT_EQ(SearchOptions{}.objective, Objective::Gpus) << "the default";
}

TEST(Search, AtRateRescalesTheSameRequestsInTime) {
  Workload w = small_chat(50);
  Workload fast = at_rate(w, 2 * w.rate_rps);
  std::vector<Request> a = RequestSource(w).all(), b = RequestSource(fast).all();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i].arrival_s, a[i].arrival_s / 2, 1e-9 * (1 + a[i].arrival_s));
    EXPECT_EQ(b[i].prompt_tokens, a[i].prompt_tokens);
    EXPECT_EQ(b[i].output_tokens, a[i].output_tokens);
  }
  Workload tr = w;  // trace arrivals: compressed about the first
  tr.arrival = Workload::Arrival::Trace;
  tr.trace_arrivals_s = {5, 6, 9};
  tr.rate_rps = 0.5;
  Workload tr2 = at_rate(tr, 2.0);
  EXPECT_EQ(tr2.trace_arrivals_s, (std::vector<double>{5, 5.25, 6}));
  EXPECT_EQ(tr2.rate_rps, 2.0);
}

TEST(Search, CapacityMeetsJustBelowAndMissesJustAbove) {
  // Llama-3.1-8B on the PCIe machine (nominal): the recommended plan's capacity, then two checks
  // outside the search: it meets the SLOs at 0.95x and misses at 1.1x (the tolerance is 5 %).
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("pcie-gen5x8-2socket"));
  Topology topo(m);
  SearchOptions so;
  so.num_requests = 200;
  so.compare_p2p = false;
  SearchResult r = search_plans(cfg, fig, topo, small_chat(200), so);
  ASSERT_GE(r.recommended, 0);
  const CandidateResult& rec = r.ranked[size_t(r.recommended)];
  const Capacity& cap = rec.capacity;
  ASSERT_TRUE(cap.searched);
  ASSERT_GT(cap.rate_rps, 0) << cap.note;
  ASSERT_GT(cap.miss_rps, cap.rate_rps) << cap.note;
  EXPECT_LE(cap.miss_rps / cap.rate_rps, 1 + cap.tolerance + 1e-12);
  EXPECT_DOUBLE_EQ(cap.tolerance, 0.05);
  EXPECT_LE(cap.probes, 14);
  EXPECT_GT(cap.output_tokens_per_s, 0);
  EXPECT_NE(r.verdict.find("Capacity: "), std::string::npos) << r.verdict;
  SimulateOptions sim;
  sim.memory = rec.memory;
  sim.memory_context = r.workload.max_context();
  auto run_at = [&](double rate) {
    Workload pw = at_rate(r.workload, rate);
    RequestSource src(pw);
    return simulate_plan(rec.plan, cfg, fig, topo, pw, src, sim).metrics;
  };
  Metrics below = run_at(0.95 * cap.rate_rps), above = run_at(1.1 * cap.rate_rps);
  EXPECT_TRUE(meets_slos(below, r.slo_threshold)) << "attainment " << below.slo_attainment << " at " << 0.95 * cap.rate_rps;
  EXPECT_FALSE(meets_slos(above, r.slo_threshold)) << "attainment " << above.slo_attainment << " at " << 1.1 * cap.rate_rps;
  // With capacity_all every ranked plan gets one (in parallel), the same for the recommended plan.
  so.capacity_all = true;
  SearchResult all = search_plans(cfg, fig, topo, small_chat(200), so);
  for (const auto& c : all.ranked) EXPECT_TRUE(c.capacity.searched) << c.plan.name;
  EXPECT_DOUBLE_EQ(all.ranked[size_t(all.recommended)].capacity.rate_rps, cap.rate_rps) << "deterministic";
}

TEST(Search, AtSixteenRequestsPerSecondReplicasAreWeighedAgainstOneWiderPlan) {
  // Issue 16's case: Llama-3.1-70B on hgx-h100x8, chat at 16 req/s. TP4 alone carries about 10
  // req/s; two TP4 copies (8 GPUs) or one TP8 are the candidates that can carry 16, and the verdict
  // says which does it on fewer GPUs.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-70b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  SearchOptions so;
  so.num_requests = 400;
  so.rate_rps = 16.0;
  so.capacity_recommended = false;
  so.compare_p2p = false;
  so.strategy_files = {resolve_strategy("tensor_parallel"), resolve_strategy("data_parallel")};
  SearchResult r = search_plans(cfg, fig, topo, small_chat(400), so);
  bool replicated = false;
  for (const auto& c : r.ranked) replicated |= c.plan.replica_count() > 1;
  EXPECT_TRUE(replicated) << "replicated plans are among the ranked candidates";
  EXPECT_NE(r.verdict.find("Replicas or one wider plan"), std::string::npos) << r.verdict;
  ASSERT_GE(r.recommended, 0);
  EXPECT_LE(r.ranked[size_t(r.recommended)].plan.num_gpus(), 8) << r.verdict;
}

TEST(Search, PrunedPlansAreThoseThatCouldNotHaveMetTheSlos) {
  // Llama-3.1-70B on hgx-h100x8 with a 25 ms TPOT SLO: a pipeline reads all 141 GB of weights per
  // decode step at <= 3.35 TB/s per GPU, >= 42 ms, so every pure pipeline is ruled out unsimulated;
  // TP4 and TP8 meet the SLOs. Pruning must not change the recommendation or any survivor's figures.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-70b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  Workload w = small_chat(200);
  w.slo_tpot_s = 0.025;
  SearchOptions so;
  so.num_requests = 200;
  so.capacity_recommended = false;
  so.compare_p2p = false;
  so.strategy_files = {resolve_strategy("tensor_parallel"), resolve_strategy("pipeline_parallel")};
  SearchResult pruned = search_plans(cfg, fig, topo, w, so);
  so.prune = false;
  SearchResult full = search_plans(cfg, fig, topo, w, so);
  EXPECT_GT(pruned.pruned, 0) << pruned.pruned_summary;
  EXPECT_EQ(pruned.provenance["pruned"], pruned.pruned);
  for (const auto& c : pruned.rejected)
    if (!c.pruned_by.empty()) {
      EXPECT_EQ(c.pruned_by, "tpot") << c.plan.name;
      EXPECT_EQ(c.plan.stages[0].tp, 1) << c.plan.name << " is a pipeline";
      for (const auto& f : full.ranked)
        if (f.plan.name == c.plan.name) EXPECT_FALSE(f.meets_slos) << c.plan.name << " would have met the SLOs";
    }
  ASSERT_GE(pruned.recommended, 0);
  EXPECT_EQ(pruned.ranked[size_t(pruned.recommended)].plan.name, full.ranked[size_t(full.recommended)].plan.name);
  for (const auto& c : pruned.ranked)
    for (const auto& f : full.ranked)
      if (f.plan.name == c.plan.name) EXPECT_EQ(c.metrics.tpot.p50, f.metrics.tpot.p50) << c.plan.name;
  bool said = false;
  for (const auto& a : pruned.advice) said |= a.find("cannot meet the TPOT SLO") != std::string::npos;
  EXPECT_TRUE(said) << "the output says what was pruned and why";
}
