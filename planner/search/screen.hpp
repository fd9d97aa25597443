#pragma once
// Screening (issue 16, "search at scale"): a short simulation of the first n requests of the
// same seeded stream that can PROVE a plan misses the SLOs, so its full simulation is skipped.
//
// Why it is exact, not a guess: the simulation is causal. Until the (n+1)-th request arrives at
// t_cut, the run over the first n requests and the full run process the very same events, so a
// time the short run records before t_cut is the full run's time too. From the short run, a
// request is a SURE miss in the full run when (comparisons as MetricsAccumulator makes them):
//   - it finished before t_cut and missed TTFT or TPOT;
//   - its first token came before t_cut later than arrival + the TTFT SLO;
//   - it had no first token before t_cut and t_cut - arrival > the TTFT SLO (the first token can
//     only come later);
//   - its first token came before t_cut, it had not finished, and (t_cut - first token) /
//     (outputs - 1) > the TPOT SLO (its decode can only take longer).
// With N requests in the full run, the plan cannot meet the SLOs when even all other requests
// meeting them leaves (N - sure misses) / N < the attainment threshold. Such a plan misses the SLOs
// in the full simulation for certain; nothing is assumed about the requests after t_cut.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/sim/metrics.hpp"
#include "planner/sim/simulate.hpp"

namespace peerplan {

struct ScreenVerdict {
  bool ran = false;          // a screening run happened (the stream had more than n requests)
  bool proves_miss = false;  // the full run cannot meet the SLOs
  int64_t sure_misses = 0;
  int64_t allowed = 0;       // misses the full run may have and still meet the SLOs
  int64_t screened = 0;      // n
  double t_cut_s = 0;
  std::string why;           // in words, when proves_miss
};

// The rule above on a short run's timings (pure; unit-tested).
ScreenVerdict screen_timings(const std::vector<RequestTiming>& t, double t_cut_s, int64_t total_requests,
                             const Slo& slo, double threshold);

// Simulates `plan` over the first n requests of `source` (n >= 1) and applies the rule. `sim` as
// for the full run; its price_memos (when set) are shared with the caller's later full run.
ScreenVerdict screen_plan(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                          const Workload& w, const RequestSource& source, int64_t n, double threshold,
                          const SimulateOptions& sim);

}  // namespace peerplan
