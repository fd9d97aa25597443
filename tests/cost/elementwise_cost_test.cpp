// Elementwise ops priced from the profile's "elementwise" table (planner/cost/elementwise_cost.hpp):
// the executor's kernels timed back to back in a CUDA graph, interpolated over rows in log space;
// without a point of the op's (gpu, kind, cols) the bytes / HBM-bandwidth price stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/elementwise_cost.hpp"
#include "planner/topology/topology.hpp"
#include "tests/cost/cost_test_util.hpp"

namespace peerplan {
namespace {

ElementwiseTime point(const std::string& kind, int64_t rows, int64_t cols, double us, int gpu = 0) {
  ElementwiseTime e;
  e.gpu = gpu;
  e.kind = kind;
  e.rows = rows;
  e.cols = cols;
  e.time.n = 5;
  e.time.min = e.time.p10 = e.time.median = e.time.p90 = e.time.p99 = e.time.max = e.time.mean = us * 1e-6;
  return e;
}

Op rotary(int64_t rows, int64_t cols) {
  Op op;
  op.kind = OpKind::Elementwise;
  op.ew = EwKind::Rotary;
  op.ew_rows = rows;
  op.ew_cols = cols;
  op.gpus = {0};
  op.mem_bytes = double(rows * cols) * 2 * 3;  // as the compiler: 3 passes over bf16 values
  return op;
}

Machine with_table(std::vector<ElementwiseTime> t) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->elementwise = std::move(t);
  return m;
}

TEST(ElementwiseCost, KindNamesMatchTheProfileNames) {
  // The loader accepts kElementwiseKinds; every EwKind but None must map onto one of them.
  for (EwKind k : {EwKind::RmsNorm, EwKind::QkNorm, EwKind::Rotary, EwKind::MlaRotary, EwKind::Residual, EwKind::Act,
                   EwKind::MoeRoute, EwKind::MoeCombine}) {
    const std::string n = ew_kind_name(k);
    EXPECT_NE(std::find(kElementwiseKinds.begin(), kElementwiseKinds.end(), n), kElementwiseKinds.end()) << n;
  }
  EXPECT_EQ(ew_kind_name(EwKind::None), "");
}

TEST(ElementwiseCost, MeasuredRowsArePricedAtTheirMedianWithNoGraphGap) {
  // rotary at 1 row measured 7 us, far above the 1.24 us floor the roofline gives a 6 KiB op: the
  // table's figure wins, and inside a graph it pays no extra gap (timed back to back, as GEMMs).
  Topology topo(with_table({point("rotary", 1, 4096, 7.0), point("rotary", 64, 4096, 9.0)}));
  CostModel cost(topo);
  const OpCost& c = cost.price(rotary(1, 4096), true);
  EXPECT_NEAR(c.seconds, 7e-6, 1e-12);
  EXPECT_EQ(c.source, CostSource::Measured);
  EXPECT_EQ(c.launch_s, 0);
}

TEST(ElementwiseCost, RowsBetweenPointsInterpolateInLogSpace) {
  // 8 rows lies halfway between 1 and 64 in log space: log-log interpolation gives sqrt(7 * 9) us.
  Topology topo(with_table({point("rotary", 64, 4096, 9.0), point("rotary", 1, 4096, 7.0)}));  // unsorted on purpose
  CostModel cost(topo);
  const OpCost& c = cost.price(rotary(8, 4096), true);
  EXPECT_NEAR(c.seconds, std::sqrt(7.0 * 9.0) * 1e-6, 1e-12);
  EXPECT_EQ(c.source, CostSource::Interpolated);
}

TEST(ElementwiseCost, AProfileOfTheEarlierExecutorSaysItsNormsAreNotFused) {
  // Such a profile compiles the residual adds as kernels of their own (machine.hpp fused_add_norm):
  // the provenance says so, and `simulate` prints it, so a reader knows why it prices 2 kernels a
  // layer more than a fresh profile would.
  Topology old(with_table({point("rms_norm", 1, 4096, 5.0)}));
  EXPECT_TRUE(CostModel(old).provenance().contains("norms"));
  Topology fresh(with_table({point("add_rms_norm", 1, 4096, 5.0)}));
  EXPECT_FALSE(CostModel(fresh).provenance().contains("norms"));
}

TEST(ElementwiseCost, AFusedNormWithoutRowsOfItsOwnIsItsTwoPartsSummed) {
  // An older profile extended with this executor's rows for one model: another model's fused norm
  // has only the two kernels' rows at its width. Their sum prices it, marked no better than
  // interpolated; its own rows win where they exist.
  Op add = rotary(8, 4096);
  add.ew = EwKind::AddRmsNorm;
  Topology parts(with_table({point("rms_norm", 8, 4096, 5.0), point("residual", 8, 4096, 4.0),
                             point("add_rms_norm", 8, 2048, 3.0)}));
  const OpCost& c = CostModel(parts).price(add, true);
  EXPECT_NEAR(c.seconds, 9e-6, 1e-12);
  EXPECT_EQ(c.source, CostSource::Interpolated);
  Topology own(with_table({point("rms_norm", 8, 4096, 5.0), point("residual", 8, 4096, 4.0),
                           point("add_rms_norm", 8, 4096, 6.0)}));
  EXPECT_NEAR(CostModel(own).price(add, true).seconds, 6e-6, 1e-12);
  Topology one(with_table({point("rms_norm", 8, 4096, 5.0)}));  // one part only: the bytes' price
  EXPECT_NE(CostModel(one).price(add, true).source, CostSource::Interpolated);
}

TEST(ElementwiseCost, OtherColsOrKindFallsBackToTheRoofline) {
  Topology topo(with_table({point("rotary", 1, 4096, 7.0), point("rms_norm", 1, 3072, 5.0)}));
  CostModel cost(topo);
  const OpCost& c = cost.price(rotary(1, 3072), true);  // no rotary at 3072 cols on any GPU
  EXPECT_NE(c.source, CostSource::Measured);
  EXPECT_NE(c.source, CostSource::Interpolated);
  EXPECT_LT(c.seconds, 5e-6);  // the floor (a few us at most), not any table figure
  EXPECT_GT(c.launch_s, 0);    // roofline-priced ops keep the graph gap
}

TEST(ElementwiseCost, AnotherGpusPointsPriceAGpuWithoutItsOwnAsGemmsDo) {
  // The profiler times GPU 0 only: a TP plan's GPU 1 ops are priced from GPU 0's points, and a
  // GPU's own points win when it has them.
  Topology topo(with_table({point("rotary", 1, 3072, 6.0, 1), point("rotary", 1, 4096, 7.0, 0),
                            point("rotary", 1, 4096, 9.0, 1)}));
  CostModel cost(topo);
  const OpCost& c = cost.price(rotary(1, 3072), true);  // gpu 0: only GPU 1 has 3072
  EXPECT_NEAR(c.seconds, 6e-6, 1e-12);
  EXPECT_EQ(c.source, CostSource::Measured);
  Op on1 = rotary(1, 4096);
  on1.gpus = {1};
  EXPECT_NEAR(elementwise_from_table(topo.machine().measurements->elementwise, 1, on1)->seconds, 9e-6, 1e-12);
  EXPECT_NEAR(elementwise_from_table(topo.machine().measurements->elementwise, 0, rotary(1, 4096))->seconds, 7e-6, 1e-12);
}

TEST(ElementwiseCost, MlaRotaryIsPricedFromItsOwnRowsNeverFromAStandardRotarysOfTheSameCols) {
  // DeepSeek-V2-Lite's rotary (mla_rope_and_cache: 16 heads' q_pe + the shared k_pe, cols 17 x 64)
  // and a standard rotary of 16 q + 1 kv heads of 64 share (EwKind::Rotary's old name, cols): the
  // profile keys them apart ("mla_rotary"), so each op takes its own kernel's rows.
  Op mla = rotary(8, 17 * 64);
  mla.ew = EwKind::MlaRotary;
  EXPECT_EQ(ew_kind_name(mla.ew), "mla_rotary");
  Topology topo(with_table({point("rotary", 8, 17 * 64, 4.0), point("mla_rotary", 8, 17 * 64, 6.0)}));
  CostModel cost(topo);
  const OpCost& c = cost.price(mla, true);
  EXPECT_NEAR(c.seconds, 6e-6, 1e-12);
  EXPECT_EQ(c.source, CostSource::Measured);
  EXPECT_NEAR(cost.price(rotary(8, 17 * 64), true).seconds, 4e-6, 1e-12);
  // Only a standard rotary's row at those cols: the MLA op keeps its bytes price, not that row.
  Topology only_std(with_table({point("rotary", 8, 17 * 64, 4.0)}));
  CostModel c2(only_std);
  EXPECT_NE(c2.price(mla, true).source, CostSource::Measured);
  EXPECT_FALSE(elementwise_from_table(only_std.machine().measurements->elementwise, 0, mla).has_value());
}

TEST(ElementwiseCost, NoSectionKeepsTodaysPrice) {
  Topology with(with_table({}));
  Topology without(simtest::pcie_switch_machine(1));
  CostModel a(with), b(without);
  EXPECT_EQ(a.price(rotary(1, 4096), true).seconds, b.price(rotary(1, 4096), true).seconds);
  EXPECT_FALSE(elementwise_from_table({}, 0, rotary(1, 4096)).has_value());
}

nlohmann::json row(const std::string& kind, int rows) {
  return {{"gpu", 0},        {"kind", kind},     {"rows", rows},     {"cols", 4096},    {"n", 5},
          {"min_us", 6.0},   {"p10_us", 6.5},    {"median_us", 7.0}, {"p90_us", 7.5},   {"p99_us", 8.0},
          {"max_us", 8.0},   {"mean_us", 7.0}};
}

TEST(ElementwiseLoad, RoundTripsThroughJson) {
  nlohmann::json j = {{"elementwise", {row("rotary", 1), row("moe_route", 8)}}};
  Measurements m = parse_measurements(JsonIn(j, "machine.json", "/measurements"));
  ASSERT_EQ(m.elementwise.size(), 2u);
  EXPECT_EQ(m.elementwise[1].kind, "moe_route");
  EXPECT_EQ(m.elementwise[1].rows, 8);
  EXPECT_NEAR(m.elementwise[0].time.median, 7e-6, 1e-15);
  Measurements back = parse_measurements(JsonIn(measurements_to_json(m), "again.json", "/measurements"));
  ASSERT_EQ(back.elementwise.size(), 2u);
  EXPECT_EQ(back.elementwise[0].cols, 4096);
}

TEST(ElementwiseLoad, OldFilesWithoutTheSectionLoadAndWriteNone) {
  Measurements m = parse_measurements(JsonIn(nlohmann::json::object(), "old.json", "/measurements"));
  EXPECT_TRUE(m.elementwise.empty());
  EXPECT_FALSE(measurements_to_json(m).contains("elementwise"));
}

void expect_error(const nlohmann::json& j, const std::string& what) {
  try {
    parse_measurements(JsonIn(j, "bad.json", "/measurements"));
    ADD_FAILURE() << "accepted " << j.dump();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(ElementwiseLoad, BadInputNamesFileFieldAndExpectation) {
  expect_error({{"elementwise", 3}}, "elementwise");
  expect_error({{"elementwise", {row("layer_norm", 1)}}}, "rms_norm");
  nlohmann::json r = row("rotary", 1);
  r["rows"] = 0;
  expect_error({{"elementwise", {r}}}, "rows");
  r = row("rotary", 1);
  r.erase("cols");
  expect_error({{"elementwise", {r}}}, "cols");
}

}  // namespace
}  // namespace peerplan
