// The serving simulation's power state (planner/sim/power_state.hpp), with an H200's measured
// throttle (bench/power/clock_response.py, session 14: boost for ~50 ms, then 1.175x).
#include <gtest/gtest.h>

#include "planner/sim/power_state.hpp"

using namespace peerplan;

namespace {
PowerThrottle h200() {
  PowerThrottle p;
  p.onset_s = 0.050;
  p.factor = 1.175;
  return p;
}
BatchShape prefill(int64_t tokens) {
  BatchShape s;
  s.prefill_seqs = 1, s.prefill_tokens = tokens, s.prefill_context = tokens;
  return s;
}
}  // namespace

TEST(PowerState, OnlyPrefillSizedWorkDrawsTheCap) {
  EXPECT_TRUE(draws_power_cap(prefill(8192)));
  EXPECT_FALSE(draws_power_cap(prefill(100))) << "a short prompt's GEMMs are graph-sized";
  BatchShape decode;
  decode.decode_seqs = 256, decode.decode_context = 1000;
  EXPECT_FALSE(draws_power_cap(decode));
}

TEST(PowerState, ShortBurstsRunAtBoostLongOnesPayPastTheOnset) {
  PowerState a(h200());
  EXPECT_DOUBLE_EQ(a.run(1.0, 0.014, true), 0.014) << "a chat prefill: within the budget";
  PowerState b(h200());
  EXPECT_NEAR(b.run(1.0, 0.250, true), 0.050 + 0.200 * 1.175, 1e-12) << "an 8k chunk from rest";
  EXPECT_DOUBLE_EQ(b.budget_s(), 0.0);
  const double end = 1.0 + 0.050 + 0.200 * 1.175;
  EXPECT_NEAR(b.run(end, 0.250, true), 0.250 * 1.175, 1e-12) << "the next chunk right after: throttled throughout";
}

TEST(PowerState, RestRefillsTheBudgetIdleFasterThanDecode) {
  PowerState p(h200());
  p.run(0.0, 0.100, true);  // spent
  EXPECT_DOUBLE_EQ(p.budget_s(), 0.0);
  p.run(0.050 + 0.050 * 1.175 + 0.020, 0.010, false);  // 50 ms at boost + 50 throttled, 20 ms idle, a 10 ms decode step
  EXPECT_NEAR(p.budget_s(), 0.020 + 0.010 * PowerState::kLightRefill, 1e-12);
  PowerState q(h200());
  q.run(0.0, 0.100, true);
  q.run(10.0, 0.010, false);
  EXPECT_DOUBLE_EQ(q.budget_s(), 0.050) << "never more than the onset";
}
