// Simulator speed targets (issue 5):
//  - the event engine handles >= 5 M events/s on one core;
//  - ranking every candidate for Llama-3.1-70B on hgx-h100x8 and pcie-gen5x8-2socket, each
//    simulated over 1 000 requests, takes <= 2 s wall on 2 cores.
// Run: build/bench_sim  (add --benchmark_filter=Rank to run only the search)
#include <benchmark/benchmark.h>

#include <cstdio>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/search/search.hpp"
#include "planner/sim/engine.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;

namespace {

// Each event reschedules itself a pseudo-random distance ahead, keeping `pending` events in the
// heap: the steady state of a busy simulation.
struct Chain {
  EventQueue q;
  uint64_t left = 0;
  uint64_t x = 88172645463325252ull;
  static void fire(void* ctx, int64_t arg) {
    auto* c = static_cast<Chain*>(ctx);
    if (c->left == 0) return;
    --c->left;
    c->x ^= c->x << 13;
    c->x ^= c->x >> 7;
    c->x ^= c->x << 17;
    c->q.schedule(c->q.now() + 1e-6 * double(c->x % 1000 + 1), fire, ctx, arg);
  }
};

void BM_EventQueue(benchmark::State& state) {
  const int64_t pending = state.range(0);
  uint64_t events = 0;
  for (auto _ : state) {
    Chain c;
    c.left = 2'000'000;
    for (int64_t i = 0; i < pending; ++i) c.q.schedule(1e-6 * double(i), Chain::fire, &c, i);
    c.q.run();
    events += c.q.events_run();
  }
  state.counters["events/s"] = benchmark::Counter(double(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventQueue)->Arg(64)->Arg(4096)->Unit(benchmark::kMillisecond);

// The task engine on an op-graph-like DAG: 8 GPUs, each a chain of kernels, a collective across
// all of them every 4 kernels (as TP layers do).
void BM_TaskEngine(benchmark::State& state) {
  std::vector<SimTask> tasks;
  const int gpus = 8, layers = 20000;
  std::vector<int> last(gpus, -1);
  for (int l = 0; l < layers; ++l) {
    for (int g = 0; g < gpus; ++g) {
      SimTask t;
      t.streams = {2 * g};
      t.duration = 1e-6 * double(1 + (l + g) % 5);
      t.gap = 1e-6;
      t.gpus = {g};
      if (last[size_t(g)] >= 0) t.deps = {last[size_t(g)]};
      last[size_t(g)] = int(tasks.size());
      tasks.push_back(t);
    }
    if (l % 4 == 3) {
      SimTask ar;
      for (int g = 0; g < gpus; ++g) {
        ar.streams.push_back(2 * g);
        ar.deps.push_back(last[size_t(g)]);
      }
      ar.duration = 5e-6;
      ar.category = TaskCategory::Communication;
      int id = int(tasks.size());
      tasks.push_back(ar);
      for (int g = 0; g < gpus; ++g) last[size_t(g)] = id;
    }
  }
  uint64_t events = 0;
  for (auto _ : state) {
    TaskRun r = run_tasks(tasks, 2 * gpus, {});
    events += r.events;
    benchmark::DoNotOptimize(r.makespan);
  }
  state.counters["events/s"] = benchmark::Counter(double(events), benchmark::Counter::kIsRate);
  state.counters["tasks"] = double(tasks.size());
}
BENCHMARK(BM_TaskEngine)->Unit(benchmark::kMillisecond);

// Flows sharing links: every event re-rates all active flows (max-min).
void BM_FlowEngine(benchmark::State& state) {
  std::vector<SimTask> tasks;
  for (int i = 0; i < 20000; ++i) {
    SimTask f;
    f.flow = true;
    f.bytes = 1e6 * double(1 + i % 7);
    f.edges = {i % 4, 4 + (i % 3)};
    f.streams = {i % 8};
    f.category = TaskCategory::Communication;
    tasks.push_back(f);
  }
  uint64_t events = 0;
  for (auto _ : state) {
    TaskRun r = run_tasks(tasks, 8, std::vector<double>(7, 50e9));
    events += r.events;
  }
  state.counters["events/s"] = benchmark::Counter(double(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FlowEngine)->Unit(benchmark::kMillisecond);

void BM_RankLlama70b(benchmark::State& state, const char* machine_name) {
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-70b"));
  ModelFigures fig = derive_figures(cfg);
  Machine machine = load_machine(resolve_machine_path(machine_name));
  Topology topo(machine);
  Workload w = load_workload(resolve_workload_path("chat"));
  SearchOptions so;
  so.num_requests = 1000;
  so.threads = 2;
  SearchResult r;
  for (auto _ : state) r = search_plans(cfg, fig, topo, w, so);
  size_t shapes = 0;
  for (const auto& c : r.ranked) shapes += c.distinct_shapes;
  state.counters["simulated"] = double(r.ranked.size());
  state.counters["rejected"] = double(r.rejected.size());
  state.counters["shapes_priced"] = double(shapes);
  state.counters["requests_each"] = double(r.workload.num_requests);
  std::printf("  %s: %zu candidates simulated (%zu did not fit), 1000 requests each, %.3f s wall; recommended: %s\n",
              machine_name, r.ranked.size(), r.rejected.size(), r.wall_s,
              r.recommended >= 0 ? r.ranked[size_t(r.recommended)].plan.name.c_str() : "(nothing fits)");
}
BENCHMARK_CAPTURE(BM_RankLlama70b, hgx_h100x8, "hgx-h100x8")->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK_CAPTURE(BM_RankLlama70b, pcie_gen5x8_2socket, "pcie-gen5x8-2socket")
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
