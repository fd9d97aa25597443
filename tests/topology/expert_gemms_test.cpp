// The expert_gemms table (one routed expert on the eager cuBLAS path, against its rows) and the grouped
// rows' expert_rows, in the machine JSON: round trips, absent when not measured (older profiles write
// byte-for-byte as before), and bad input named by file and field.
#include <gtest/gtest.h>

#include "test_helpers.hpp"

namespace peerplan {
namespace {

using test::expect_rejected;
using test::parse;
using test::small_machine;

nlohmann::json stats(double median_us) {
  return {{"n", 20},        {"min_us", median_us * 0.9}, {"p10_us", median_us * 0.95}, {"median_us", median_us},
          {"p90_us", median_us * 1.05}, {"p99_us", median_us * 1.1},  {"max_us", median_us * 1.2}};
}

// Mixtral int8 gate_up on GPU 1: a cuBLAS-path grouped row of 2048 tokens over 8 experts and two
// one-expert points either side of cuBLASLt's 512-row step.
nlohmann::json with_moe_rows() {
  auto j = small_machine();
  nlohmann::json g = stats(2200);
  g.update({{"gpu", 1}, {"n", 28672}, {"k", 4096}, {"experts", 8}, {"topk", 2}, {"tokens", 2048}, {"rows", 4096},
            {"touched", 8}, {"max_rows", 560}, {"dtype", "int8"}, {"path", "cublas_per_expert"},
            {"expert_rows", {500, 520, 560, 510, 490, 505, 515, 496}}});
  nlohmann::json e1 = stats(190), e2 = stats(175);
  e1.update({{"gpu", 1}, {"n", 28672}, {"k", 4096}, {"rows", 512}, {"dtype", "int8"}});
  e2.update({{"gpu", 1}, {"n", 28672}, {"k", 4096}, {"rows", 544}, {"dtype", "int8"}});
  j["measurements"] = {{"grouped_gemms", {g}}, {"expert_gemms", {e1, e2}}};
  return j;
}

TEST(ExpertGemms, RoundTripWithTheGroupedRowsExpertRows) {
  const Machine m = parse(with_moe_rows());
  ASSERT_TRUE(m.measured());
  const Measurements& ms = *m.measurements;
  ASSERT_EQ(ms.expert_gemms.size(), 2u);
  EXPECT_EQ(ms.expert_gemms[0].gpu, 1);
  EXPECT_EQ(ms.expert_gemms[0].n, 28672);
  EXPECT_EQ(ms.expert_gemms[0].k, 4096);
  EXPECT_EQ(ms.expert_gemms[0].rows, 512);
  EXPECT_EQ(ms.expert_gemms[0].dtype, "int8");
  EXPECT_NEAR(ms.expert_gemms[1].time.median, 175e-6, 1e-12) << "544 rows: past the step, faster than 512";
  ASSERT_EQ(ms.grouped_gemms.size(), 1u);
  EXPECT_TRUE(ms.grouped_gemms[0].cublas);
  EXPECT_EQ(ms.grouped_gemms[0].expert_rows, (std::vector<int64_t>{500, 520, 560, 510, 490, 505, 515, 496}));
  const nlohmann::json once = machine_to_json(m);
  const Machine again = parse_machine_json(once.dump(), "again.json");
  EXPECT_EQ(machine_to_json(again), once);
  EXPECT_EQ(again.measurements->grouped_gemms[0].expert_rows, ms.grouped_gemms[0].expert_rows);
  ASSERT_EQ(again.measurements->expert_gemms.size(), 2u);
  EXPECT_EQ(again.measurements->expert_gemms[1].rows, 544);
  EXPECT_EQ(once["measurements"]["expert_gemms"][0]["median_us"], 190) << "the stats flat in the row, as gemms";
}

TEST(ExpertGemms, AbsentWhenNotMeasuredSoOlderProfilesWriteAsBefore) {
  auto j = with_moe_rows();
  j["measurements"].erase("expert_gemms");
  j["measurements"]["grouped_gemms"][0].erase("expert_rows");
  const nlohmann::json once = machine_to_json(parse(j));
  EXPECT_FALSE(once["measurements"].contains("expert_gemms"));
  EXPECT_FALSE(once["measurements"]["grouped_gemms"][0].contains("expert_rows"));
  // The shipped profile (grouped rows, no expert table) round-trips to the same text.
  const Machine shipped = load_machine(test::shipped("h200x2-nvlink"));
  ASSERT_TRUE(shipped.measured());
  EXPECT_TRUE(shipped.measurements->expert_gemms.empty());
  const std::string text = machine_to_json(shipped).dump();
  EXPECT_EQ(machine_to_json(parse_machine_json(text, "rt.json")).dump(), text);
  EXPECT_EQ(text.find("expert_rows"), std::string::npos);
  EXPECT_EQ(text.find("expert_gemms"), std::string::npos);
}

TEST(ExpertGemmsBadInput, EachMalformedEntryNamesItsField) {
  auto j = with_moe_rows();
  j["measurements"]["expert_gemms"][1].erase("rows");
  expect_rejected(j, "measurements/expert_gemms/1/rows", "rows");
  j = with_moe_rows();
  j["measurements"]["expert_gemms"][0]["rows"] = 0;
  expect_rejected(j, "measurements/expert_gemms/0/rows", "positive");
  j = with_moe_rows();
  j["measurements"]["expert_gemms"][0]["dtype"] = "fp4";
  expect_rejected(j, "measurements/expert_gemms/0/dtype", "one of bf16, fp8, int8, int4, mxfp4");
  j = with_moe_rows();
  j["measurements"]["expert_gemms"][0]["n"] = "28672";
  expect_rejected(j, "measurements/expert_gemms/0/n", "");
  j = with_moe_rows();
  j["measurements"]["expert_gemms"][0].erase("median_us");
  expect_rejected(j, "measurements/expert_gemms/0/median_us", "median_us");
  j = with_moe_rows();
  j["measurements"]["expert_gemms"] = {{"gpu", 0}};
  expect_rejected(j, "measurements/expert_gemms", "an array");
  j = with_moe_rows();
  j["measurements"]["expert_gemms"][0]["gpu"] = 7;
  expect_rejected(j, "measurements/expert_gemms/0/gpu", "GPU 7 does not exist");
}

TEST(ExpertGemmsBadInput, ExpertRowsMustBeTheRowsRouting) {
  auto j = with_moe_rows();
  j["measurements"]["grouped_gemms"][0]["expert_rows"][3] = 0;
  expect_rejected(j, "measurements/grouped_gemms/0/expert_rows/3", "a positive row count");
  j = with_moe_rows();
  j["measurements"]["grouped_gemms"][0]["expert_rows"].erase(7);  // 7 counts for 8 touched experts
  expect_rejected(j, "measurements/grouped_gemms/0/expert_rows", "one row count per touched expert (8)");
  j = with_moe_rows();
  j["measurements"]["grouped_gemms"][0]["expert_rows"][0] = 501;  // sums to 4097, not the row's 4096
  expect_rejected(j, "measurements/grouped_gemms/0/expert_rows", "summing to rows (4096)");
  j = with_moe_rows();
  j["measurements"]["grouped_gemms"][0]["expert_rows"] = "500,520";
  expect_rejected(j, "measurements/grouped_gemms/0/expert_rows", "");
}

}  // namespace
}  // namespace peerplan
