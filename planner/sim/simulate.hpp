#pragma once
// One plan under one workload, end to end: cost model -> iteration pricer -> serving simulation
// -> metrics JSON (with per-GPU time split, link utilisation and where every cost came from).
#include <optional>
#include <string>
#include <vector>

#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/workload.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/sim/metrics.hpp"
#include "planner/sim/serving.hpp"

namespace peerplan {

struct SimulateOptions {
  CostOptions cost;
  PricerOptions pricer;
  // KV-cache limits from the memory check: the scheduler never admits more sequences than fit.
  std::optional<MemoryReport> memory;
  int64_t memory_context = 0;   // the context the memory check assumed (tokens per sequence)
  size_t record_limit = 0;      // stage executions kept for a trace
  bool progress = false;        // report a long run's progress on stderr (one simulation at a time only)
  // Keep every request's timing (metrics.per_request) even past kPerRequestLimit requests; without
  // it a longer run streams its requests into the metrics and holds only those in flight.
  bool per_request = false;
  // Prices kept across simulations of the SAME plan, model and cost options (one memo per replica;
  // resized here): a capacity search's probes price each iteration shape once. Null: per run.
  std::vector<PriceMemo>* price_memos = nullptr;
};

struct Simulation {
  Metrics metrics;
  ServingRun run;               // run.requests is moved into metrics.per_request (left empty)
  size_t distinct_shapes = 0;   // iteration shapes priced (after quantisation)
  SchedulerConfig scheduler;
};

// Requests come from the caller: a workload's RequestSource (each call draws its own stream, so
// every candidate of a search sees the same requests and none holds them all), or a vector of
// hand-built ones (tests).
Simulation simulate_plan(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                         const Workload& workload, const RequestSource& requests, const SimulateOptions& opt);
Simulation simulate_plan(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                         const Workload& workload, const std::vector<Request>& requests, const SimulateOptions& opt);

// Fills metrics.gpus / links / busiest_link from a run (utilisation over metrics.duration_s).
void attach_usage(Metrics& m, const ServingRun& run, const Topology& topo);

}  // namespace peerplan
