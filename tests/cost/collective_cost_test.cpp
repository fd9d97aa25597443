#include "planner/cost/collective_cost.hpp"

#include <gtest/gtest.h>

#include "planner/cost/transfer_cost.hpp"
#include "tests/cost/cost_test_util.hpp"

using namespace peerplan;

TEST(CollectiveCost, OpKindsAreTheNcclCollectivesOfTheOneDefinition) {
  // The compiler's collective kinds map onto planner/topology/collective.hpp, so the cost model and
  // the profiler read the same names and bus factors (nccl-tests: broadcast busBw = algBw).
  EXPECT_EQ(coll_op(OpKind::AllReduce), CollOp::AllReduce);
  EXPECT_EQ(coll_op(OpKind::Broadcast), CollOp::Broadcast);
  EXPECT_STREQ(to_string(OpKind::ReduceScatter), coll_op_name(CollOp::ReduceScatter));
  EXPECT_DOUBLE_EQ(bus_bw_factor(coll_op(OpKind::AllToAll), 2), 0.5);
  EXPECT_THROW(coll_op(OpKind::Gemm), std::invalid_argument) << "a GEMM is not a collective";
  EXPECT_THROW(coll_op(OpKind::Send), std::invalid_argument) << "a Send is a copy, not an NCCL collective";
}

TEST(CollectiveCost, RingTimeIsLatencyPlusBusBytes) {
  // 4 ranks, 1 GB all-reduce at 100 GB/s bus: 1.5 GB / 100 GB/s = 15 ms, plus 6 steps of 1 us and 8 us base.
  EXPECT_NEAR(ring_time_s(OpKind::AllReduce, 4, 1e9, 100e9, 1e-6, 8e-6), 15e-3 + 6e-6 + 8e-6, 1e-12);
  EXPECT_DOUBLE_EQ(ring_time_s(OpKind::AllReduce, 1, 1e9, 100e9, 1e-6, 8e-6), 0.0) << "one rank: nothing to do";
}

TEST(CollectiveCost, RingOnOneSwitchGetsTheFullLinkBecauseDirectionsDoNotContend) {
  // Ring 0->1->2->3->0 under one switch: each GPU's up-link carries one flow and its down-link one
  // flow, so every hop gets the full 50 GB/s (x efficiency).
  Topology topo(simtest::pcie_switch_machine(4));
  double lat = 0;
  double bus = ring_bus_bandwidth(topo, {0, 1, 2, 3}, true, 1.0, &lat);
  EXPECT_NEAR(bus, 50e9, 1e3);
  EXPECT_NEAR(lat, 2e-6, 1e-9) << "two hops of 1 us";
}

TEST(CollectiveCost, WithoutP2PTheRingSharesHostMemory) {
  // P2P off: every hop goes gpu -> sw -> hb -> cpu memory (write + read) -> hb -> sw -> gpu.
  // The 4 flows cross sw0->hb0 (50 GB/s) together: 12.5 GB/s each; host memory (100 GB/s, crossed
  // twice per flow) would allow 12.5 too.
  Topology topo(simtest::pcie_switch_machine(4));
  double bus = ring_bus_bandwidth(topo, {0, 1, 2, 3}, false, 1.0, nullptr);
  EXPECT_NEAR(bus, 12.5e9, 1e3);
}

TEST(CollectiveCost, MeasuredCurveWinsOverTheEstimate) {
  Topology topo(simtest::pcie_switch_machine(2));
  std::vector<CurvePoint> pts(2);
  pts[0].bytes = 1 << 20;
  pts[0].time.median = 100e-6;
  pts[1].bytes = 1 << 24;
  pts[1].time.median = 900e-6;
  CostOptions opt;
  CollectivePrice p = price_collective(OpKind::AllReduce, {0, 1}, double(1 << 20), true, topo, &pts, opt, true);
  EXPECT_EQ(p.source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(p.seconds, 100e-6);
  CollectivePrice est = price_collective(OpKind::AllReduce, {0, 1}, double(1 << 20), true, topo, nullptr, opt, true);
  EXPECT_EQ(est.source, CostSource::Nominal) << "no measurements: the graph is nominal";
  EXPECT_EQ(est.algo, "ring");
  EXPECT_GT(est.seconds, (1 << 20) / 50e9);
  EXPECT_FALSE(est.edge_bytes.empty()) << "the ring's links carry its bytes";
}

TEST(TransferCost, NominalIsRouteLatencyPlusSetupPlusBytesAtTheBottleneck) {
  Topology topo(simtest::pcie_switch_machine(2));
  Route r = topo.route(0, 1, TransferMode::PeerCopyEngine);
  ASSERT_TRUE(r.valid);
  CostOptions opt;
  opt.link_efficiency = 1.0;
  TransferPrice p = price_transfer(r, nullptr, 50e6, opt);
  EXPECT_EQ(p.source, CostSource::Nominal);
  EXPECT_NEAR(p.seconds, 2e-6 + opt.copy_setup_s + 1e-3, 1e-9) << "50 MB at 50 GB/s = 1 ms";
}

TEST(TransferCost, MeasuredCurveIsReproducedAloneAndSplitIntoAlphaAndRate) {
  Topology topo(simtest::pcie_switch_machine(2));
  Route r = topo.route(0, 1, TransferMode::PeerCopyEngine);
  TransferCurve c;
  for (int64_t b = 4096; b <= (256 << 20); b *= 8) {
    CurvePoint p;
    p.bytes = b;
    p.time.median = 8e-6 + double(b) / 40e9;
    c.points.push_back(p);
  }
  TransferPrice p = price_transfer(r, &c, double(c.points[3].bytes), CostOptions{});
  EXPECT_EQ(p.source, CostSource::Measured);
  EXPECT_NEAR(p.alpha_s + double(c.points[3].bytes) / p.rate_Bps, p.seconds, 1e-12);
  EXPECT_NEAR(p.rate_Bps / 40e9, 1.0, 1e-3) << "streaming rate is the curve's bandwidth";
}
