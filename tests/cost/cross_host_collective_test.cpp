// The closed forms of cross_host_collective.hpp; the rule on a merged two-host profile is tested
// in tests/profiler/cross_host_pricing_test.cpp (the merge lives in profiler/common).
#include "planner/cost/cross_host_collective.hpp"

#include <gtest/gtest.h>

#include "tests/cost/cost_test_util.hpp"

using namespace peerplan;

TEST(CrossHostFormula, AllReduceIsLocalReduceScatterPlusTwoHMinusOneNetworkStepsPlusLocalAllGather) {
  // 3 hosts: 2(3-1) = 4 ring steps between hosts.
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(1e-3, 2e-3, 3, 0.5e-3), 1e-3 + 4 * 2e-3 + 0.5e-3);
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(1e-3, 2e-3, 1, 0.5e-3), 1.5e-3) << "one host: no network step";
  EXPECT_THROW(hierarchical_allreduce_s(0, 0, 0, 0), std::invalid_argument);
}

TEST(CrossHostFormula, AStepMovesTheRailsShareOfTheShardTimesItsSharing) {
  // 64 MiB over 2 hosts x 4 GPUs: shard 16 MiB per GPU, a ring step 8 MiB per rail; 4 rails on
  // one NIC put 32 MiB through it.
  const double S = 64.0 * (1 << 20);
  EXPECT_DOUBLE_EQ(hierarchical_step_bytes(S, 4, 2, 1.0), 8.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(hierarchical_step_bytes(S, 4, 2, 4.0), 32.0 * (1 << 20));
  EXPECT_THROW(hierarchical_step_bytes(S, 0, 2, 1.0), std::invalid_argument);
}

TEST(CrossHostFormula, AllToAllPartsRunAtOnce) {
  EXPECT_DOUBLE_EQ(cross_host_alltoall_s(1e-3, 3e-3), 3e-3);
  EXPECT_DOUBLE_EQ(cross_host_alltoall_s(5e-3, 3e-3), 5e-3);
}

TEST(CrossHostFormula, OneHostOrAnotherCollectiveIsNotItsBusiness) {
  // A single-host machine: every group is local, so the ordinary pricing applies.
  Topology topo(simtest::pcie_switch_machine(4));
  EXPECT_FALSE(price_cross_host_collective(OpKind::AllReduce, {0, 1, 2, 3}, 1e6, true, topo, nullptr, {}, true));
  EXPECT_EQ(members_by_host(topo, {2, 0}), (std::vector<std::vector<int>>{{2, 0}}));
  EXPECT_EQ(find_network_curve(topo, nullptr, 0, 1), nullptr);
  // Flows on disjoint routes do not slow each other: 0->1 and 2->3 under one switch.
  std::vector<Route> r{topo.route(0, 1, TransferMode::PeerCopyEngine), topo.route(2, 3, TransferMode::PeerCopyEngine)};
  EXPECT_DOUBLE_EQ(sharing_factor(topo, r), 1.0);
  // 0->1 and 0->2 leave gpu0 on one link: each at half its rate.
  r[1] = topo.route(0, 2, TransferMode::PeerCopyEngine);
  EXPECT_NEAR(sharing_factor(topo, r), 2.0, 1e-9);
}
