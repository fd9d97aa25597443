// A profile's per-class power throttle (PowerThrottle::mixes) read and written: round trip, and the
// errors a hand-edited profile gets (the field and what was expected).
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/topology/measurements.hpp"

using namespace peerplan;

namespace {
nlohmann::json profile_with(nlohmann::json mixes) {
  return {{"power_throttle", {{"onset_ms", 50}, {"factor", 1.186}, {"m", 4096}, {"n", 6144}, {"k", 4096}, {"mixes", mixes}}}};
}
Measurements parse(const nlohmann::json& j) { return parse_measurements(JsonIn(j, "p.json", "/measurements")); }
}  // namespace

TEST(PowerMixJson, RoundTrips) {
  const Measurements m = parse(profile_with({{{"attention_share", 0}, {"gemm", 1.19}, {"attention", 1.25}, {"elementwise", 1.06}},
                                             {{"attention_share", 0.8}, {"gemm", 1.11}, {"attention", 1.18}, {"elementwise", 1.05}}}));
  ASSERT_TRUE(m.power_throttle);
  ASSERT_EQ(m.power_throttle->mixes.size(), 2u);
  EXPECT_DOUBLE_EQ(m.power_throttle->mixes[1].attention, 1.18);
  const Measurements back = parse(measurements_to_json(m));
  ASSERT_EQ(back.power_throttle->mixes.size(), 2u);
  EXPECT_DOUBLE_EQ(back.power_throttle->mixes[0].gemm, 1.19);
  EXPECT_DOUBLE_EQ(back.power_throttle->mixes[1].attention_share, 0.8);
  EXPECT_TRUE(parse({{"power_throttle", {{"factor", 1.1}}}}).power_throttle->mixes.empty()) << "older profiles";
}

TEST(PowerMixJson, BadMixesNameTheField) {
  auto message = [](const nlohmann::json& mixes) {
    try {
      parse(profile_with(mixes));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string unordered = message({{{"attention_share", 0.5}, {"gemm", 1.1}, {"attention", 1.1}, {"elementwise", 1}},
                                         {{"attention_share", 0.2}, {"gemm", 1.1}, {"attention", 1.1}, {"elementwise", 1}}});
  EXPECT_NE(unordered.find("measurements/power_throttle/mixes/1/attention_share"), std::string::npos) << unordered;
  EXPECT_NE(unordered.find("ascending"), std::string::npos) << unordered;
  const std::string fast = message({{{"attention_share", 0}, {"gemm", 0.9}, {"attention", 1.1}, {"elementwise", 1}}});
  EXPECT_NE(fast.find("mixes/0/gemm"), std::string::npos) << fast;
  EXPECT_NE(fast.find("[1, 4]"), std::string::npos) << fast;
}
