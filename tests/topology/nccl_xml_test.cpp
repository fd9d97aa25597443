// NCCL topology XML import (the NCCL_TOPO_DUMP_FILE format), on files written in that format.
#include <fstream>

#include "planner/core/files.hpp"
#include "planner/topology/topology.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

std::string pcie_xml() { return read_text_file(test::data("nccl-pcie-2socket-8gpu.xml")); }

void expect_xml_rejected(const std::string& text, const std::string& field, const std::string& words) {
  try {
    parse_nccl_xml(text, "bad-topo.xml");
    ADD_FAILURE() << "expected an InputError for " << field;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bad-topo.xml");
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST(NcclXml, TwoSocketPcieHostRecognisedByContent) {
  Machine m = load_machine(test::data("nccl-pcie-2socket-8gpu.xml"));  // .xml, but detected by the leading '<'
  ASSERT_EQ(m.gpu_count(), 8);
  EXPECT_EQ(m.gpus[0].compute_capability, "8.0");
  EXPECT_EQ(m.gpus[5].pci, "0000:8d:00.0");
  EXPECT_EQ(m.gpus[5].numa, 1);
  EXPECT_EQ(m.p2p_policy, "same_switch");
  Topology t(m);
  // Socket 0: root port -> top switch -> {sw(0,1), sw(2,3)}. Socket 1: two root ports, one switch each.
  EXPECT_EQ(t.path_type(0, 1), PathType::PIX);
  EXPECT_EQ(t.path_type(0, 2), PathType::PXB);
  EXPECT_EQ(t.path_type(4, 5), PathType::PIX);
  EXPECT_EQ(t.path_type(4, 6), PathType::NODE);
  EXPECT_EQ(t.path_type(0, 7), PathType::SYS);
  EXPECT_TRUE(t.p2p_usable(0, 2));   // PXB: within NCCL's default P2P level
  EXPECT_FALSE(t.p2p_usable(4, 6));  // NODE: beyond it
  EXPECT_EQ(t.socket_groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(t.switch_groups(), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  Route r = t.route(0, 2, TransferMode::PeerCopyEngine);
  EXPECT_EQ(r.describe, "gpu0 -> sw1 -> sw0 -> sw2 -> gpu2");
  EXPECT_NEAR(r.bottleneck_Bps / 1e9, 31.51, 0.01);  // Gen4 x16 ("16.0 GT/s PCIe")
  // The NIC is kept; the NVMe drives and the switch holding only a drive are not.
  int nics = 0, switches = 0;
  for (const auto& n : m.nodes) {
    nics += n.kind == NodeKind::Nic;
    switches += n.kind == NodeKind::PcieSwitch;
  }
  EXPECT_EQ(nics, 1);
  EXPECT_EQ(switches, 5);
}

TEST(NcclXml, NvswitchHostBecomesOneFabricVertexWithNv18) {
  Machine m = load_machine(test::data("nccl-nvswitch-8gpu.xml"));
  Topology t(m);
  ASSERT_EQ(t.gpu_count(), 8);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        EXPECT_EQ(to_string(t.path_type(a, b), t.nvlinks_between(a, b)), "NV18");
      }
  EXPECT_DOUBLE_EQ(t.route(3, 6, TransferMode::PeerCopyEngine).bottleneck_Bps, 450e9);  // 18 x 25 (sm_90)
  EXPECT_EQ(t.symmetry_classes(), std::vector<int>(8, 0));
  EXPECT_EQ(t.nvlink_islands().size(), 1u);
}

TEST(NcclXml, DirectNvlinkPairAcrossSockets) {
  Topology t(load_machine(test::data("nccl-nvlink-pair.xml")));
  EXPECT_EQ(to_string(t.path_type(0, 1), t.nvlinks_between(0, 1)), "NV18");
  EXPECT_EQ(t.pcie_path_type(0, 1), PathType::SYS);
  EXPECT_EQ(t.route(0, 1, TransferMode::PeerCopyEngine).describe, "gpu0 -> gpu1");
  // Both ends list the same 18 links: one link of 18, not 36.
  EXPECT_DOUBLE_EQ(t.route(0, 1, TransferMode::PeerCopyEngine).bottleneck_Bps, 450e9);
}

TEST(NcclXml, KnownPciDeviceIdsGiveNameMemoryAndSms) {
  Machine m = load_machine(test::data("nccl-pcie-2socket-8gpu.xml"));  // device 0x20b5
  EXPECT_EQ(m.gpus[0].name, "NVIDIA A100 80GB PCIe");
  EXPECT_EQ(m.gpus[0].memory_bytes, int64_t(81920) << 20);
  EXPECT_EQ(m.gpus[0].sm_count, 108);
  Machine h = load_machine(test::data("nccl-nvswitch-8gpu.xml"));  // device 0x2330
  EXPECT_EQ(h.gpus[7].name, "NVIDIA H100 80GB HBM3");
  // A profile-less XML machine round-trips through JSON when the GPUs are known.
  nlohmann::json j = machine_to_json(h);
  EXPECT_EQ(machine_to_json(parse_machine_json(j.dump(), "h.json")), j);
}

TEST(NcclXml, UnknownDeviceIdLeavesMemoryUnknownAndJsonAsksForIt) {
  std::string x = pcie_xml();
  for (size_t p = x.find("0x20b5"); p != std::string::npos; p = x.find("0x20b5", p)) x.replace(p, 6, "0x9999");
  Machine m = parse_nccl_xml(x, "unknown-gpus.xml");
  EXPECT_EQ(m.gpus[0].memory_bytes, 0);
  EXPECT_EQ(m.gpus[0].name, "GPU sm_80 (from NCCL XML)");
  nlohmann::json j = machine_to_json(m);
  EXPECT_TRUE(j["gpus"][0]["memory_bytes"].is_null());
  try {
    parse_machine_json(j.dump(), "converted.json");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "gpus/0/memory_bytes");  // the user is told exactly what to fill in
  }
  for (auto& g : j["gpus"]) g["memory_bytes"] = int64_t(40) << 30;
  Machine back = parse_machine_json(j.dump(), "converted.json");
  EXPECT_EQ(machine_to_json(back), j);
}

TEST(NcclXml, RealDumpFromA2xH200VirtualMachine) {
  // Written by NCCL 2.28.3 (NCCL_TOPO_DUMP_FILE, ncclCommInitAll on both GPUs) on the project's
  // 2 x H200 host, driver 580.159.04, 2026-11-30. A VM: numaid="-1", link_width="0", a virtio NIC
  // directly under the cpu, and NVLinks to an NVSwitch fabric (target fffffff:ff:ff.0).
  // nvidia-smi topo -m on that host prints NV18 between the two GPUs.
  Machine m = load_machine(test::data("h200x2-vm-nccl-2.28.3.xml"));
  ASSERT_EQ(m.gpu_count(), 2);
  EXPECT_EQ(m.gpus[1].name, "NVIDIA H200");
  EXPECT_EQ(m.gpus[1].memory_bytes, int64_t(143771) << 20);  // nvidia-smi: 143771 MiB
  EXPECT_EQ(m.gpus[0].numa, 0);
  ASSERT_TRUE(m.meta["assumptions"].is_array());
  EXPECT_EQ(m.meta["assumptions"].size(), 3u);  // numaid -1, and width 0 on each GPU
  Topology t(m);
  EXPECT_EQ(to_string(t.path_type(0, 1), t.nvlinks_between(0, 1)), "NV18");
  Route r = t.route(0, 1, TransferMode::PeerCopyEngine);
  EXPECT_EQ(r.describe, "gpu0 -> nvswitch -> gpu1");
  EXPECT_DOUBLE_EQ(r.bottleneck_Bps, 450e9);
  EXPECT_TRUE(t.p2p_usable(0, 1));
  // Each GPU on its own root port of one socket; width 0 taken as x16 at 32 GT/s.
  EXPECT_EQ(t.pcie_path_type(0, 1), PathType::NODE);
  EXPECT_NEAR(t.route(0, 1, TransferMode::HostStaged).bottleneck_Bps / 1e9, 63.015, 0.01);
}

TEST(NcclXmlBadInput, TruncatedAndMalformed) {
  try {
    load_machine(test::data("nccl-truncated.xml.broken"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nccl-truncated.xml.broken"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("malformed XML"), std::string::npos) << e.what();
  }
  expect_xml_rejected("<system><cpu numaid=\"0\"></system>", "", "malformed XML");
  expect_xml_rejected("<machine/>", "system", "<system>");
  expect_xml_rejected("<system version=\"1\"></system>", "system/cpu", "at least one <cpu>");
  // 100 nested bridges: refused by depth, not by the stack.
  std::string deep = "<system><cpu numaid=\"0\">";
  for (int i = 0; i < 100; ++i) deep += "<pci busid=\"0000:00:00.0\" class=\"0x060400\" link_speed=\"8 GT/s\" link_width=\"16\">";
  for (int i = 0; i < 100; ++i) deep += "</pci>";
  deep += "</cpu></system>";
  try {
    parse_nccl_xml(deep, "deep.xml");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 32"), std::string::npos) << e.what();
  }
}

TEST(NcclXmlBadInput, MissingAndWrongAttributesNameTheElement) {
  std::string x = pcie_xml();
  expect_xml_rejected(replace(x, "<cpu numaid=\"1\"", "<cpu numaid=\"one\""), "system/cpu[1]@numaid",
                      "expected an integer");
  expect_xml_rejected(replace(x, "<gpu dev=\"5\" sm=\"80\"", "<gpu sm=\"80\""), "system/cpu[1]/pci[0]/pci[1]/gpu@dev",
                      "missing");
  expect_xml_rejected(replace(x, "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n        <gpu dev=\"4\"",
                              "link_speed=\"fast\" link_width=\"16\">\n        <gpu dev=\"4\""),
                      "system/cpu[1]/pci[0]/pci[0]@link_speed", "\"16.0 GT/s PCIe\"");
  expect_xml_rejected(replace(x, "link_width=\"16\">\n        <gpu dev=\"4\"", "link_width=\"48\">\n        <gpu dev=\"4\""),
                      "system/cpu[1]/pci[0]/pci[0]@link_width", "1..32");
  // Duplicate GPU dev.
  expect_xml_rejected(replace(x, "<gpu dev=\"5\"", "<gpu dev=\"4\""), "system/cpu[1]/pci[0]/pci[1]/gpu@dev",
                      "without gaps or duplicates");
  expect_xml_rejected(replace(x, "<cpu numaid=\"1\"", "<cpu numaid=\"0\""), "system/cpu[1]@numaid", "one per NUMA node");
}

// What NCCL skips, peerplan skips too, and says so (meta.warnings, printed by `topo`).
bool has_note(const Machine& m, const char* key, const std::string& words) {
  if (!m.meta.contains(key)) return false;
  for (const auto& a : m.meta[key])
    if (a.get<std::string>().find(words) != std::string::npos) return true;
  return false;
}

TEST(NcclXml, SelfTargetedAndDanglingNvlinksAreIgnoredWithAWarning) {
  std::string x = read_text_file(test::data("nccl-nvlink-pair.xml"));
  // GPU0's NVLink names GPU0's own bus id (a file NCCL accepts; seen in hand-edited cloud files).
  Machine self = parse_nccl_xml(replace(x, "target=\"0000:c1:00.0\"", "target=\"0000:41:00.0\""), "self.xml");
  EXPECT_TRUE(has_note(self, "warnings", "to itself")) << self.meta.dump();
  Topology ts(self);
  // GPU1 still lists its link to GPU0: one NV18 link, from that end.
  EXPECT_EQ(to_string(ts.path_type(0, 1), ts.nvlinks_between(0, 1)), "NV18");
  // Both ends pointing at themselves: no NVLink at all, PCIe across the sockets.
  std::string both = replace(replace(x, "target=\"0000:c1:00.0\"", "target=\"0000:41:00.0\""),
                             "target=\"0000:41:00.0\" count=\"18\" tclass=\"0x030200\"/>\n      </gpu>\n    </pci>\n  </cpu>\n</system>",
                             "target=\"0000:c1:00.0\" count=\"18\" tclass=\"0x030200\"/>\n      </gpu>\n    </pci>\n  </cpu>\n</system>");
  Topology tb(parse_nccl_xml(both, "both.xml"));
  EXPECT_EQ(tb.path_type(0, 1), PathType::SYS);
  // A target that is no GPU in the file (NCCL finds no node and adds no link).
  Machine dangling = parse_nccl_xml(replace(x, "target=\"0000:c1:00.0\"", "target=\"0000:c9:00.0\""), "dangling.xml");
  EXPECT_TRUE(has_note(dangling, "warnings", "0000:c9:00.0 is not a GPU in this file")) << dangling.meta.dump();
  // The CLI prints the warnings on stderr whatever the format.
  EXPECT_FALSE(has_note(load_machine(test::data("nccl-nvlink-pair.xml")), "warnings", ""));
}

TEST(NcclXml, TargetClassesAsNcclReadsThem) {
  std::string x = read_text_file(test::data("nccl-nvlink-pair.xml"));
  // Neither a GPU (0x03) nor a CPU (0x068001): NCCL takes it as the NVSwitch fabric.
  Machine m = parse_nccl_xml(replace(x, "count=\"18\" tclass=\"0x030200\"/>\n      </gpu>\n    </pci>\n  </cpu>\n  <cpu",
                                     "count=\"18\" tclass=\"0x123456\"/>\n      </gpu>\n    </pci>\n  </cpu>\n  <cpu"),
                             "odd-class.xml");
  EXPECT_TRUE(has_note(m, "warnings", "taken as the NVSwitch fabric")) << m.meta.dump();
  expect_xml_rejected(replace(x, "count=\"18\" tclass=\"0x030200\"/>\n      </gpu>\n    </pci>\n  </cpu>\n  <cpu",
                              "count=\"18\" tclass=\"0x068001\"/>\n      </gpu>\n    </pci>\n  </cpu>\n  <cpu"),
                      "system/cpu[0]/pci[0]/gpu/nvlink[0]@tclass", "CPU");
}

TEST(NcclXml, AzureNdH100v5SkeletonGpusAsPciDevicesOnly) {
  // NCCL_TOPO_FILE skeleton in the format Azure HPC images ship: GPUs and HCAs are bare PCI
  // devices (class 0x030200 / 0x020700), no <gpu>, no <nic>, no vendor or device id.
  Machine m = load_machine(test::data("azure-ndv5-skeleton.xml"));
  ASSERT_EQ(m.gpu_count(), 8);
  // Numbered by bus id, as nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID number them.
  const char* bus[] = {"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0008:00:00.0",
                       "0009:00:00.0", "000a:00:00.0", "000b:00:00.0", "000c:00:00.0"};
  for (int g = 0; g < 8; ++g) EXPECT_EQ(m.gpus[size_t(g)].pci, bus[g]);
  EXPECT_EQ(m.gpus[3].numa, 0);
  EXPECT_EQ(m.gpus[4].numa, 1);
  EXPECT_EQ(m.gpus[0].memory_bytes, 0);  // the model is not in the file
  EXPECT_TRUE(has_note(m, "assumptions", "NCCL_TOPO_FILE skeleton")) << m.meta.dump();
  int nics = 0;
  for (const auto& n : m.nodes) nics += n.kind == NodeKind::Nic;
  EXPECT_EQ(nics, 8);
  Topology t(m);
  EXPECT_EQ(t.path_type(0, 1), PathType::NODE);  // each GPU behind its own virtual bridge
  EXPECT_EQ(t.path_type(0, 4), PathType::SYS);
  EXPECT_FALSE(t.p2p_usable(0, 1));               // NCCL's default level stops at PXB
  EXPECT_NEAR(t.route(0, 1, TransferMode::HostStaged).bottleneck_Bps / 1e9, 63.015, 0.01);  // Gen5 x16
  // Skeleton and full GPUs mix: the <gpu> keeps its dev, the bare ones fill the gaps by bus id.
  std::string x = read_text_file(test::data("azure-ndv5-skeleton.xml"));
  Machine mixed = parse_nccl_xml(
      replace(x, "<pci busid=\"000c:00:00.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"/>",
              "<pci busid=\"000c:00:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" link_speed=\"32.0 GT/s PCIe\" "
              "link_width=\"16\"><gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"/></pci>"),
      "mixed.xml");
  EXPECT_EQ(mixed.gpus[0].pci, "000c:00:00.0");
  EXPECT_EQ(mixed.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(mixed.gpus[1].pci, "0001:00:00.0");
}

TEST(NcclXml, AwsP5StyleDumpWithHostHashEfaNicsAndHiddenNvswitch) {
  Machine m = load_machine(test::data("aws-p5-style-dump.xml"));
  ASSERT_EQ(m.gpu_count(), 8);
  EXPECT_EQ(m.gpus[7].name, "NVIDIA H100 80GB HBM3");
  int nics = 0;
  for (const auto& n : m.nodes) nics += n.kind == NodeKind::Nic;
  EXPECT_EQ(nics, 32);  // 4 EFA per GPU; the virtio NIC directly under the cpu has no PCIe position
  Topology t(m);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        EXPECT_EQ(to_string(t.path_type(a, b), t.nvlinks_between(a, b)), "NV18");
      }
  EXPECT_EQ(t.route(0, 5, TransferMode::PeerCopyEngine).describe, "gpu0 -> nvswitch -> gpu5");
  EXPECT_EQ(t.pcie_path_type(0, 1), PathType::NODE);
  EXPECT_EQ(t.pcie_path_type(3, 4), PathType::SYS);
  EXPECT_FALSE(m.meta.contains("warnings"));
}

TEST(NcclXml, EverySystemVersionNcclWrites) {
  // NCCL 2.7 introduced the XML and every release since writes and reads version="1"
  // (NCCL_TOPO_XML_VERSION); NCCL refuses any other number.
  std::string x = read_text_file(test::data("nccl-nvlink-pair.xml"));
  EXPECT_EQ(parse_nccl_xml(x, "v1.xml").meta["system_version"], "1");
  Machine none = parse_nccl_xml(replace(x, "<system version=\"1\">", "<system>"), "none.xml");
  EXPECT_TRUE(has_note(none, "assumptions", "read as version 1"));
  expect_xml_rejected(replace(x, "<system version=\"1\">", "<system version=\"2\">"), "system@version",
                      "every NCCL since 2.7 uses version 1");
  // 2.7-era attribute spellings: "8 GT/s" without "PCIe", no host_hash; 2.19+ additions
  // (host_hash, <pcilink>, <c2c>, net latency) are read past.
  std::string old = replace(replace(x, "32.0 GT/s PCIe", "8 GT/s"), "32.0 GT/s PCIe", "8 GT/s");
  Topology to(parse_nccl_xml(old, "nccl-2.7.xml"));
  EXPECT_NEAR(to.route(0, 1, TransferMode::HostStaged).bottleneck_Bps / 1e9, 15.75, 0.01);  // Gen3 x16
  std::string newer = replace(replace(x, "<cpu numaid=\"0\"", "<cpu host_hash=\"0x1\" numaid=\"0\""),
                              "<gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\">",
                              "<pcilink target=\"0000:42:00.0\"/><gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"><c2c bw=\"0\" count=\"0\"/>");
  EXPECT_EQ(parse_nccl_xml(newer, "nccl-2.2x.xml").gpu_count(), 2);
}

TEST(NcclXml, WhatSysWritesOnVirtualMachines) {
  std::string x = read_text_file(test::data("nccl-nvlink-pair.xml"));
  // "Unknown" speed and an empty width: NCCL reads Gen3 and x16.
  std::string v = replace(x, "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n      <gpu dev=\"0\"",
                          "link_speed=\"Unknown\" link_width=\"\">\n      <gpu dev=\"0\"");
  Machine m = parse_nccl_xml(v, "vm.xml");
  EXPECT_TRUE(has_note(m, "assumptions", "taken as 8 GT/s (Gen3)"));
  EXPECT_TRUE(has_note(m, "assumptions", "taken as x16"));
  // A bridge without a class attribute (files written for NCCL_TOPO_FILE leave it to /sys).
  std::string bare = "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:10:00.0\" link_speed=\"16.0 GT/s PCIe\" "
                     "link_width=\"16\"><pci busid=\"0000:11:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
                     "link_width=\"16\"/><pci busid=\"0000:12:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
                     "link_width=\"16\"/></pci></cpu></system>";
  Topology tb(parse_nccl_xml(bare, "bare.xml"));
  EXPECT_EQ(tb.path_type(0, 1), PathType::PIX);
}

TEST(NcclXmlBadInput, MoreThanOneHostIsRefused) {
  std::string x = read_text_file(test::data("nccl-nvlink-pair.xml"));
  std::string two = replace(replace(x, "<cpu numaid=\"0\"", "<cpu host_hash=\"0xaaa\" numaid=\"0\""), "<cpu numaid=\"1\"",
                            "<cpu host_hash=\"0xbbb\" numaid=\"1\"");
  expect_xml_rejected(two, "system/cpu[1]@host_hash", "more than one host");
}

TEST(NcclXmlBadInput, NoGpuAtAll) {
  expect_xml_rejected("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x010802\" "
                      "link_speed=\"16.0 GT/s PCIe\" link_width=\"4\"/></cpu></system>",
                      "system", "PCI devices of class 0x03xxxx");
}

}  // namespace
}  // namespace peerplan
