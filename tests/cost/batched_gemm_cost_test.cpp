// Strided-batched GEMMs (MLA's absorbed per-head products, one torch.bmm call): the profile's
// optional gemms[i].batch (load, default 1, write only when batched), and the cost model pricing a
// Gemm op of batch_count > 1 from rows of its batch when present, else from one product and one GEMM
// of the same work (never above batch_count separate products).
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/compute_cost.hpp"
#include "planner/cost/cost_model.hpp"
#include "tests/cost/cost_test_util.hpp"

namespace peerplan {
namespace {

GemmTime row(int64_t m, int64_t n, int64_t k, double s, int64_t batch = 1) {
  GemmTime g{0, m, n, k, "bf16", compute_stats({s})};
  g.batch = batch;
  return g;
}

Op absorbed(int64_t m, int64_t batch) {  // DeepSeek-V2-Lite's q_absorb: 16 heads x [m, 128] x [128, 512]
  Op o;
  o.kind = OpKind::Gemm;
  o.gpus = {0};
  o.m = m, o.n = 512, o.k = 128, o.batch_count = batch;
  o.flops = 2.0 * double(m * 512 * 128 * batch);
  o.mem_bytes = double((m * 128 + m * 512 + 128 * 512) * batch) * 2;
  return o;
}

TEST(BatchedGemmCost, TableMatchesTheBatchOnly) {
  const std::vector<GemmTime> t = {row(8, 512, 128, 5e-6), row(8, 512, 128, 9e-6, 16), row(32, 512, 128, 12e-6, 16)};
  EXPECT_DOUBLE_EQ(gemm_from_table(t, 0, 8, 512, 128)->seconds, 5e-6) << "plain rows for a plain GEMM";
  EXPECT_DOUBLE_EQ(gemm_from_table(t, 0, 8, 512, 128, "bf16", 16)->seconds, 9e-6);
  auto mid = gemm_from_table(t, 0, 20, 512, 128, "bf16", 16);
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->source, CostSource::Interpolated);
  EXPECT_DOUBLE_EQ(mid->seconds, 9e-6 + (12e-6 - 9e-6) * 12.0 / 24.0);
  EXPECT_FALSE(gemm_from_table(t, 0, 8, 512, 128, "bf16", 8)) << "another batch is another call";
}

TEST(BatchedGemmCost, CostModelPrefersTheBatchedRowElseMultiplies) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->hbm_gbps = {4000};
  m.measurements->gemms = {row(8, 512, 128, 5e-6), row(32, 512, 128, 6e-6)};
  {
    Topology topo(m);
    CostModel cost(topo);
    // No batched row: between one product's 5 us and 16 of them (here near the top: the only
    // measured shape is launch-bound, so the fit prices the wide GEMM of the same work at 16x).
    const OpCost c = cost.price(absorbed(8, 16), false);
    EXPECT_GE(c.seconds, 5e-6);
    EXPECT_LE(c.seconds, 16 * 5e-6);
    EXPECT_EQ(c.source, CostSource::Fitted) << "a model of the call, not a measurement of it";
  }
  m.measurements->gemms.push_back(row(8, 512, 128, 9e-6, 16));
  {
    Topology topo(m);
    CostModel cost(topo);
    EXPECT_DOUBLE_EQ(cost.price(absorbed(8, 16), false).seconds, 9e-6) << "the one batched call as timed";
    EXPECT_EQ(cost.price(absorbed(8, 16), false).source, CostSource::Measured);
    EXPECT_DOUBLE_EQ(cost.price(absorbed(8, 1), false).seconds, 5e-6) << "a plain GEMM ignores batched rows";
  }
}

TEST(BatchedGemmCost, WithoutItsRowsTheCallIsBoundedByOneProductAndByTheLoop) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->hbm_gbps = {4000};
  // Products of 1 us and a wide GEMM of the same work timed at 40 us: never above the loop of 16.
  m.measurements->gemms = {row(8, 512, 128, 1e-6), row(32, 512, 128, 1e-6), row(8, 8192, 128, 40e-6),
                           row(32, 8192, 128, 40e-6)};
  {
    Topology topo(m);
    CostModel cost(topo);
    EXPECT_DOUBLE_EQ(cost.price(absorbed(8, 16), false).seconds, 16e-6) << "capped by 16 separate products";
  }
  m.measurements->gemms = {row(8, 512, 128, 4e-6), row(32, 512, 128, 4e-6), row(8, 8192, 128, 7e-6),
                           row(32, 8192, 128, 7e-6)};
  {
    Topology topo(m);
    CostModel cost(topo);
    const OpCost c = cost.price(absorbed(8, 16), false);
    EXPECT_DOUBLE_EQ(c.seconds, 7e-6) << "the wide GEMM of the same work, above one product";
    EXPECT_EQ(c.source, CostSource::Fitted);
  }
}

TEST(BatchedGemmCost, ProfileRowsRoundTripTheOptionalBatch) {
  const std::string stats = R"("n": 3, "min_us": 5, "p10_us": 5, "median_us": 9, "p90_us": 9, "p99_us": 9, "max_us": 9)";
  const std::string text = R"({"gemms": [{"gpu": 0, "m": 8, "n": 512, "k": 128, )" + stats + R"(},
      {"gpu": 0, "m": 8, "n": 512, "k": 128, "batch": 16, )" + stats + "}]}";
  const Measurements ms = parse_measurements(JsonIn(parse_json_text(text, "profile.json"), "profile.json"));
  ASSERT_EQ(ms.gemms.size(), 2u);
  EXPECT_EQ(ms.gemms[0].batch, 1);
  EXPECT_EQ(ms.gemms[1].batch, 16);
  const nlohmann::json out = measurements_to_json(ms);
  EXPECT_FALSE(out["gemms"][0].contains("batch")) << "plain rows are written as before";
  EXPECT_EQ(out["gemms"][1]["batch"], 16);
  const std::string bad = R"({"gemms": [{"gpu": 0, "m": 8, "n": 512, "k": 128, "batch": 0, )" + stats + "}]}";
  EXPECT_THROW(parse_measurements(JsonIn(parse_json_text(bad, "p.json"), "p.json")), InputError);
}

}  // namespace
}  // namespace peerplan
