// Collectives over groups that span hosts, priced on a merged two-host MPI profile (2 hosts x 2
// H200, each host's own measurements, a measured network curve): NCCL's hierarchical rule, marked
// inferred. Lives here because the merged profile is built by profiler/common/profile_merge.
#include <gtest/gtest.h>

#include <cmath>

#include "planner/core/files.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/cross_host_collective.hpp"
#include "planner/cost/curve.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/report/search_report.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/topology.hpp"
#include "profiler/common/profile_merge.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

constexpr double kNetAlpha = 20e-6, kNetBps = 25e9;

// The network curve an MPI profile records: t = 20 us + bytes / 25 GB/s at every power of two.
TransferCurve net_curve(int src, int dst) {
  TransferCurve c{src, dst, "net_nccl", "", {}};
  for (int64_t b = 4096; b <= (int64_t(1) << 30); b *= 2) {
    double t = kNetAlpha + double(b) / kNetBps;
    c.points.push_back({b, compute_stats({t, t})});
  }
  return c;
}

// Two hosts, each the shipped 2 x H200 profile with its measurements (NCCL curves of {0,1},
// transfers, GEMMs): host B's figures renamed to GPUs 2 and 3, as rank 2 would send them.
Machine two_hosts(bool with_net_curves = true) {
  Machine h = load_machine(find_data_file("models/hardware/h200x2-nvlink.json"));
  Measurements a = *h.measurements, b = *h.measurements;
  remap_gpu_ids(b, {{0, 2}, {1, 3}});
  if (with_net_curves) {
    a.transfers.push_back(net_curve(0, 2));  // rank 0 -> rank 2 and back: one pair per host pair
    b.transfers.push_back(net_curve(2, 0));
  }
  MergeInput in;
  auto ri = [](int rank, const std::string& host, int dev) { return RankInfo{rank, host, dev, 2, dev, 2, ""}; };
  in.layout = make_rank_layout({ri(0, "hostA", 0), ri(1, "hostA", 1), ri(2, "hostB", 0), ri(3, "hostB", 1)});
  Machine ha = h, hb = h;
  ha.measurements.reset();
  hb.measurements.reset();
  ha.host = "hostA";
  hb.host = "hostB";
  in.host_machines = {ha, hb};
  in.rank_results = {a, Measurements{}, b, Measurements{}};
  return merge_mpi_profile(in);
}

Op collective(OpKind k, std::vector<int> gpus, int64_t bytes) {
  Op op;
  op.kind = k;
  op.name = "c";
  op.gpus = std::move(gpus);
  op.bytes = bytes;
  op.p2p = true;
  return op;
}

double measured(const Machine& m, const char* op, std::vector<int> g, double bytes) {
  const CollectiveCurve* c = m.measurements->find_collective(op, g, true);
  EXPECT_NE(c, nullptr) << op;
  return c ? curve_time(c->points, bytes).seconds : 0;
}

Plan tp4() { return test_plans::tp({0, 1, 2, 3}, 32, "tp4[0,1,2,3]"); }

// Across hosts the boundary takes the network route.
Plan tp2pp2() { return test_plans::tp_pp({{0, 1}, {2, 3}}, 32, "host_staged", 2, "tp2pp2[0,1|2,3]"); }

}  // namespace

TEST(CrossHostCollective, GroupsSplitByHostInGroupOrder) {
  Machine m = two_hosts();
  Topology topo(m);
  EXPECT_EQ(members_by_host(topo, {3, 0, 2, 1}), (std::vector<std::vector<int>>{{3, 2}, {0, 1}}));
  EXPECT_EQ(members_by_host(topo, {0, 1}).size(), 1u);
  // Both GPUs of a host reach the network through the host's one NIC: two rails share it.
  std::vector<Route> rails{topo.route(0, 2, TransferMode::HostStaged), topo.route(1, 3, TransferMode::HostStaged)};
  EXPECT_NEAR(sharing_factor(topo, rails), 2.0, 1e-9);
  EXPECT_NEAR(sharing_factor(topo, {rails[0]}), 1.0, 1e-12) << "alone: no sharing";
  // Opposite directions of a link do not contend.
  EXPECT_NEAR(sharing_factor(topo, {rails[0], topo.route(2, 0, TransferMode::HostStaged)}), 1.0, 1e-9);
  ASSERT_NE(find_network_curve(topo, &*m.measurements, 1, 3), nullptr) << "the host pair's measured curve";
  EXPECT_EQ(find_network_curve(topo, &*m.measurements, 1, 3)->src, 0);
  EXPECT_EQ(find_network_curve(topo, &*m.measurements, 3, 0)->src, 2) << "direction B -> A has its own curve";
}

TEST(CrossHostCollective, Tp4AcrossTwoHostsFollowsTheHierarchicalFormula) {
  // All-reduce of S = 64 MiB over 2 hosts x 2 GPUs: reduce-scatter in each host (its measured
  // curve), then each GPU all-reduces its S/2 shard with its peer on the other host (2 ring steps
  // of S/4, with both rails through one NIC: 2 x S/4 = 32 MiB through the network per step, a
  // measured point: 20 us + 32 MiB / 25 GB/s), then all-gather in each host.
  Machine m = two_hosts();
  Topology topo(m);
  CostModel cost(topo);
  const int64_t S = int64_t(64) << 20;
  const OpCost& c = cost.price(collective(OpKind::AllReduce, {0, 1, 2, 3}, S), false);
  const double step = kNetAlpha + double(S / 2) / kNetBps;
  const double rs = measured(m, "reduce_scatter", {0, 1}, double(S));
  const double ag = measured(m, "all_gather", {0, 1}, double(S));
  EXPECT_NEAR(rs, measured(m, "reduce_scatter", {2, 3}, double(S)), 1e-12) << "host B has the same curves";
  EXPECT_NEAR(c.seconds, rs + 2 * step + ag, 1e-9 * c.seconds);
  EXPECT_NEAR(c.seconds, hierarchical_allreduce_s(rs, step, 2, ag), 1e-12);
  EXPECT_EQ(c.source, CostSource::Derived) << "a rule over measured parts, not a measurement";
  ASSERT_TRUE(c.inferred.is_object());
  EXPECT_EQ(c.inferred["op"], "all_reduce");
  EXPECT_EQ(c.inferred["hosts"], 2);
  EXPECT_NEAR(c.inferred["sharing"].get<double>(), 2.0, 1e-9);
  EXPECT_NE(c.inferred["rule"].get<std::string>().find("hierarchical"), std::string::npos);

  // Costs more than TP2 inside a host (its own measured curve), and the network dominates it.
  const OpCost& tp2 = cost.price(collective(OpKind::AllReduce, {0, 1}, S), false);
  EXPECT_TRUE(tp2.source == CostSource::Measured || tp2.source == CostSource::Interpolated) << to_string(tp2.source);
  EXPECT_TRUE(tp2.inferred.is_null()) << "a measured group is not inferred";
  EXPECT_GT(c.seconds, tp2.seconds);
  EXPECT_GT(2 * step, 0.5 * c.seconds) << "the network steps dominate";
  // Cheaper than a flat ring through the network would be (1.5 S over the NIC vs S).
  CollectivePrice flat = price_collective(OpKind::AllReduce, {0, 1, 2, 3}, double(S), true, topo, nullptr, {}, false);
  EXPECT_GT(flat.seconds, c.seconds);

  // Provenance lists the inferred group once, whatever sizes were priced.
  cost.price(collective(OpKind::AllReduce, {0, 1, 2, 3}, 8192), false);
  nlohmann::json prov = cost.provenance();
  ASSERT_TRUE(prov.contains("inferred_collectives"));
  ASSERT_EQ(prov["inferred_collectives"].size(), 1u);
  EXPECT_EQ(prov["inferred_collectives"][0]["gpus"], (std::vector<int>{0, 1, 2, 3}));
}

TEST(CrossHostCollective, AMeasuredCurveOfTheWholeGroupWins) {
  Machine m = two_hosts();
  CollectiveCurve whole{"all_reduce", {0, 1, 2, 3}, true, {}};
  whole.points.push_back({int64_t(64) << 20, compute_stats({0.0123, 0.0123})});
  m.measurements->collectives.push_back(whole);
  Topology topo(m);
  CostModel cost(topo);
  const OpCost& c = cost.price(collective(OpKind::AllReduce, {0, 1, 2, 3}, int64_t(64) << 20), false);
  EXPECT_DOUBLE_EQ(c.seconds, 0.0123);
  EXPECT_EQ(c.source, CostSource::Measured);
  EXPECT_TRUE(c.inferred.is_null());
  EXPECT_FALSE(cost.provenance().contains("inferred_collectives"));
}

TEST(CrossHostCollective, AllToAllIsTheSlowerOfItsLocalAndNetworkParts) {
  // EP4 over 2 x 2: each rank sends S/4 to each member. Locally an all-to-all of S/2 per rank in
  // each host (measured curve); across hosts 4 flows of S/4 share each direction of the network:
  // 20 us + S / 25 GB/s. The two parts run at once (one grouped send/recv).
  Machine m = two_hosts();
  Topology topo(m);
  CostModel cost(topo);
  const int64_t S = int64_t(32) << 20;
  const OpCost& c = cost.price(collective(OpKind::AllToAll, {0, 1, 2, 3}, S), false);
  const double local = measured(m, "all_to_all", {0, 1}, double(S / 2));
  const double cross = kNetAlpha + double(S) / kNetBps;
  EXPECT_GT(cross, local) << "the network is the slow part here";
  EXPECT_NEAR(c.seconds, cross_host_alltoall_s(local, cross), 1e-9 * c.seconds);
  EXPECT_NEAR(c.inferred["sharing"].get<double>(), 4.0, 1e-9);
  EXPECT_EQ(c.source, CostSource::Derived);
}

TEST(CrossHostCollective, WithoutANetworkCurveThePriceIsNominal) {
  Machine m = two_hosts(false);
  Topology topo(m);
  CostModel cost(topo);
  const OpCost& c = cost.price(collective(OpKind::AllReduce, {0, 1, 2, 3}, int64_t(1) << 20), false);
  EXPECT_EQ(c.source, CostSource::Nominal) << "the network part rests on the link's nominal figure";
  ASSERT_TRUE(c.inferred.is_object());
  EXPECT_NE(c.inferred.dump().find("nominal network route"), std::string::npos) << c.inferred.dump();
}

TEST(CrossHostCollective, Tp2Pp2BeatsTp4AcrossHostsAndTheOutputSaysWhatWasInferred) {
  // Llama-3.1-8B on the two hosts: TP within a host and PP across (one activation send per
  // micro-batch over the network) against TP4 whose every all-reduce crosses the network.
  Machine m = two_hosts();
  Topology topo(m);
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Workload w = load_workload(resolve_workload_path("chat"));
  w.num_requests = 24;
  auto reqs = w.generate();
  SimulateOptions opt;
  Simulation a = simulate_plan(tp2pp2(), cfg, fig, topo, w, reqs, opt);
  Simulation b = simulate_plan(tp4(), cfg, fig, topo, w, reqs, opt);
  EXPECT_LT(a.metrics.tpot.p50, b.metrics.tpot.p50);
  EXPECT_LT(a.metrics.e2e.p99, b.metrics.e2e.p99);
  EXPECT_FALSE(a.metrics.provenance.contains("inferred_collectives")) << "TP2 groups stay in a host: measured";
  ASSERT_TRUE(b.metrics.provenance.contains("inferred_collectives"));
  EXPECT_EQ(b.metrics.provenance["inferred_collectives"][0]["gpus"], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(cost_source_summary(b.metrics.provenance).find("inferred"), std::string::npos)
      << cost_source_summary(b.metrics.provenance);
  EXPECT_EQ(cost_source_summary(a.metrics.provenance).find("inferred"), std::string::npos);
}
