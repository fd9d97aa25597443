// Per-kernel floor: a compute op never costs less than the empty-kernel GPU time (measured when the
// profile has it, else CostOptions::min_kernel_s); min_kernel_s = 0 restores the pure roofline.
#include <gtest/gtest.h>

#include "planner/cost/cost_model.hpp"
#include "planner/topology/topology.hpp"
#include "tests/cost/cost_test_util.hpp"

namespace peerplan {
namespace {

Op tiny_elementwise(int gpu) {
  Op op;
  op.kind = OpKind::Elementwise;
  op.gpus = {gpu};
  op.mem_bytes = 8192;  // 8 KiB / 2 TB/s = 4 ns: far below any real kernel
  return op;
}

TEST(KernelFloor, TinyOpCostsTheNominalFloorWithoutMeasurements) {
  Topology topo(simtest::pcie_switch_machine(2));
  CostOptions opt;
  opt.min_kernel_s = 2e-6;
  CostModel cost(topo, opt);
  EXPECT_DOUBLE_EQ(cost.price(tiny_elementwise(0), true).seconds, 2e-6);
  EXPECT_DOUBLE_EQ(cost.min_kernel_s(1), 2e-6);
}

TEST(KernelFloor, ZeroFloorKeepsTheRoofline) {
  Topology topo(simtest::pcie_switch_machine(1));
  CostOptions opt;
  opt.min_kernel_s = 0;
  CostModel cost(topo, opt);
  EXPECT_NEAR(cost.price(tiny_elementwise(0), true).seconds, 8192.0 / (2000e9 * opt.hbm_efficiency), 1e-15);
}

TEST(KernelFloor, LargeOpIsUnaffected) {
  Topology topo(simtest::pcie_switch_machine(1));
  CostModel cost(topo);
  Op op = tiny_elementwise(0);
  op.mem_bytes = 1e9;  // 1 GB / 1.7 TB/s ~ 0.59 ms >> floor
  EXPECT_NEAR(cost.price(op, false).seconds, 1e9 / (2000e9 * CostOptions{}.hbm_efficiency), 1e-12);
}

TEST(KernelFloor, MeasuredEmptyKernelTimeWinsPerGpu) {
  Machine m = simtest::pcie_switch_machine(2);
  m.measurements = Measurements{};
  m.measurements->extra = nlohmann::json::parse(
      R"({"launch": {"gpu0": {"gpu_gap_us": 1.25}, "gpu1": {"gpu_gap_us": 1.5}}})");
  Topology topo(m);
  CostModel cost(topo);
  EXPECT_DOUBLE_EQ(cost.price(tiny_elementwise(0), true).seconds, 1.25e-6);
  EXPECT_DOUBLE_EQ(cost.price(tiny_elementwise(1), true).seconds, 1.5e-6);
}

TEST(GraphLaunchGap, NotAddedAgainToOpsTimedBackToBack) {
  // A GEMM priced from the profile's table was timed as region / reps of back-to-back launches, so
  // its figure already holds one inter-kernel gap: inside a CUDA graph it pays no further gap. A
  // roofline-priced op (no measurement) still pays the graph gap; eager launches pay the measured
  // launch overhead either way.
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  GemmTime gt;
  gt.m = 8;
  gt.n = 4096;
  gt.k = 4096;
  gt.time.median = 12e-6;
  m.measurements->gemms.push_back(gt);
  m.measurements->launch_overhead_s = 3.2e-6;
  Topology topo(m);
  CostModel cost(topo);
  Op gemm;
  gemm.kind = OpKind::Gemm;
  gemm.gpus = {0};
  gemm.m = 8;
  gemm.n = 4096;
  gemm.k = 4096;
  gemm.flops = 2.0 * 8 * 4096 * 4096;
  const OpCost& in_graph = cost.price(gemm, true);
  EXPECT_EQ(in_graph.source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(in_graph.seconds, 12e-6);
  EXPECT_DOUBLE_EQ(in_graph.launch_s, 0.0);
  EXPECT_DOUBLE_EQ(cost.price(gemm, false).launch_s, 3.2e-6) << "eager: the measured launch overhead";
  const OpCost& roofline = cost.price(tiny_elementwise(0), true);
  EXPECT_NE(roofline.source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(roofline.launch_s, CostOptions{}.graph_launch_s);
}

}  // namespace
}  // namespace peerplan
