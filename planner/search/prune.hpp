#pragma once
// Cheap bounds that drop a candidate before its full simulation (issue 16, "search at scale").
// Each bound is a LOWER bound on time (upper bound on rate) from physics the simulator cannot beat,
// so a plan pruned by it could not have met the SLOs in the simulation either. All bounds are
// computed from the plan, its MemoryReport, the model's figures, the GPUs' nominal HBM bandwidth
// and the workload's requests; none runs the simulator.
//
// 1. memory: check_memory said the plan does not fit, not even one sequence (max_seqs_that_fit < 1,
//    search_plans' own rule; its reason is kept).
//
// 2. tpot (a closed-form decode step time). One decode step of a request passes through every
//    pipeline stage in order, and stage s must at least read, from HBM, the weights one token
//    touches in its layers (per layer: every matrix; routed experts only experts_per_token of
//    their count) and the request's KV cache (its prompt at least: kv_bytes_per_token x
//    min(prompt_min, window) per layer). The stage's GPUs read in parallel at no more than the sum
//    of their nominal HBM bandwidths (the stage's GPUs, plus the expert GPUs of an EP plan), so
//        step_lb(b) = sum over stages s of (W_s + b * K_s) / BW_s        (b sequences per step)
//    and every request's TPOT (its decode time / (outputs - 1)) is >= step_lb(1). If
//    step_lb(1) > the TPOT SLO, every request with 2+ output tokens misses; the plan is pruned
//    when those are more than (1 - slo_threshold) of the requests (meets_slos cannot hold).
//
// 3. rate (a queueing bound). A stage emits at most b tokens per (W_s + b K_s) / BW_s, increasing
//    in b, so with b <= max_num_seqs (B) one replica decodes at most
//        X = min over stages of B / ((W_s + B K_s) / BW_s)          tokens/s,
//    and R replicas at most R X. A request that meets its SLOs finishes by its deadline
//    D_i = a_i + slo_ttft + (o_i - 1) * slo_tpot after decoding o_i - 1 tokens, and no decoding
//    starts before the first arrival a_0. At least ceil(threshold * N) requests must meet, so for
//    every time T the met requests with D_i <= T (all with D_i <= T but at most
//    floor((1 - threshold) N) dropped: the largest) must have been decoded by T:
//        required = max over T of (sum of (o_i - 1) over D_i <= T, less the `drop` largest) / (T - a_0)
//    If R X < required, the plan cannot meet the SLOs at this rate: pruned.
//
// Bounds 2 and 3 are about the SLOs: apply them (slo_bounds) only when the objective ranks by
// meeting them (`gpus`, `goodput`). A plan pruned by 2 has a goodput of 0 at most (no request
// meets the TPOT SLO); one pruned by 3 may still have some goodput, so when no survivor meets the
// SLOs the caller should simulate the rate-pruned plans too (they then rank by goodput). GPUs
// without a nominal hbm_gbps (0) give no bound: the plan is kept.
#include <string>
#include <vector>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

// The rate bound holds the requests (sorted by deadline) up to this many; beyond, it is not applied.
inline constexpr int64_t kRateBoundRequests = 1'000'000;

// What the bounds need from the workload, computed once per search (prune_context).
struct PruneContext {
  const ModelConfig* cfg = nullptr;
  const ModelFigures* fig = nullptr;
  const Machine* machine = nullptr;
  double slo_tpot_s = 0;
  double slo_threshold = 0.99;
  bool slo_bounds = true;          // apply bounds 2 and 3 (the objective ranks by the SLOs)
  int64_t max_num_seqs = 1;        // B
  int64_t min_prompt_tokens = 1;   // the shortest prompt (KV read per step, at least)
  double multi_token_share = 1;    // requests with 2+ output tokens / all
  double required_decode_tps = 0;  // bound 3's `required`, tokens/s
};

PruneContext prune_context(const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine, const Workload& w,
                           double slo_threshold, bool slo_bounds);

// Bound 3's `required` from the requests alone (pure; unit-tested): arrivals, output tokens, SLOs.
double required_decode_rate(const std::vector<Request>& requests, double slo_ttft_s, double slo_tpot_s,
                            double slo_threshold);

struct PruneVerdict {
  bool keep = true;
  std::string bound;           // "memory", "tpot", "rate" when pruned
  std::string why;             // in words, with the figures
  double step_lb_s = 0;        // bound 2's step_lb(1) (0: no bound)
  double decode_tps_ub = 0;    // bound 3's R X (0: no bound)
};

// The closed forms for one replica of `plan` (replica 0's stages): step_lb(b) and X.
double decode_step_lower_bound_s(const Plan& plan, const PruneContext& ctx, int64_t batch);
double decode_tokens_per_s_upper_bound(const Plan& plan, const PruneContext& ctx);

PruneVerdict prune_candidate(const Plan& plan, const MemoryReport& mem, const PruneContext& ctx);

// Counts by bound, for the output ("pruned 41 of 64: 12 memory, 25 tpot, 4 rate").
struct PruneTally {
  int considered = 0, memory = 0, tpot = 0, rate = 0;
  void add(const PruneVerdict& v);
  int pruned() const { return memory + tpot + rate; }
  std::string summary() const;
};

}  // namespace peerplan
