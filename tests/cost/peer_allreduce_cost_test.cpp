// Peer-memory all-reduce prices (planner/cost/peer_allreduce_cost.hpp): the model's closed form on
// small machines, a measured curve taking over, and the cost model asking the plan's rule.
#include "planner/cost/peer_allreduce_cost.hpp"

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/cost_model.hpp"
#include "tests/cost/cost_test_util.hpp"

using namespace peerplan;

namespace {
// pcie_switch_machine: 50 GB/s links x 0.8 efficiency = 40 GB/s, 1 us per hop (2 hops GPU -> GPU).
constexpr double kRate = 40e9, kHop2 = 2e-6, kBase = 2e-6;
constexpr double S = 1 << 20;
}  // namespace

TEST(PeerAllReduceCost, OneShotOnTwoGpusIsTwoSignalsAndOneBufferRead) {
  Topology topo(simtest::pcie_switch_machine(2));
  CostOptions opt;
  CollectivePrice p = model_peer_allreduce(ArImpl::OneShot, {0, 1}, S, topo, nullptr, opt, true);
  EXPECT_NEAR(p.seconds, kBase + 2 * kHop2 + S / kRate, 1e-12);
  EXPECT_EQ(p.source, CostSource::Nominal) << "nominal graph";
  EXPECT_EQ(p.algo, "one_shot");
}

TEST(PeerAllReduceCost, TwoShotReadsLessPerGpuOnFourButPaysAThirdSignal) {
  // Four GPUs under one switch: every GPU's down-link carries three peer reads at once (40/3 GB/s
  // each). One-shot reads S from each peer; two-shot S/4 twice.
  Topology topo(simtest::pcie_switch_machine(4));
  CostOptions opt;
  const double r = kRate / 3;
  CollectivePrice one = model_peer_allreduce(ArImpl::OneShot, {0, 1, 2, 3}, S, topo, nullptr, opt, false);
  CollectivePrice two = model_peer_allreduce(ArImpl::TwoShot, {0, 1, 2, 3}, S, topo, nullptr, opt, false);
  EXPECT_NEAR(one.seconds, kBase + 2 * kHop2 + S / r, 1e-12);
  EXPECT_NEAR(two.seconds, kBase + 3 * kHop2 + 2 * (S / 4) / r, 1e-12);
  EXPECT_EQ(one.source, CostSource::Derived) << "an estimate over a measured graph: a wider band";
  EXPECT_LT(two.seconds, one.seconds) << "at 1 MiB the bytes dominate";
  CollectivePrice small1 = model_peer_allreduce(ArImpl::OneShot, {0, 1, 2, 3}, 4096, topo, nullptr, opt, false);
  CollectivePrice small2 = model_peer_allreduce(ArImpl::TwoShot, {0, 1, 2, 3}, 4096, topo, nullptr, opt, false);
  EXPECT_LT(small1.seconds, small2.seconds) << "at 4 KiB the signals dominate";
}

TEST(PeerAllReduceCost, MeasuredSignalLatencyReplacesTheRoutes) {
  Topology topo(simtest::pcie_switch_machine(2));
  Measurements m;
  m.latencies.push_back({1, 0, "sm_pingpong", compute_stats({0.5e-6})});
  CollectivePrice p = model_peer_allreduce(ArImpl::OneShot, {0, 1}, 4096, topo, &m, CostOptions{}, false);
  EXPECT_NEAR(p.seconds, kBase + 2 * 0.5e-6 + 4096 / kRate, 1e-12);
}

TEST(PeerAllReduceCost, MeasuredCurveOfThatKernelAndGroupWins) {
  Topology topo(simtest::pcie_switch_machine(2));
  Measurements m;
  PeerAllReduceCurve c{"one_shot", {1, 0}, {}};
  for (int64_t b = 4096; b <= (int64_t(1) << 26); b *= 2) c.points.push_back({b, compute_stats({5e-6 + double(b) / 30e9})});
  m.peer_allreduce.push_back(c);
  CollectivePrice p = price_peer_allreduce(ArImpl::OneShot, {0, 1}, 4096, topo, &m, CostOptions{}, false);
  EXPECT_NEAR(p.seconds, 5e-6 + 4096 / 30e9, 1e-12);
  EXPECT_EQ(p.source, CostSource::Measured);
  CollectivePrice q = price_peer_allreduce(ArImpl::TwoShot, {0, 1}, 4096, topo, &m, CostOptions{}, false);
  EXPECT_EQ(q.source, CostSource::Derived) << "no two-shot curve: the model";
}

TEST(PeerAllReduceCost, NeedsP2pBetweenEveryPair) {
  Topology topo(simtest::pcie_switch_machine(2, "none"));
  EXPECT_THROW(model_peer_allreduce(ArImpl::OneShot, {0, 1}, 4096, topo, nullptr, CostOptions{}, true), RuntimeError);
}

TEST(PeerAllReduceCost, CostModelPricesTheRulesKernelAndNcclAboveItsSize) {
  Topology topo(simtest::pcie_switch_machine(2));
  CostModel cm(topo);
  Op op;
  op.kind = OpKind::AllReduce;
  op.gpus = {0, 1};
  op.bytes = 4096;
  const double nccl_small = cm.price(op, true).seconds;
  op.allreduce = ArSetting::AutoVllm;
  const OpCost& small = cm.price(op, true);
  EXPECT_EQ(small.allreduce_impl, ArImpl::OneShot);
  EXPECT_LT(small.seconds, nccl_small) << "4 KiB: no NCCL protocol set-up";
  op.bytes = 8 << 20;  // vLLM's buffer size: NCCL again
  const OpCost& big = cm.price(op, true);
  EXPECT_EQ(big.allreduce_impl, ArImpl::Nccl);
  Op nccl = op;
  nccl.allreduce = ArSetting::Nccl;
  EXPECT_DOUBLE_EQ(big.seconds, cm.price(nccl, true).seconds);
  op.bytes = 4096;
  op.p2p = false;
  EXPECT_EQ(cm.price(op, true).allreduce_impl, ArImpl::Nccl) << "P2P off: NCCL";
  EXPECT_TRUE(cm.provenance().contains("peer_allreduce"));
}

TEST(PeerAllReduceCost, ProfileSectionRoundTripsAndIsCheckedAndOptional) {
  Measurements m;
  PeerAllReduceCurve c{"two_shot", {0, 1}, {}};
  c.points.push_back({4096, compute_stats({3e-6, 4e-6})});
  m.peer_allreduce.push_back(c);
  nlohmann::json j = measurements_to_json(m);
  Measurements back = parse_measurements(JsonIn(j, "m.json"));
  ASSERT_EQ(back.peer_allreduce.size(), 1u);
  EXPECT_EQ(back.peer_allreduce[0].algo, "two_shot");
  ASSERT_NE(back.find_peer_allreduce("two_shot", {1, 0}), nullptr) << "group order does not matter";
  EXPECT_EQ(back.find_peer_allreduce("one_shot", {0, 1}), nullptr);
  EXPECT_FALSE(measurements_to_json(Measurements{}).contains("peer_allreduce")) << "older profiles round-trip unchanged";
  j["peer_allreduce"][0]["algo"] = "three_shot";
  EXPECT_THROW(parse_measurements(JsonIn(j, "m.json")), InputError);
  j["peer_allreduce"][0]["algo"] = "one_shot";
  j["peer_allreduce"][0]["gpus"] = {0};
  EXPECT_THROW(parse_measurements(JsonIn(j, "m.json")), InputError) << "one GPU reduces nothing";
}
