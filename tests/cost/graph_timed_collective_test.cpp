// Collectives inside CUDA graphs (decode) priced from curves timed inside a graph, when the profile has
// them (CollectiveCurve::graph, PeerAllReduceCurve::graph): on the 2 x H200 host (session 13 X1) the
// stream-timed curves priced 8B TP2 decode's NCCL all-reduces ~3.5 us low and the one-shot kernel's
// ~2 us high, while compute in the same graphs was priced from graph-timed tables.
#include <algorithm>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/cost_model.hpp"
#include "tests/cost/cost_test_util.hpp"

using namespace peerplan;

namespace {

// `seconds` at the small sizes, then bandwidth-bound at 1 TB/s (a loadable curve rises at its top).
std::vector<CurvePoint> flat(double seconds, int64_t max_bytes) {
  std::vector<CurvePoint> v;
  for (int64_t b = 4096; b <= max_bytes; b *= 2) v.push_back({b, compute_stats({seconds + double(b) / 1e12})});
  return v;
}

Machine profiled_pair() {
  Machine m = simtest::pcie_switch_machine(2);
  Measurements ms;
  ms.collectives.push_back({"all_reduce", {0, 1}, true, flat(10e-6, int64_t(1) << 26)});
  ms.collectives.push_back({"all_reduce", {0, 1}, true, flat(6e-6, int64_t(1) << 20), true});
  ms.peer_allreduce.push_back({"one_shot", {0, 1}, flat(9e-6, int64_t(1) << 26)});
  ms.peer_allreduce.push_back({"one_shot", {0, 1}, flat(5e-6, int64_t(1) << 20), true});
  ms.peer_allreduce.push_back({"two_shot", {0, 1}, flat(9e-6, int64_t(1) << 26)});
  m.measurements = ms;
  return m;
}

Op all_reduce(int64_t bytes, ArSetting ar) {
  Op op;
  op.kind = OpKind::AllReduce;
  op.gpus = {0, 1};
  op.bytes = bytes;
  op.allreduce = ar;
  return op;
}

}  // namespace

TEST(GraphTimedCollective, GraphIterationsUseTheGraphCurveAndItsGap) {
  Topology topo(profiled_pair());
  CostModel cm(topo);
  const Op op = all_reduce(64 << 10, ArSetting::Nccl);
  const OpCost& in_graph = cm.price(op, true);
  EXPECT_NEAR(in_graph.seconds, 6e-6 + 65536 / 1e12, 1e-12);
  EXPECT_EQ(in_graph.launch_s, 0) << "a graph-timed curve holds its in-graph gap";
  const OpCost& eager = cm.price(op, false);
  EXPECT_NEAR(eager.seconds, 10e-6 + 65536 / 1e12, 1e-12);
  EXPECT_EQ(eager.launch_s, cm.launch_s(false));
}

TEST(GraphTimedCollective, BeyondTheGraphCurveTheStreamCurvePricesWithTheGraphGap) {
  Topology topo(profiled_pair());
  CostModel cm(topo);
  const OpCost& big = cm.price(all_reduce(8 << 20, ArSetting::Nccl), true);
  EXPECT_NEAR(big.seconds, 10e-6 + 8388608 / 1e12, 1e-12) << "no extrapolation of the decode-size curve";
  EXPECT_EQ(big.launch_s, cm.launch_s(true));
}

TEST(GraphTimedCollective, PeerAllReduceKernelsLikewise) {
  Topology topo(profiled_pair());
  CostModel cm(topo);
  const Op op = all_reduce(16 << 10, ArSetting::Custom);
  const OpCost& in_graph = cm.price(op, true);
  ASSERT_EQ(in_graph.allreduce_impl, ArImpl::OneShot);
  EXPECT_NEAR(in_graph.seconds, 5e-6 + 16384 / 1e12, 1e-12);
  EXPECT_EQ(in_graph.launch_s, 0);
  EXPECT_NEAR(cm.price(op, false).seconds, 9e-6 + 16384 / 1e12, 1e-12);
}

TEST(GraphTimedCollective, AProfileWithoutGraphCurvesPricesAsBefore) {
  Machine m = profiled_pair();
  auto& c = m.measurements->collectives;
  c.erase(std::remove_if(c.begin(), c.end(), [](const CollectiveCurve& x) { return x.graph; }), c.end());
  Topology topo(m);
  CostModel cm(topo);
  const OpCost& in_graph = cm.price(all_reduce(64 << 10, ArSetting::Nccl), true);
  EXPECT_NEAR(in_graph.seconds, 10e-6 + 65536 / 1e12, 1e-12);
  EXPECT_EQ(in_graph.launch_s, cm.launch_s(true));
}

TEST(GraphTimedCollective, TheFlagRoundTripsAndIsWrittenOnlyWhenSet) {
  const Machine m = profiled_pair();
  const Measurements& ms = *m.measurements;
  nlohmann::json j = measurements_to_json(ms);
  EXPECT_FALSE(j["collectives"][0].contains("graph")) << "stream curves as older profiles wrote them";
  EXPECT_EQ(j["collectives"][1]["graph"], true);
  Measurements back = parse_measurements(JsonIn(j, "m.json"));
  ASSERT_NE(back.find_collective("all_reduce", {1, 0}, true, true), nullptr);
  EXPECT_TRUE(back.find_collective("all_reduce", {0, 1}, true, true)->graph);
  EXPECT_FALSE(back.find_collective("all_reduce", {0, 1}, true)->graph) << "the default lookup: the stream curve";
  ASSERT_NE(back.find_peer_allreduce("one_shot", {0, 1}, true), nullptr);
  EXPECT_EQ(back.find_peer_allreduce("two_shot", {0, 1}, true), nullptr);
  j["collectives"][1]["graph"] = "yes";
  EXPECT_THROW(parse_measurements(JsonIn(j, "m.json")), InputError);
}
