#include "planner/report/trace.hpp"

#include <map>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/compile/graph_batch.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/machine.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;

TEST(Trace, ParsesAndEventsNestWithoutOverlapOnAnyTrack) {
  // A TP2 x PP2 plan with micro-batches on the PCIe machine: compute, collectives, sends and
  // link traffic all appear. Every track must be a proper nesting: two events on one track are
  // either disjoint or one contains the other.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("pcie-gen5x8-2socket"));
  Topology topo(m);
  Plan p = test_plans::tp_pp({{0, 1}, {2, 3}}, 32, "host_staged", 2, "tp2pp2");
  Workload w;
  w.name = "t";
  w.max_num_seqs = 16;
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back({i, 0.002 * i, 200, 6});
  SimulateOptions so;
  so.record_limit = 40;
  Simulation s = simulate_plan(p, cfg, fig, topo, w, reqs, so);
  CostModel cost(topo);
  std::string text = chrome_trace(p, cfg, fig, cost, s.run, so.pricer, s.metrics.provenance).dump();

  nlohmann::json j = nlohmann::json::parse(text);  // valid JSON
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  int ops = 0, links = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ASSERT_GE(e["dur"].get<double>(), 0.0);
    double t0 = e["ts"], t1 = t0 + e["dur"].get<double>();
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({t0, t1});
    if (e["cat"] == "compute" || e["cat"] == "collective") {
      ++ops;
      EXPECT_TRUE(e["args"].contains("source")) << "every op says where its cost came from";
    }
    links += e["cat"] == "link";
  }
  EXPECT_GT(ops, 100);
  EXPECT_GT(links, 0) << "host-staged boundary traffic shows on link tracks";
  const double eps = 1e-6;  // microseconds: rounding of the us conversion
  for (auto& [key, ev] : tracks) {
    std::sort(ev.begin(), ev.end(), [](auto& x, auto& y) { return x.first != y.first ? x.first < y.first : x.second > y.second; });
    std::vector<double> open;  // ends of enclosing events
    for (auto& [t0, t1] : ev) {
      while (!open.empty() && open.back() <= t0 + eps) open.pop_back();
      if (!open.empty()) EXPECT_LE(t1, open.back() + eps) << "track " << key.first << "/" << key.second << ": [" << t0 << ", " << t1 << "] overlaps";
      open.push_back(t1);
    }
  }
  // Stage spans must cover their iteration's ops: every GPU op lies inside some stage span.
  EXPECT_EQ(j["otherData"]["plan"], "tp2pp2");
}

TEST(Trace, EachCopyOfAReplicatedPlanHasItsOwnTracksAndGpus) {
  // Two TP2 copies on GPUs {0,1} and {4,5}: requests alternate (round robin), so both copies' stage
  // tracks carry iterations and both copies' GPUs carry ops; nothing is drawn on GPUs 2, 3, 6, 7.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("pcie-gen5x8-2socket"));
  Topology topo(m);
  Plan p = with_replicas(test_plans::tp({0, 1}, 32, "tp2"), {{0, 1}, {4, 5}}, "round_robin");
  Workload w;
  w.name = "t";
  w.max_num_seqs = 16;
  std::vector<Request> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back({i, 0.002 * i, 200, 4});
  SimulateOptions so;
  so.record_limit = 40;
  Simulation s = simulate_plan(p, cfg, fig, topo, w, reqs, so);
  CostModel cost(topo);
  nlohmann::json j = chrome_trace(p, cfg, fig, cost, s.run, so.pricer, s.metrics.provenance);
  std::map<int, int> stage_events, gpu_events;  // by tid
  bool named = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["args"].contains("name")) named |= e["args"]["name"] == "copy 1 stage 0";
    if (e["ph"] != "X") continue;
    if (e["pid"] == 1) ++stage_events[e["tid"].get<int>()];
    if (e["pid"] == 2) ++gpu_events[e["tid"].get<int>() / kStreamsPerGpu];
  }
  EXPECT_TRUE(named);
  EXPECT_GT(stage_events[0], 0);
  EXPECT_GT(stage_events[1], 0) << "copy 1's stage 0 is track 1";
  for (int g : {0, 1, 4, 5}) EXPECT_GT(gpu_events[g], 0) << "gpu" << g;
  for (int g : {2, 3, 6, 7}) EXPECT_EQ(gpu_events[g], 0) << "gpu" << g;
}

TEST(Trace, APaddedDecodeIterationsOpsArePricedAtItsGraphBatch) {
  // Three sequences decode as a CUDA graph of 4 (graph_batch.hpp), and the pricer prices that; the
  // trace drew the same iteration's ops at batch 3 (attention 124 us a layer at 26.8k for 8B on the
  // shipped H200 profile, against the 111 us the iteration was priced with).
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  Topology topo(m);
  Plan p = test_plans::tp({0}, 32, "single");
  Workload w;
  w.name = "t";
  w.max_num_seqs = 8;
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back({i, 0.0, 20000, 8});
  SimulateOptions so;
  so.record_limit = 200;
  Simulation s = simulate_plan(p, cfg, fig, topo, w, reqs, so);
  CostModel cost(topo);
  nlohmann::json j = chrome_trace(p, cfg, fig, cost, s.run, so.pricer, s.metrics.provenance);
  const StageRecord* rec = nullptr;
  for (const StageRecord& r : s.run.records)
    if (r.shape.prefill_seqs == 0 && r.shape.decode_seqs == 3) rec = &r;
  ASSERT_NE(rec, nullptr) << "a decode iteration of 3 sequences";
  const BatchShape padded = quantize_shape(graph_padded(rec->shape), so.pricer.per_octave);
  ASSERT_EQ(padded.decode_seqs, 4);
  const OpGraph g = compile_iteration(p, cfg, fig, m, padded);
  double want = -1;
  for (const Op& op : g.ops)
    if (op.name == "L0.attn_decode") want = cost.price(op, true).seconds * 1e6;
  ASSERT_GT(want, 0);
  int seen = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "L0.attn_decode") continue;
    const double t0 = e["ts"];
    if (t0 + 1e-6 < rec->start * 1e6 || t0 > rec->end * 1e6 + 1e-6) continue;
    EXPECT_NEAR(e["dur"].get<double>(), want, 1e-3) << "the op drawn at the batch the iteration was priced at";
    ++seen;
  }
  EXPECT_EQ(seen, 1);
}

