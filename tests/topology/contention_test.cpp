// Max-min fair rates by progressive filling, with answers worked out by hand.
#include <cmath>
#include <limits>

#include "planner/topology/topology.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

constexpr double GB = 1e9;

TEST(MaxMin, TwoFlowsOnOneEdgeGetHalfEach) {
  // two flows on one 100 GB/s edge: each gets 50 because max-min fair.
  auto r = max_min_rates({{0}, {0}}, {100 * GB});
  EXPECT_DOUBLE_EQ(r[0], 50 * GB);
  EXPECT_DOUBLE_EQ(r[1], 50 * GB);
}

TEST(MaxMin, BottleneckedFlowLeavesTheRestToOthers) {
  // Edge 0: 100, edge 1: 30. Flow A crosses both, flow B only edge 0.
  // A is limited to 30 by edge 1; B takes the remaining 70 of edge 0.
  auto r = max_min_rates({{0, 1}, {0}}, {100 * GB, 30 * GB});
  EXPECT_NEAR(r[0], 30 * GB, 1);
  EXPECT_NEAR(r[1], 70 * GB, 1);
}

TEST(MaxMin, DemandCapFreesCapacityForOthers) {
  // Three flows on a 90 edge; one only wants 10: the other two split the remaining 80.
  auto r = max_min_rates({{0}, {0}, {0}}, {90 * GB}, {10 * GB, 0, 0});
  EXPECT_NEAR(r[0], 10 * GB, 1);
  EXPECT_NEAR(r[1], 40 * GB, 1);
  EXPECT_NEAR(r[2], 40 * GB, 1);
}

TEST(MaxMin, EmptyFlowsAndInfiniteEdges) {
  const double inf = std::numeric_limits<double>::infinity();
  auto r = max_min_rates({{}, {0}, {}}, {inf}, {0, 0, 5 * GB});
  EXPECT_TRUE(std::isinf(r[0]));  // nothing limits it
  EXPECT_TRUE(std::isinf(r[1]));  // infinite edge
  EXPECT_DOUBLE_EQ(r[2], 5 * GB);  // only its demand
  EXPECT_THROW(max_min_rates({{3}}, {1.0}), std::out_of_range);
  EXPECT_THROW(max_min_rates({{0}}, {1.0}, {1.0, 2.0}), std::invalid_argument);
}

TEST(MaxMin, WeightedEdgesCountWhatEachFlowUsesOfThem) {
  // Edge 0: HBM, 100 GB/s. Edge 1: SM slots, capacity 1.2, which flow f uses 1 / (its solo rate) of per byte/s:
  // two kernels of solo rates 80 and 60 GB/s. Equal rates r fill edge 1 at r (1/80 + 1/60) = 1.2 -> r = 41.1 GB/s
  // (edge 0 would allow 50 each): the slots bind first.
  const double w0 = 1 / (80 * GB), w1 = 1 / (60 * GB);
  auto r = max_min_rates({{0, 1}, {0, 1}}, {100 * GB, 1.2}, {80 * GB, 60 * GB}, {{1, w0}, {1, w1}});
  const double expect = 1.2 / (w0 + w1);
  EXPECT_NEAR(r[0], expect, 1e-6 * expect);
  EXPECT_NEAR(r[1], expect, 1e-6 * expect);
  // Unweighted flows beside weighted ones (an empty list: 1 each), and an edge listed twice adds its weights.
  auto u = max_min_rates({{0}, {0, 0}}, {90 * GB}, {}, {{}, {0.5, 1.0}});
  EXPECT_NEAR(u[0], 36 * GB, 1);  // 90 / (1 + 1.5)
  EXPECT_NEAR(u[1], 36 * GB, 1);
  EXPECT_THROW(max_min_rates({{0}}, {1.0}, {}, {{0.0}}), std::invalid_argument);        // not > 0
  EXPECT_THROW(max_min_rates({{0}}, {1.0}, {}, {{1.0, 2.0}}), std::invalid_argument);   // two weights, one edge
  EXPECT_THROW(max_min_rates({{0}, {0}}, {1.0}, {}, {{1.0}}), std::invalid_argument);  // one flow's weights of two
}

TEST(Contention, TwoFlowsThroughOneSwitchUplinkEachGetHalf) {
  // pcie-gen5x8-2socket: GPUs 0 and 1 both sit under sw0, whose single Gen5 x16 uplink (63 GB/s)
  // carries both of their D2H halves when they stage to host: each gets half of the uplink.
  Topology t(load_machine(test::shipped("pcie-gen5x8-2socket")));
  Route a = t.route(0, 1, TransferMode::HostStaged);
  Route b = t.route(2, 3, TransferMode::HostStaged);
  std::vector<double> cap;
  for (int e = 0; e < t.edge_count(); ++e) cap.push_back(t.edge_props(e).capacity_Bps);
  auto r = max_min_rates({a.edges, b.edges}, cap);
  const double uplink = 63.015 * GB;
  EXPECT_NEAR(r[0], uplink / 2, 0.01 * GB);
  EXPECT_NEAR(r[1], uplink / 2, 0.01 * GB);
}

TEST(Contention, TwoDirectionsOfOneLinkDoNotContend) {
  // Peer copies 0 -> 1 and 1 -> 0 through sw0 use opposite directed edges: both at full 63 GB/s.
  Topology t(load_machine(test::shipped("pcie-gen5x8-2socket")));
  Route ab = t.route(0, 1, TransferMode::PeerCopyEngine);
  Route ba = t.route(1, 0, TransferMode::PeerCopyEngine);
  std::vector<double> cap;
  for (int e = 0; e < t.edge_count(); ++e) cap.push_back(t.edge_props(e).capacity_Bps);
  auto r = max_min_rates({ab.edges, ba.edges}, cap);
  EXPECT_NEAR(r[0], 63.015 * GB, 0.01 * GB);
  EXPECT_NEAR(r[1], 63.015 * GB, 0.01 * GB);
  // The same direction twice does contend.
  auto same = max_min_rates({ab.edges, ab.edges}, cap);
  EXPECT_NEAR(same[0], 63.015 / 2 * GB, 0.01 * GB);
}

TEST(Contention, HostStagedFlowsShareSocketMemoryAndPcieRoot) {
  // Small machine: one socket with 100 GB/s memory, hb0 -> cpu0 root link 40 GB/s, switch
  // uplinks 20 GB/s. Flow A: 0 -> 2, flow B: 3 -> 1, both host-staged through cpu0.
  // Each crosses hb0 -> cpu0 up (40, shared: 20 each) and its own 20 GB/s uplink; memory sees
  // 2 x (write + read) = 4r <= 100. Max-min: r = 20 (uplinks and root saturate before memory).
  Topology t(test::parse(test::small_machine()));
  Route a = t.route(0, 2, TransferMode::HostStaged);
  Route b = t.route(3, 1, TransferMode::HostStaged);
  std::vector<double> cap;
  for (int e = 0; e < t.edge_count(); ++e) cap.push_back(t.edge_props(e).capacity_Bps);
  auto r = max_min_rates({a.edges, b.edges}, cap);
  EXPECT_NEAR(r[0], 20 * GB, 1e3);
  EXPECT_NEAR(r[1], 20 * GB, 1e3);
  // Now shrink memory to 60 GB/s: 4r <= 60 binds first, r = 15 each.
  auto j = test::small_machine();
  j["nodes"][0]["mem_gbps"] = 60;
  Topology t2(test::parse(j));
  Route a2 = t2.route(0, 2, TransferMode::HostStaged);
  Route b2 = t2.route(3, 1, TransferMode::HostStaged);
  cap.clear();
  for (int e = 0; e < t2.edge_count(); ++e) cap.push_back(t2.edge_props(e).capacity_Bps);
  auto r2 = max_min_rates({a2.edges, b2.edges}, cap);
  EXPECT_NEAR(r2[0], 15 * GB, 1e3);
  EXPECT_NEAR(r2[1], 15 * GB, 1e3);
  // Alone, a host-staged flow is limited by its 20 GB/s uplink, not by memory (60 / 2 = 30).
  EXPECT_NEAR(a2.bottleneck_Bps, 20 * GB, 1e3);
}

}  // namespace
}  // namespace peerplan
