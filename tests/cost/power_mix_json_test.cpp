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

// The MoE dispatch's mixes (PowerThrottle::grouped, session 20): one table per MoE model.
TEST(PowerMixJson, GroupedTablesRoundTripAndNameTheirFields) {
  const nlohmann::json mix = {{{"attention_share", 0}, {"gemm", 1.04}, {"attention", 1.06}, {"elementwise", 1.02}},
                              {{"attention_share", 0.5}, {"gemm", 1.03}, {"attention", 1.07}, {"elementwise", 1.02}}};
  nlohmann::json j = profile_with({{{"attention_share", 0}, {"gemm", 1.19}, {"attention", 1.25}, {"elementwise", 1.06}}});
  j["power_throttle"]["grouped"] = {{{"model", "mixtral-8x7b"}, {"hidden", 4096}, {"intermediate", 14336},
                                     {"experts", 8}, {"topk", 2}, {"tokens", 2048}, {"mixes", mix}}};
  const Measurements m = parse(j);
  ASSERT_EQ(m.power_throttle->grouped.size(), 1u);
  const GroupedThrottle& g = m.power_throttle->grouped[0];
  EXPECT_EQ(g.model, "mixtral-8x7b");
  EXPECT_EQ(g.intermediate, 14336);
  ASSERT_EQ(g.mixes.size(), 2u);
  EXPECT_DOUBLE_EQ(g.mixes[1].attention, 1.07);
  const Measurements back = parse(measurements_to_json(m));
  ASSERT_EQ(back.power_throttle->grouped.size(), 1u);
  EXPECT_EQ(back.power_throttle->grouped[0].tokens, 2048);
  EXPECT_DOUBLE_EQ(back.power_throttle->grouped[0].mixes[0].gemm, 1.04);
  EXPECT_TRUE(parse(profile_with(mix)).power_throttle->grouped.empty()) << "profiles before session 20";
  // The experts' format (session 30): absent is bf16 and stays absent; another format round-trips.
  EXPECT_EQ(g.dtype, "bf16");
  EXPECT_FALSE(measurements_to_json(m)["power_throttle"]["grouped"][0].contains("dtype"));
  j["power_throttle"]["grouped"][0]["dtype"] = "int8";
  EXPECT_EQ(parse(measurements_to_json(parse(j))).power_throttle->grouped[0].dtype, "int8");
  j["power_throttle"]["grouped"][0]["dtype"] = "int3";
  try {
    parse(j);
    ADD_FAILURE() << "an unknown format accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("power_throttle/grouped/0/dtype"), std::string::npos) << e.what();
  }
  j["power_throttle"]["grouped"][0].erase("dtype");

  j["power_throttle"]["grouped"][0]["topk"] = 9;
  try {
    parse(j);
    ADD_FAILURE() << "top-k above the experts accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("power_throttle/grouped/0/topk"), std::string::npos) << e.what();
  }
  j["power_throttle"]["grouped"][0]["topk"] = 2;
  j["power_throttle"]["grouped"][0]["mixes"][1]["attention_share"] = 0;
  try {
    parse(j);
    ADD_FAILURE() << "unordered mixes accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("grouped/0/mixes/1/attention_share"), std::string::npos) << e.what();
  }
}
