#include "planner/sim/power_state.hpp"

#include <algorithm>

#include "planner/compile/graph_batch.hpp"

namespace peerplan {

bool draws_power_cap(const BatchShape& s) { return s.prefill_tokens > 0 && s.tokens() > kGraphTimedMaxRows; }

double PowerState::run(double start, double priced_s, bool heavy) {
  budget_ = std::min(p_.onset_s, budget_ + std::max(0.0, start - last_end_));  // idle: one second per second
  double d = priced_s;
  if (heavy) {
    d += std::max(0.0, priced_s - budget_) * (p_.factor - 1.0);
    budget_ = std::max(0.0, budget_ - priced_s);
  } else {
    budget_ = std::min(p_.onset_s, budget_ + priced_s * kLightRefill);
  }
  last_end_ = start + d;
  return d;
}

}  // namespace peerplan
