#include "planner/search/screen.hpp"

#include <cmath>

#include <fmt/format.h>

namespace peerplan {

ScreenVerdict screen_timings(const std::vector<RequestTiming>& t, double t_cut_s, int64_t total_requests,
                             const Slo& slo, double threshold) {
  ScreenVerdict v;
  v.ran = true;
  v.screened = int64_t(t.size());
  v.t_cut_s = t_cut_s;
  int64_t ttft = 0, tpot = 0;
  for (const RequestTiming& r : t) {
    const bool first = r.first_token_s >= 0 && r.first_token_s < t_cut_s;
    const bool done = first && r.finish_s >= 0 && r.finish_s < t_cut_s;
    if (!first) {  // the first token comes at t_cut or later
      if (t_cut_s - r.arrival_s > slo.ttft_s) ++ttft;
      continue;
    }
    const double t_first = r.first_token_s - r.arrival_s;
    if (!(t_first <= slo.ttft_s)) {
      ++ttft;
      continue;
    }
    if (r.output_tokens <= 1) continue;
    // Finished: its TPOT as the metrics compute it; running: a lower bound of it.
    const double end = done ? r.finish_s : t_cut_s;
    const double t_per = (end - r.first_token_s) / double(r.output_tokens - 1);
    if (!(t_per <= slo.tpot_s)) ++tpot;
  }
  v.sure_misses = ttft + tpot;
  // The most misses that still allow (N - misses) / N >= threshold, as meets_slos compares.
  const int64_t N = total_requests;
  v.allowed = 0;
  while (v.allowed < N && double(N - (v.allowed + 1)) / double(N) >= threshold) ++v.allowed;
  v.proves_miss = N > 0 && double(N - v.sure_misses) / double(N) < threshold;
  if (v.proves_miss)
    v.why = fmt::format("in a screening run of the first {} requests (identical to the full run until request {} "
                        "arrives at {:.1f} s), {} already miss the SLOs ({} TTFT, {} TPOT); at most {} of {} may",
                        v.screened, v.screened + 1, t_cut_s, v.sure_misses, ttft, tpot, v.allowed, N);
  return v;
}

ScreenVerdict screen_plan(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                          const Workload& w, const RequestSource& source, int64_t n, double threshold,
                          const SimulateOptions& sim) {
  ScreenVerdict v;
  if (n < 1 || source.size() <= n) return v;
  std::vector<Request> first;
  first.reserve(size_t(n) + 1);
  WorkloadStream in = source.stream();
  for (Request r; int64_t(first.size()) <= n && in.next(r);) first.push_back(r);
  if (int64_t(first.size()) <= n) return v;
  const double t_cut = first.back().arrival_s;  // request n+1: the first the short run does not have
  first.pop_back();
  SimulateOptions so = sim;
  so.per_request = true;
  so.progress = false;
  so.record_limit = 0;
  Simulation s = simulate_plan(plan, cfg, fig, topo, w, first, so);
  const Slo slo{w.slo_ttft_s, w.slo_tpot_s, w.slo_e2e_p99_s};
  return screen_timings(s.metrics.per_request, t_cut, source.size(), slo, threshold);
}

}  // namespace peerplan
