#pragma once
// A pipeline stage's power state in the serving simulation (session 14, docs/simulator.md "Power").
// A paced profile times compute at boost clock; an H200 holds boost for ~50 ms of back-to-back
// tensor-core work, then its 700 W cap slows the same work ~1.17x until it rests (measured by
// bench/power/clock_response.py: recovered after ~50-100 ms idle). So a stage carries a budget of
// boost seconds: prefill-sized iterations spend it and pay the factor past it; idle time refills it
// second for second, decode-only iterations (memory-bound, ~60 % of the cap) at half that rate.
// The factor is the iteration's own: its mix of classes (session 17, throttle_factor).
#include <cstdint>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_config.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

// Work that draws the cap: an iteration with prefill tokens and more than kGraphTimedMaxRows rows
// (graph_batch.hpp; its GEMMs compute-bound, priced from eager rows).
bool draws_power_cap(const BatchShape& s);

// Boost-priced seconds of one stage's compute by the class its time slows with under the cap:
// dense GEMMs, routed-expert (grouped) GEMMs, attention, elementwise (norms, rotary, activation,
// routing, embedding).
struct ClassSeconds {
  double gemm = 0, attention = 0, elementwise = 0, grouped = 0;
  ClassSeconds& operator+=(const ClassSeconds& o) {
    gemm += o.gemm, attention += o.attention, elementwise += o.elementwise, grouped += o.grouped;
    return *this;
  }
};

// The MoE dispatch's tables the profile timed for this model's expert shape (hidden, expert
// intermediate, experts, top-k) and its experts' stored format (routed_expert_format; bf16 tables where
// the profile has none of that format), one per routed token count, ascending. Empty: its grouped GEMMs
// slow as dense ones (profiles before session 20, dense models, models the profile did not time).
std::vector<GroupedThrottle> grouped_throttles_for(const PowerThrottle& p, const ModelConfig& cfg);
// Whether table `t` was timed for this model's expert shape (hidden, expert intermediate, experts, top-k), any format.
bool throttle_fits_experts(const GroupedThrottle& t, const ModelConfig& cfg);
// The mixes of the table timed nearest `tokens` (in log tokens, the smaller on a tie: the dispatch's
// path changes with the rows per expert), or nullptr when `g` is empty.
const std::vector<ThrottleMix>* nearest_grouped_mixes(const std::vector<GroupedThrottle>& g, int64_t tokens);

// The slowdown past the onset of work that splits as `c`: each class by its factor at the work's
// attention share (attention / (GEMM + grouped + attention)), linear between the profile's mixes
// and held at the ends, weighted by the class's seconds. With `grouped` (nearest_grouped_mixes), the
// dense mixes' figure and the dispatch mixes' figure (grouped seconds as its GEMM class) are blended
// by the grouped share of the GEMM seconds: the clock follows what draws the power. A throttle
// without mixes (older profiles): `factor`.
double throttle_factor(const PowerThrottle& p, const ClassSeconds& c,
                       const std::vector<ThrottleMix>* grouped = nullptr);

class PowerState {
 public:
  static constexpr double kLightRefill = 0.5;  // budget regained per second of a decode-only iteration
  // `grouped`: the served model's dispatch tables (grouped_throttles_for).
  explicit PowerState(const PowerThrottle& p, std::vector<GroupedThrottle> grouped = {})
      : p_(p), grouped_(std::move(grouped)), budget_(p.onset_s) {}
  // A stage execution starting at `start` (>= the previous one's end), priced `priced_s` at boost,
  // slowed by `factor` (throttle_factor) past the onset when heavy: returns its duration.
  double run(double start, double priced_s, bool heavy, double factor);
  double run(double start, double priced_s, bool heavy) { return run(start, priced_s, heavy, p_.factor); }
  // `tokens`: the iteration's, which picks the dispatch table (nearest_grouped_mixes).
  double run(double start, double priced_s, bool heavy, const ClassSeconds& mix, int64_t tokens) {
    return run(start, priced_s, heavy, factor(mix, tokens));
  }
  double factor(const ClassSeconds& mix, int64_t tokens) const {
    return throttle_factor(p_, mix, nearest_grouped_mixes(grouped_, tokens));
  }
  double budget_s() const { return budget_; }

 private:
  PowerThrottle p_;
  std::vector<GroupedThrottle> grouped_;
  double budget_ = 0, last_end_ = 0;
};

}  // namespace peerplan
