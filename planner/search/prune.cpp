// Cheap bounds before the full simulation (prune.hpp: derivations).
#include "planner/search/prune.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "planner/model/workload_requests.hpp"

namespace peerplan {

double required_decode_rate(const std::vector<Request>& requests, double slo_ttft_s, double slo_tpot_s,
                            double slo_threshold) {
  if (requests.empty()) return 0;
  const size_t n = requests.size();
  const auto drop = size_t(std::floor((1.0 - std::clamp(slo_threshold, 0.0, 1.0)) * double(n) + 1e-9));
  struct Item {
    double deadline;
    double work;
  };
  std::vector<Item> items;
  items.reserve(n);
  double a0 = requests.front().arrival_s;
  for (const auto& r : requests) {
    a0 = std::min(a0, r.arrival_s);
    double w = double(std::max<int64_t>(r.output_tokens - 1, 0));
    items.push_back({r.arrival_s + slo_ttft_s + w * slo_tpot_s, w});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.deadline < b.deadline; });
  std::priority_queue<double, std::vector<double>, std::greater<>> largest;  // the `drop` largest works
  double total = 0, dropped = 0, required = 0;
  for (size_t i = 0; i < n; ++i) {
    total += items[i].work;
    if (drop > 0) {
      if (largest.size() < drop) {
        largest.push(items[i].work);
        dropped += items[i].work;
      } else if (items[i].work > largest.top()) {
        dropped += items[i].work - largest.top();
        largest.pop();
        largest.push(items[i].work);
      }
    }
    if (i + 1 < n && items[i + 1].deadline == items[i].deadline) continue;  // T at the end of a tie
    double span = items[i].deadline - a0;
    if (span > 0) required = std::max(required, (total - dropped) / span);
  }
  return required;
}

PruneContext prune_context(const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine, const Workload& w,
                           double slo_threshold, bool slo_bounds) {
  PruneContext c;
  c.cfg = &cfg;
  c.fig = &fig;
  c.machine = &machine;
  c.slo_tpot_s = w.slo_tpot_s;
  c.slo_threshold = slo_threshold;
  c.slo_bounds = slo_bounds;
  c.max_num_seqs = std::max<int64_t>(w.max_num_seqs, 1);
  if (!slo_bounds) return c;
  // One streamed pass (a search of 10^7 requests must not hold them all: issue 21); the rate bound
  // sorts the requests by deadline, so it keeps them only up to kRateBoundRequests and is left
  // out (no pruning by rate: safe) beyond.
  const RequestSource source(w);
  if (source.size() <= 0) return c;
  const bool keep = source.size() <= kRateBoundRequests;
  std::vector<Request> reqs;
  if (keep) reqs.reserve(size_t(source.size()));
  WorkloadStream in = source.stream();
  Request r;
  int64_t min_prompt = INT64_MAX, n = 0, multi = 0;
  while (in.next(r)) {
    min_prompt = std::min(min_prompt, r.prompt_tokens);
    multi += r.output_tokens > 1 ? 1 : 0;
    ++n;
    if (keep) reqs.push_back(r);
  }
  if (n == 0) return c;
  c.min_prompt_tokens = std::max<int64_t>(min_prompt, 1);
  c.multi_token_share = double(multi) / double(n);
  if (keep) c.required_decode_tps = required_decode_rate(reqs, w.slo_ttft_s, w.slo_tpot_s, slo_threshold);
  return c;
}

namespace {

struct StageFigures {
  double weight_bytes = 0;  // W_s: read once per step
  double kv_bytes = 0;      // K_s: read per sequence per step (the shortest prompt's KV)
  double hbm_Bps = 0;       // BW_s: 0 when a GPU has no nominal figure
};

std::vector<StageFigures> stage_figures(const Plan& plan, const PruneContext& ctx) {
  const ModelFigures& fig = *ctx.fig;
  const Machine& m = *ctx.machine;
  std::set<int> expert_gpus(plan.expert_gpu.begin(), plan.expert_gpu.end());
  std::vector<StageFigures> out;
  for (const auto& s : plan.stages) {
    StageFigures f;
    std::set<int> gpus(s.gpus.begin(), s.gpus.end());
    bool any_moe = false;
    for (int64_t l = s.layer_begin; l < s.layer_end && l < int64_t(fig.layers.size()); ++l) {
      const LayerFigures& lf = fig.layers[size_t(l)];
      any_moe |= lf.moe;
      for (const auto& mx : lf.matrices) {
        if (mx.per_token_active || mx.count <= 0) {
          f.weight_bytes += mx.bytes;
        } else {
          double k = double(std::min<int64_t>(std::max<int64_t>(ctx.cfg->experts_per_token, 1), mx.count));
          f.weight_bytes += mx.bytes * k / double(mx.count);
        }
      }
      int64_t ctx_tokens = lf.window > 0 ? std::min(lf.window, ctx.min_prompt_tokens) : ctx.min_prompt_tokens;
      f.kv_bytes += double(lf.kv_bytes_per_token) * double(ctx_tokens);
    }
    if (any_moe) gpus.insert(expert_gpus.begin(), expert_gpus.end());
    for (int g : gpus) {
      if (g < 0 || g >= m.gpu_count() || m.gpus[size_t(g)].hbm_gbps <= 0) {
        f.hbm_Bps = 0;
        break;
      }
      f.hbm_Bps += m.gpus[size_t(g)].hbm_gbps * 1e9;
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace

double decode_step_lower_bound_s(const Plan& plan, const PruneContext& ctx, int64_t batch) {
  double t = 0;
  for (const auto& s : stage_figures(plan, ctx)) {
    if (s.hbm_Bps <= 0) return 0;
    t += (s.weight_bytes + double(batch) * s.kv_bytes) / s.hbm_Bps;
  }
  return t;
}

double decode_tokens_per_s_upper_bound(const Plan& plan, const PruneContext& ctx) {
  const double b = double(ctx.max_num_seqs);
  double x = 0;
  bool any = false;
  for (const auto& s : stage_figures(plan, ctx)) {
    if (s.hbm_Bps <= 0) return 0;
    double step = (s.weight_bytes + b * s.kv_bytes) / s.hbm_Bps;
    if (step <= 0) return 0;
    double rate = b / step;
    x = any ? std::min(x, rate) : rate;
    any = true;
  }
  return any ? x : 0;
}

PruneVerdict prune_candidate(const Plan& plan, const MemoryReport& mem, const PruneContext& ctx) {
  PruneVerdict v;
  if (!mem.fits && mem.max_seqs_that_fit < 1) {  // as search_plans: not even one sequence fits
    v.keep = false;
    v.bound = "memory";
    v.why = mem.why;
    return v;
  }
  if (!ctx.slo_bounds || !ctx.cfg || !ctx.fig || !ctx.machine) return v;
  v.step_lb_s = decode_step_lower_bound_s(plan, ctx, 1);
  const double ub = decode_tokens_per_s_upper_bound(plan, ctx);
  v.decode_tps_ub = ub * double(plan.replica_count());
  if (v.step_lb_s > ctx.slo_tpot_s && ctx.multi_token_share > 1.0 - ctx.slo_threshold) {
    v.keep = false;
    v.bound = "tpot";
    v.why = fmt::format("a decode step takes at least {:.1f} ms (weights and KV read at the GPUs' nominal HBM "
                        "bandwidth), over the {:.1f} ms TPOT SLO",
                        v.step_lb_s * 1e3, ctx.slo_tpot_s * 1e3);
    return v;
  }
  if (v.decode_tps_ub > 0 && v.decode_tps_ub < ctx.required_decode_tps) {
    v.keep = false;
    v.bound = "rate";
    v.why = fmt::format("decodes at most {:.0f} tokens/s ({} replica{} at batch {}), under the {:.0f} tokens/s the "
                        "SLOs need at this arrival rate",
                        v.decode_tps_ub, plan.replica_count(), plan.replica_count() == 1 ? "" : "s", ctx.max_num_seqs,
                        ctx.required_decode_tps);
  }
  return v;
}

void PruneTally::add(const PruneVerdict& v) {
  ++considered;
  if (v.keep) return;
  if (v.bound == "memory") ++memory;
  else if (v.bound == "tpot") ++tpot;
  else if (v.bound == "rate") ++rate;
}

std::string PruneTally::summary() const {
  return fmt::format("pruned {} of {} before simulation: {} do not fit in memory, {} cannot meet the TPOT SLO (decode "
                     "step lower bound), {} cannot keep up with the arrival rate (throughput upper bound)",
                     pruned(), considered, memory, tpot, rate);
}

}  // namespace peerplan
