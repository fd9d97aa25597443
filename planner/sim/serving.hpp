#pragma once
// The serving simulation: requests arrive on the simulated clock, the (time-free) scheduler forms
// iterations, each iteration's stages are priced by an IterationPricer, and every pipeline stage
// is a resource serving one micro-batch at a time, so a pipeline keeps up to `micro_batches`
// iterations in flight and its steady-state throughput is that of its slowest stage.
#include <cstdint>
#include <vector>

#include "planner/model/workload.hpp"
#include "planner/model/workload_requests.hpp"
#include "planner/sim/engine.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/sim/metrics.hpp"
#include "planner/sim/router.hpp"
#include "planner/sim/scheduler.hpp"

namespace peerplan {

struct StageRecord {
  int64_t iteration = 0;
  int stage = 0;
  double start = 0, end = 0;
  BatchShape shape;
  int replica = 0;
};

struct ServingRun {
  std::vector<RequestTiming> requests;   // in the order given (= arrival order for a stream); empty when streamed (`stream`)
  int64_t iterations = 0;
  double end_s = 0;
  std::vector<TimeSplit> gpu;            // busy time per GPU over the run (idle filled by the caller)
  std::vector<double> edge_bytes, edge_busy_s;
  std::array<int64_t, kCostSourceCount> ops_by_source{};
  std::array<double, kCostSourceCount> seconds_by_source{};
  std::vector<StageRecord> records;      // the first `record_limit` stage executions (for traces)
  uint64_t events = 0;
  std::vector<int64_t> routed;           // requests the router sent to each replica
};

// One replica of a plan: its own scheduler (KV cache, batch limits) and pricer (its GPUs).
struct ReplicaServer {
  Scheduler* sched = nullptr;
  IterationPricer* pricer = nullptr;
  // Its GPUs' power throttle when the costs are at boost clock (CostModel::serving_throttle): each
  // stage then keeps a PowerState (power_state.hpp). Null: stage times as priced.
  const PowerThrottle* throttle = nullptr;
  // The served model's MoE dispatch tables (grouped_throttles_for); empty: none.
  std::vector<GroupedThrottle> grouped;
};

// Throws InputError (from the scheduler) for a request that can never fit the KV cache.
// Requests are drawn from `requests` one at a time as the previous one arrives (it must yield them
// in arrival order), and only those in flight are held, so the event queue and the memory follow
// the requests in flight, not their total.
// `progress`: report on stderr when the run takes more than a few seconds.
// `stream`: each request goes to it as it finishes (unfinished ones at the end) and run.requests
// stays empty; without it run.requests keeps every request's timing.
ServingRun run_serving(RequestStream& requests, Scheduler& sched, IterationPricer& pricer, int gpu_count,
                       int edge_count, size_t record_limit = 0, bool progress = false,
                       MetricsAccumulator* stream = nullptr);
// A replicated plan: every arrival goes where `router` picks; each replica schedules and runs its
// own iterations; all share one clock, so the router sees each replica's outstanding requests as
// they are at that instant. One replica is the call above, event for event.
ServingRun run_serving(RequestStream& requests, const std::vector<ReplicaServer>& replicas, Router& router,
                       int gpu_count, int edge_count, size_t record_limit = 0, bool progress = false,
                       MetricsAccumulator* stream = nullptr);
// Hand-built requests in any order (tests), through a router: served by arrival time, timings in the order given.
ServingRun run_serving(const std::vector<Request>& requests, const std::vector<ReplicaServer>& replicas, Router& router,
                       int gpu_count, int edge_count, size_t record_limit = 0, bool progress = false,
                       MetricsAccumulator* stream = nullptr);
// Hand-built requests in any order (tests): served by arrival time, timings in the order given.
ServingRun run_serving(const std::vector<Request>& requests, Scheduler& sched, IterationPricer& pricer,
                       int gpu_count, int edge_count, size_t record_limit = 0, bool progress = false,
                       MetricsAccumulator* stream = nullptr);

}  // namespace peerplan
