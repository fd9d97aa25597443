#include "planner/sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/sim/power_state.hpp"
#include "planner/topology/executor_launch.hpp"

namespace peerplan {

void attach_usage(Metrics& m, const ServingRun& run, const Topology& topo) {
  const double span = std::max(run.end_s, m.duration_s);
  m.gpus.clear();
  for (size_t g = 0; g < run.gpu.size(); ++g) {
    GpuUsage u;
    u.gpu = int(g);
    u.compute_s = run.gpu[g].compute;
    u.communication_s = run.gpu[g].communication;
    u.sync_s = run.gpu[g].sync;
    u.idle_s = std::max(0.0, span - u.compute_s - u.communication_s - u.sync_s);
    u.utilisation = span > 0 ? u.compute_s / span : 0;
    m.gpus.push_back(u);
  }
  m.links.clear();
  m.busiest_link.clear();
  double best = 0;
  for (size_t e = 0; e < run.edge_bytes.size(); ++e) {
    if (run.edge_bytes[e] <= 0) continue;
    const EdgeProps& p = topo.edge_props(int(e));
    LinkUsage l;
    l.link = topo.edge_name(int(e));
    l.bytes = run.edge_bytes[e];
    l.busy_s = run.edge_busy_s[e];
    l.utilisation = (span > 0 && p.capacity_Bps > 0) ? l.bytes / (p.capacity_Bps * span) : 0;
    if (l.utilisation > best) {
      best = l.utilisation;
      m.busiest_link = l.link;
    }
    m.links.push_back(l);
  }
  std::sort(m.links.begin(), m.links.end(), [](const LinkUsage& a, const LinkUsage& b) {
    return a.utilisation != b.utilisation ? a.utilisation > b.utilisation : a.link < b.link;
  });
}

namespace {

// One simulation; `serve_with(servers, router, acc)` runs the serving loop over the caller's
// requests (acc: the metrics accumulator, or null to keep every timing); `count`: how many
// requests it will serve.
template <class Serve>
Simulation simulate_with(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                         const Workload& workload, int64_t count, const SimulateOptions& opt, const Serve& serve_with) {
  CostModel cost(topo, opt.cost);
  // One pricer and one scheduler per replica (each replica's GPUs price its own transfers); the
  // router in front. A one-replica plan is the plan itself.
  const int R = plan.replica_count();
  std::vector<Plan> rplans;
  rplans.reserve(size_t(R));
  for (int r = 0; r < R; ++r) rplans.push_back(replica_plan(plan, r));
  std::vector<std::unique_ptr<PlanPricer>> pricers;
  if (opt.price_memos && opt.price_memos->size() < size_t(R)) opt.price_memos->resize(size_t(R));
  for (size_t r = 0; r < rplans.size(); ++r)
    pricers.push_back(std::make_unique<PlanPricer>(rplans[r], cfg, fig, cost, opt.pricer,
                                                   opt.price_memos ? &(*opt.price_memos)[r] : nullptr));
  Simulation sim;
  sim.scheduler = SchedulerConfig::from_workload(workload, plan.stages.size() > 1 ? std::max(1, plan.micro_batches) : 1);
  // KV capacity in tokens: what the memory check found room for (sequences at its context). The
  // scheduler reserves each request's real prompt + output, so short requests pack more densely.
  if (opt.memory && opt.memory->max_seqs_that_fit > 0 && opt.memory_context > 0)
    sim.scheduler.kv_capacity_tokens = opt.memory->max_seqs_that_fit * opt.memory_context;
  std::vector<std::unique_ptr<Scheduler>> scheds;
  std::vector<ReplicaServer> servers;
  const PowerThrottle* throttle = cost.serving_throttle();
  const std::vector<GroupedThrottle> grouped = throttle ? grouped_throttles_for(*throttle, cfg) : std::vector<GroupedThrottle>{};
  for (int r = 0; r < R; ++r) {
    scheds.push_back(std::make_unique<Scheduler>(sim.scheduler));
    servers.push_back({scheds.back().get(), pricers[size_t(r)].get(), throttle, grouped});
  }
  Router router(router_policy(plan.router), R);
  Slo slo{workload.slo_ttft_s, workload.slo_tpot_s, workload.slo_e2e_p99_s};
  Metrics& m = sim.metrics;
  if (size_t(count) <= kPerRequestLimit || opt.per_request) {
    sim.run = serve_with(servers, router, nullptr);
    m = compute_metrics(sim.run.requests, slo);
    // The metrics keep their own copy of every request's timing: release the run's.
    std::vector<RequestTiming>().swap(sim.run.requests);
  } else {  // a long run: requests stream into the metrics as they finish (see kPerRequestLimit)
    MetricsAccumulator acc(slo, kPerRequestLimit);
    sim.run = serve_with(servers, router, &acc);
    m = acc.finish();
  }
  for (const auto& pr : pricers) sim.distinct_shapes += pr->distinct_shapes();
  m.kind = "predicted";
  m.plan = plan.name;
  m.model = cfg.name;
  m.machine = topo.machine().name;
  m.workload = workload.name;
  m.iterations = sim.run.iterations;
  attach_usage(m, sim.run, topo);

  nlohmann::json prov = cost.provenance();
  prov["p2p"] = plan.p2p;
  prov["boundary_modes"] = plan.boundary_modes;
  nlohmann::json src = nlohmann::json::object();
  double total = 0;
  for (double s : sim.run.seconds_by_source) total += s;
  for (int k = 0; k < kCostSourceCount; ++k) {
    if (sim.run.ops_by_source[size_t(k)] == 0) continue;
    src[to_string(CostSource(k))] = {{"ops", sim.run.ops_by_source[size_t(k)]},
                                     {"time_fraction", total > 0 ? sim.run.seconds_by_source[size_t(k)] / total : 0}};
  }
  prov["cost_sources"] = src;
  prov["scheduler"] = {{"max_num_seqs", sim.scheduler.max_num_seqs},
                       {"max_batched_tokens", sim.scheduler.max_batched_tokens},
                       {"chunked_prefill", sim.scheduler.chunked_prefill},
                       {"micro_batches", sim.scheduler.micro_batches},
                       {"kv_capacity_tokens", sim.scheduler.kv_capacity_tokens}};
  if (R > 1)
    prov["router"] = {{"policy", plan.router}, {"replicas", R}, {"requests_per_replica", sim.run.routed}};
  prov["quantisation_points_per_octave"] = opt.pricer.per_octave;
  prov["distinct_iteration_shapes"] = sim.distinct_shapes;
  if (cfg.is_moe()) {  // the routing assumption, at this run's typical decode batch (output tokens per iteration)
    std::vector<int> moe_layers;
    for (const LayerFigures& lf : fig.layers)
      if (lf.moe) moe_layers.push_back(int(lf.index));
    const int64_t batch = m.iterations > 0 ? std::max<int64_t>(1, std::llround(double(m.output_tokens) / double(m.iterations))) : 1;
    prov["moe_routing"] = routing::summary_json(
        routing::summarize(cfg.moe_routing, cfg.experts, cfg.experts_per_token, batch, moe_layers));
    // Where the shared experts run at decode (compiler.cpp CompileOptions::shared_stream): priced on a
    // second stream, Qwen1.5-MoE's batch-1 step is about a fifth shorter (docs/moe_executor.md).
    bool shared = false, quantized_shared = false;
    for (const LayerFigures& lf : fig.layers)
      for (const MatrixShape& ms : lf.matrices)
        if (ms.name == "shared.gate_up") shared = true, quantized_shared = quantized_shared || !shared_in_bf16(lf);
    if (shared)
      prov["moe_shared_experts"] =
          quantized_shared
              ? "on the compute stream after the routed experts: quantized shared experts run on the executor's one "
                "quantized GEMM runner (vLLM overlaps them on a second stream at up to 256 tokens)"
          : shared_expert_stream(topo.machine())
              ? fmt::format("on a second stream at up to 8 tokens, as vLLM does up to 256 (the profile's executor ran "
                            "them so); the two streams share GPU 0's HBM at {:.0f} GB/s (the larger of the device "
                            "copy and the profile's fastest GEMV)",
                            stream_hbm_capacity_Bps(cost, 0) / 1e9)
          : topo.machine().measurements
              ? "on the compute stream after the routed experts, as the profile's executor ran them (vLLM overlaps "
                "them on a second stream at up to 256 tokens; this executor does at up to 8 when its profile says so)"
              : "on the compute stream after the routed experts (a machine without a profile; vLLM overlaps them on a "
                "second stream at up to 256 tokens)";
  }
  if (throttle && !throttle->mixes.empty() && cfg.is_moe() && prov.contains("power"))  // which mixes slowed its experts
    prov["power"]["moe_dispatch"] =
        !grouped.empty() ? "the profile's mixes of this model's expert dispatch"
                : "not timed for this model's experts: they slow as dense GEMMs (`peerplan profile --add-model " +
                      cfg.name + " --machine PROFILE` on that host times them)";
  m.provenance = prov;
  return sim;
}

}  // namespace

Simulation simulate_plan(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                         const Workload& workload, const RequestSource& requests, const SimulateOptions& opt) {
  return simulate_with(plan, cfg, fig, topo, workload, requests.size(), opt,
                       [&](const std::vector<ReplicaServer>& servers, Router& router, MetricsAccumulator* acc) {
                         WorkloadStream in = requests.stream();
                         return run_serving(in, servers, router, topo.gpu_count(), topo.edge_count(), opt.record_limit,
                                            opt.progress, acc);
                       });
}

Simulation simulate_plan(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                         const Workload& workload, const std::vector<Request>& requests, const SimulateOptions& opt) {
  return simulate_with(plan, cfg, fig, topo, workload, int64_t(requests.size()), opt,
                       [&](const std::vector<ReplicaServer>& servers, Router& router, MetricsAccumulator* acc) {
                         return run_serving(requests, servers, router, topo.gpu_count(), topo.edge_count(),
                                            opt.record_limit, opt.progress, acc);
                       });
}

}  // namespace peerplan
