#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/topology/topology.hpp"
#include "profiler/common/profile_merge.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

// The shipped 2 x H200 profile stands in for one host's discovery (local ids 0, 1).
Machine host(const std::string& name) {
  Machine m = load_machine(find_data_file("models/hardware/h200x2-nvlink.json"));
  m.host = name;
  m.name = name;
  m.measurements.reset();
  return m;
}

RankInfo ri(int rank, const std::string& h, int dev) { return RankInfo{rank, h, dev, 2, dev, 2, ""}; }

Measurements h2d_of(int gpu, double seconds) {
  Measurements ms;
  TransferCurve c{-1, gpu, "h2d", "", {}};
  c.points.push_back({int64_t(1) << 30, compute_stats({seconds, seconds * 1.01})});
  ms.transfers.push_back(c);
  ms.hbm_gbps.assign(size_t(gpu) + 1, 0.0);
  ms.hbm_gbps[size_t(gpu)] = 4000 + gpu;
  ms.extra["launch"]["gpu" + std::to_string(gpu)] = {{"gpu_gap_us", 1.3}};
  return ms;
}

}  // namespace

TEST(RemapGpuIds, RenamesEveryKindOfFigure) {
  Measurements ms = h2d_of(1, 0.02);
  ms.gemms.push_back(GemmTime{1, 1, 2, 3, "bf16", {}});
  remap_gpu_ids(ms, {{1, 5}});
  EXPECT_EQ(ms.transfers[0].src, -1) << "the host end stays the host";
  EXPECT_EQ(ms.transfers[0].dst, 5);
  EXPECT_EQ(ms.gemms[0].gpu, 5);
  ASSERT_EQ(ms.hbm_gbps.size(), 6u);
  EXPECT_EQ(ms.hbm_gbps[5], 4001);
  EXPECT_TRUE(ms.extra["launch"].contains("gpu5"));
  EXPECT_FALSE(ms.extra["launch"].contains("gpu1"));
  Measurements other = h2d_of(0, 0.02);
  EXPECT_THROW(remap_gpu_ids(other, {{1, 5}}), RuntimeError) << "a rank reporting a GPU it does not own";
}

TEST(MergeMpiProfile, RankZerosModelTablesSurviveTheMerge) {
  // profile --mpi runs gemm, attention, grouped_gemm and elementwise on rank 0 (RankZero): its rows
  // reach the merged profile under the rank's global GPU id, every table of them.
  Measurements part;
  part.gemms.push_back(GemmTime{0, 1, 2, 3, "bf16", compute_stats({1e-5})});
  part.grouped_gemms.push_back(GroupedGemmTime{0, 2816, 2048, 60, 4, 1, 4, 4, 1, "bf16", compute_stats({1e-5}), false, {}});
  part.elementwise.push_back(ElementwiseTime{0, "moe_route", 1, 60, compute_stats({4e-6})});
  // Through the JSON a rank sends, then as profile_mpi.cpp merges it.
  Measurements back = rank_result_from_json(rank_result_to_json(part), "rank 0");
  remap_gpu_ids(back, {{0, 3}});
  Measurements all;
  append_measurements(all, std::move(back));
  ASSERT_EQ(all.gemms.size(), 1u);
  ASSERT_EQ(all.grouped_gemms.size(), 1u);
  ASSERT_EQ(all.elementwise.size(), 1u);
  EXPECT_EQ(all.grouped_gemms[0].gpu, 3);
  EXPECT_EQ(all.elementwise[0].gpu, 3);
  EXPECT_EQ(all.elementwise[0].kind, "moe_route");
  EXPECT_NEAR(all.elementwise[0].time.median, 4e-6, 1e-12);
}

TEST(MergeMpiProfile, ExpertGemmsAndExpertRowsSurviveTheMergeUnderTheGlobalGpu) {
  // grouped_gemm runs on rank 0 (RankZero) and times its one-expert cuBLAS rows with it: both tables
  // reach the merged profile through the rank's JSON, renamed to the rank's global GPU.
  Measurements part;
  GroupedGemmTime g{0, 28672, 4096, 8, 2, 512, 1024, 8, 140, "int8", compute_stats({3e-4}), true, {}};
  g.expert_rows = {120, 130, 140, 125, 127, 128, 124, 130};
  part.grouped_gemms.push_back(g);
  part.expert_gemms.push_back(ExpertGemmTime{0, 28672, 4096, 128, "int8", compute_stats({5e-5})});
  part.expert_gemms.push_back(ExpertGemmTime{0, 28672, 4096, 160, "int8", compute_stats({6e-5})});
  Measurements back = rank_result_from_json(rank_result_to_json(part), "rank 0");
  remap_gpu_ids(back, {{0, 3}});
  Measurements all;
  append_measurements(all, std::move(back));
  ASSERT_EQ(all.expert_gemms.size(), 2u);
  for (const ExpertGemmTime& e : all.expert_gemms) EXPECT_EQ(e.gpu, 3) << e.rows;
  EXPECT_EQ(all.expert_gemms[1].rows, 160);
  EXPECT_EQ(all.expert_gemms[1].dtype, "int8");
  EXPECT_NEAR(all.expert_gemms[1].time.median, 6e-5, 1e-12);
  ASSERT_EQ(all.grouped_gemms.size(), 1u);
  EXPECT_EQ(all.grouped_gemms[0].gpu, 3);
  EXPECT_EQ(all.grouped_gemms[0].expert_rows, g.expert_rows);
  Measurements stray;
  stray.expert_gemms.push_back(ExpertGemmTime{1, 4096, 14336, 32, "bf16", compute_stats({2e-5})});
  EXPECT_THROW(remap_gpu_ids(stray, {{0, 3}}), RuntimeError) << "a rank's expert row on a GPU it does not own";
}

TEST(MergeMpiProfile, PeerAllReduceCurvesSurviveTheMerge) {
  // Found 2026-12-04 on the 2 x H200 host: `profile --mpi --only peer_allreduce` timed the one-shot and
  // two-shot kernels across processes, and the merged profile had no peer_allreduce section.
  Measurements part;
  PeerAllReduceCurve c{"one_shot", {0, 1}, {}};
  c.points.push_back({4096, compute_stats({6e-6, 6.1e-6})});
  part.peer_allreduce.push_back(c);
  Measurements back = rank_result_from_json(rank_result_to_json(part), "rank 0");
  remap_gpu_ids(back, {{0, 2}, {1, 3}});
  Measurements all;
  append_measurements(all, std::move(back));
  ASSERT_EQ(all.peer_allreduce.size(), 1u);
  EXPECT_EQ(all.peer_allreduce[0].algo, "one_shot");
  EXPECT_EQ(all.peer_allreduce[0].gpus, (std::vector<int>{2, 3}));
  ASSERT_EQ(all.peer_allreduce[0].points.size(), 1u);
  EXPECT_NEAR(all.peer_allreduce[0].points[0].time.median, 6.05e-6, 1e-9);
}

TEST(MergeMpiProfile, OneHostReadsLikeASingleProcessProfile) {
  Machine h = host("hostA");
  MergeInput in;
  in.layout = make_rank_layout({ri(0, "hostA", 0), ri(1, "hostA", 1)});
  in.host_machines = {h};
  in.rank_results = {h2d_of(0, 0.02), h2d_of(1, 0.021)};
  Machine m = merge_mpi_profile(in);
  ASSERT_EQ(m.gpu_count(), 2);
  EXPECT_EQ(m.gpus[1].uuid, h.gpus[1].uuid);
  EXPECT_EQ(m.nodes.size(), h.nodes.size()) << "no prefixes, no NIC added for one host";
  EXPECT_EQ(m.links.size(), h.links.size());
  EXPECT_TRUE(m.p2p[0][1].usable()) << "same-host peer capability comes from discovery";
  ASSERT_TRUE(m.measured());
  EXPECT_EQ(m.measurements->transfers.size(), 2u);
  EXPECT_EQ(m.measurements->hbm_gbps, (std::vector<double>{4000, 4001}));
  EXPECT_EQ(m.meta["mpi"]["ranks"].size(), 2u);
  EXPECT_EQ(m.meta["mpi"]["hosts"][0]["host"], "hostA");
  // Round trip through the schema: the merged profile is an ordinary machine file.
  Machine back = parse_machine_json(machine_to_json(m).dump(), "merged.json");
  EXPECT_EQ(back.gpu_count(), 2);
}

TEST(MergeMpiProfile, TwoHostsGetSubtreesAndANetworkLinkPricedByMeasurement) {
  MergeInput in;
  in.layout = make_rank_layout({ri(0, "hostA", 0), ri(1, "hostA", 1), ri(2, "hostB", 0), ri(3, "hostB", 1)});
  in.host_machines = {host("hostA"), host("hostB")};
  for (int r = 0; r < 4; ++r) in.rank_results.push_back(h2d_of(r, 0.02));
  // Rank 0 measured hostA -> hostB over the network: 1 GiB in 40 ms = 26.8 GB/s.
  TransferCurve net{0, 2, "net_nccl", "", {}};
  net.points.push_back({int64_t(1) << 30, compute_stats({0.04, 0.04})});
  in.rank_results[0].transfers.push_back(net);
  Machine m = merge_mpi_profile(in);
  ASSERT_EQ(m.gpu_count(), 4);
  const Machine h = host("hostB");
  EXPECT_EQ(m.gpus[2].uuid, h.gpus[0].uuid) << "rank 2 is hostB's GPU 0";
  EXPECT_FALSE(m.p2p[0][2].usable()) << "no peer access across hosts";
  EXPECT_TRUE(m.p2p[2][3].usable());
  int nics = 0, net_links = 0;
  double net_gbps = 0;
  for (const auto& n : m.nodes) {
    nics += n.kind == NodeKind::Nic;
    EXPECT_TRUE(n.id.rfind("h0.", 0) == 0 || n.id.rfind("h1.", 0) == 0) << n.id << " lacks its host prefix";
  }
  for (const auto& l : m.links)
    if (l.kind == LinkKind::Network) { ++net_links; net_gbps = l.gbps; }
  EXPECT_EQ(nics, 2) << "one (synthetic) NIC per host";
  EXPECT_EQ(net_links, 1);
  EXPECT_NEAR(net_gbps, double(int64_t(1) << 30) / 0.04 / 1e9, 0.01);
  Topology topo(m);
  EXPECT_EQ(topo.host_of(1), 0);
  EXPECT_EQ(topo.host_of(2), 1);
  // Within a host: the usual routes. Across hosts: GPU -> PCIe -> NIC -> network -> NIC -> GPU.
  EXPECT_FALSE(topo.route(0, 1, TransferMode::HostStaged).network);
  Route r = topo.route(1, 3, TransferMode::HostStaged);
  ASSERT_TRUE(r.valid) << r.why_invalid;
  EXPECT_TRUE(r.network);
  EXPECT_NE(r.describe.find("h0.nic"), std::string::npos) << r.describe;
  EXPECT_NE(r.describe.find("h1.nic"), std::string::npos) << r.describe;
  EXPECT_NEAR(r.bottleneck_Bps, net_gbps * 1e9, 1e3) << "the network link is the bottleneck";
  EXPECT_FALSE(topo.route(1, 3, TransferMode::PeerCopyEngine).valid) << "no peer access across hosts";
}

TEST(MergeMpiProfile, RefusesInputsThatDisagree) {
  MergeInput in;
  in.layout = make_rank_layout({ri(0, "hostA", 0), ri(1, "hostA", 1)});
  in.host_machines = {host("hostA")};
  in.rank_results = {h2d_of(0, 0.02)};
  EXPECT_THROW(merge_mpi_profile(in), RuntimeError) << "results of 1 rank for 2";
  in.rank_results.push_back(h2d_of(1, 0.02));
  in.host_machines[0].gpus.pop_back();
  EXPECT_THROW(merge_mpi_profile(in), RuntimeError) << "rank 1's GPU missing from its host's discovery";
}

TEST(MergeMpiProfile, SharedGpuSmokeModeGivesEveryRankItsGpusLinks) {
  // PEERPLAN_MPI_SHARE_GPU: two ranks on GPU 0; each rank's vertex must keep GPU 0's links, or the
  // merged machine fails validation (a GPU with no PCIe path to a CPU).
  MergeInput in;
  in.layout = make_rank_layout({RankInfo{0, "hostA", 0, 2, 0, 1, ""}, RankInfo{1, "hostA", 1, 2, 0, 1, ""}}, false, true);
  in.host_machines = {host("hostA")};
  in.rank_results = {h2d_of(0, 0.02), h2d_of(1, 0.02)};
  Machine m = merge_mpi_profile(in);
  int links_of[2] = {0, 0};
  for (const auto& l : m.links)
    for (int g = 0; g < 2; ++g) links_of[g] += l.a == "gpu" + std::to_string(g) || l.b == "gpu" + std::to_string(g);
  EXPECT_GT(links_of[0], 0);
  EXPECT_EQ(links_of[0], links_of[1]);
  EXPECT_TRUE(m.p2p[0][1].usable()) << "same GPU: the IPC path is exercised";
}

TEST(RankResultJson, HbmOfANonZeroGpuSurvivesTheTrip) {
  // Found on the GPU: rank 1's hbm_gbps is {0, x} after renaming; the schema refuses the 0.
  Measurements ms = h2d_of(1, 0.02);
  Measurements back = rank_result_from_json(rank_result_to_json(ms), "rank 1");
  ASSERT_EQ(back.hbm_gbps.size(), 2u);
  EXPECT_EQ(back.hbm_gbps[0], 0.0);
  EXPECT_EQ(back.hbm_gbps[1], 4001.0);
  EXPECT_EQ(back.transfers.size(), 1u);
  EXPECT_THROW(rank_result_from_json(R"({"measurements":{},"hbm_gbps_by_gpu":{"x":1}})", "rank 2"), InputError);
}
