// Routes, path types, groups and symmetry on the shipped machines and small hand-made ones.
#include "planner/topology/topology.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

Topology shipped(const std::string& name) { return Topology(load_machine(test::shipped(name))); }

TEST(Routes, HgxPeersGoThroughNvswitchAt450PerDirection) {
  Topology t = shipped("hgx-h100x8");
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_EQ(to_string(t.path_type(a, b), t.nvlinks_between(a, b)), "NV18");
      Route r = t.route(a, b, TransferMode::PeerCopyEngine);
      ASSERT_TRUE(r.valid) << r.why_invalid;
      EXPECT_EQ(r.edges.size(), 2u);  // gpu -> nvswitch -> gpu
      EXPECT_DOUBLE_EQ(r.bottleneck_Bps, 450e9);  // 18 x 25 GB/s
      EXPECT_NEAR(r.latency_s, 0.7e-6, 1e-12);   // two nominal NVLink hops
    }
  Route r = t.route(0, 5, TransferMode::PeerCopyEngine);
  EXPECT_EQ(r.describe, "gpu0 -> nvswitch -> gpu5");
}

TEST(Routes, HgxPcieTypesWithoutNvlinkFollowTheSwitchTree) {
  Topology t = shipped("hgx-h100x8");
  EXPECT_EQ(t.pcie_path_type(0, 1), PathType::PIX);   // one switch
  EXPECT_EQ(t.pcie_path_type(0, 2), PathType::NODE);  // two root ports of socket 0
  EXPECT_EQ(t.pcie_path_type(0, 4), PathType::SYS);   // across UPI
}

TEST(Routes, HostStagedGoesThroughSourceSocketMemoryAndCrossesSmp) {
  Topology t = shipped("hgx-h100x8");
  Route r = t.route(0, 6, TransferMode::HostStaged);
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.type, PathType::SYS);
  // gpu0 -> sw0 -> hb0 -> cpu0 [memory x2] -> cpu1 -> hb3 -> sw3 -> gpu6
  EXPECT_EQ(r.describe, "gpu0 -> sw0 -> hb0 -> cpu0 [host memory: write, read] -> cpu1 -> hb3 -> sw3 -> gpu6");
  EXPECT_EQ(r.edges.size(), 9u);
  // Bottleneck: Gen5 x16 (63.0 GB/s) < memory 307.2 / 2 < UPI 96.
  EXPECT_NEAR(r.bottleneck_Bps / 1e9, 63.015, 0.01);
  Route same = t.route(0, 1, TransferMode::RuntimeNoP2P);
  ASSERT_TRUE(same.valid);
  EXPECT_EQ(same.describe, "gpu0 -> sw0 -> hb0 -> cpu0 [host memory: write, read] -> hb0 -> sw0 -> gpu1");
}

TEST(Routes, PcieBoxPeerOnlyWithinASwitch) {
  Topology t = shipped("pcie-gen5x8-2socket");
  Route in = t.route(0, 3, TransferMode::PeerCopyEngine);
  ASSERT_TRUE(in.valid);
  EXPECT_EQ(in.type, PathType::PIX);
  EXPECT_EQ(in.describe, "gpu0 -> sw0 -> gpu3");
  EXPECT_NEAR(in.bottleneck_Bps / 1e9, 63.015, 0.01);
  Route across = t.route(0, 4, TransferMode::PeerCopyEngine);
  EXPECT_FALSE(across.valid);
  EXPECT_EQ(across.type, PathType::SYS);
  EXPECT_NE(across.why_invalid.find("same_switch"), std::string::npos) << across.why_invalid;
  EXPECT_NE(across.why_invalid.find("host_staged"), std::string::npos) << across.why_invalid;
  EXPECT_TRUE(t.route(0, 4, TransferMode::HostStaged).valid);
}

TEST(Routes, ConsumerBoxHasNoPeerRoutesAndSaysWhy) {
  Topology t = shipped("pcie-gen4x4-nop2p");
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      EXPECT_EQ(t.path_type(a, b), PathType::NODE);  // separate root ports of one socket
      Route r = t.route(a, b, TransferMode::PeerKernel);
      EXPECT_FALSE(r.valid);
      EXPECT_NE(r.why_invalid.find("does not support peer access"), std::string::npos) << r.why_invalid;
      Route h = t.route(a, b, TransferMode::HostStaged);
      ASSERT_TRUE(h.valid);
      EXPECT_NEAR(h.bottleneck_Bps / 1e9, 31.51, 0.01);  // Gen4 x16 each way; memory 204.8/2 is wider
    }
}

TEST(Routes, BrokenPairIsNotUsedForPeerTraffic) {
  auto j = test::small_machine();
  nlohmann::json row = {nullptr, true, true, true};
  j["p2p"] = {row, {{{"access", true}, {"functional", false}, {"note", "IOMMU"}}, nullptr, true, true},
              {true, true, nullptr, true}, {true, true, true, nullptr}};
  Topology t(test::parse(j));
  EXPECT_TRUE(t.route(0, 1, TransferMode::PeerCopyEngine).valid);
  Route r = t.route(1, 0, TransferMode::PeerCopyEngine);
  EXPECT_FALSE(r.valid);
  EXPECT_NE(r.why_invalid.find("failed the functional check"), std::string::npos) << r.why_invalid;
}

TEST(Routes, UnknownGpuIsAnInputError) {
  Topology t = shipped("pcie-gen4x4-nop2p");
  EXPECT_THROW(t.route(0, 4, TransferMode::HostStaged), InputError);
  EXPECT_THROW(t.path_type(-1, 0), InputError);
}

TEST(Routes, SmallMachinePathTypesPixPhbAndPxb) {
  auto j = test::small_machine();
  Topology t(test::parse(j));
  EXPECT_EQ(t.path_type(0, 1), PathType::PIX);
  EXPECT_EQ(t.path_type(0, 2), PathType::PHB);  // through hb0, not the CPU
  // Put sw1 under sw0 instead of hb0: now 0 -> 2 crosses two switches without a host bridge.
  j["links"][5] = {{"a", "sw1"}, {"b", "sw0"}, {"kind", "pcie"}, {"gbps", 20}};
  Topology t2(test::parse(j));
  EXPECT_EQ(t2.path_type(0, 2), PathType::PXB);
  EXPECT_EQ(t2.route(0, 2, TransferMode::PeerCopyEngine).describe, "gpu0 -> sw0 -> sw1 -> gpu2");
}

TEST(Routes, DirectNvlinkBeatsPcie) {
  auto j = test::small_machine();
  j["links"].push_back({{"a", "gpu0"}, {"b", "gpu2"}, {"kind", "nvlink"}, {"nvlinks", 4}, {"gbps_per_link", 25}});
  Topology t(test::parse(j));
  EXPECT_EQ(to_string(t.path_type(0, 2), t.nvlinks_between(0, 2)), "NV4");
  Route r = t.route(2, 0, TransferMode::PeerCopyEngine);
  EXPECT_EQ(r.describe, "gpu2 -> gpu0");
  EXPECT_DOUBLE_EQ(r.bottleneck_Bps, 100e9);
  // NVLink does not relay through a third GPU: 1 -> 2 stays on PCIe.
  EXPECT_EQ(t.path_type(1, 2), PathType::PHB);
}

TEST(Groups, IslandsSwitchesSockets) {
  Topology hgx = shipped("hgx-h100x8");
  EXPECT_EQ(hgx.nvlink_islands(), (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(hgx.switch_groups(), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(hgx.socket_groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  Topology pcie = shipped("pcie-gen5x8-2socket");
  EXPECT_EQ(pcie.nvlink_islands().size(), 8u);  // no NVLink: every GPU alone
  EXPECT_EQ(pcie.switch_groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(pcie.socket_numa(5), 1);
}

TEST(Symmetry, NvswitchBoxIsOneClass) {
  auto cls = shipped("hgx-h100x8").symmetry_classes();
  EXPECT_EQ(cls, std::vector<int>(8, 0));
}

TEST(Symmetry, MirroredSocketsAreOneClassUnderAnAutomorphism) {
  // Swapping the two sockets (and their switches) maps GPU 0 onto GPU 4: one class.
  EXPECT_EQ(shipped("pcie-gen5x8-2socket").symmetry_classes(), std::vector<int>(8, 0));
}

TEST(Symmetry, AsymmetricLinkSplitsClasses) {
  auto j = test::small_machine();
  j["links"].push_back({{"a", "gpu0"}, {"b", "gpu1"}, {"kind", "nvlink"}, {"nvlinks", 2}, {"gbps_per_link", 25}});
  // gpu0 and gpu1 share an NVLink pair; gpu2 and gpu3 do not: two classes {0,1} and {2,3}.
  EXPECT_EQ(Topology(test::parse(j)).symmetry_classes(), (std::vector<int>{0, 0, 1, 1}));
  // Make gpu3's uplink slower: gpu2 and gpu3 are no longer interchangeable.
  j["links"][3]["pcie_gen"] = 3;
  EXPECT_EQ(Topology(test::parse(j)).symmetry_classes(), (std::vector<int>{0, 0, 1, 2}));
}

}  // namespace
}  // namespace peerplan
