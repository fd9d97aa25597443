// `nvidia-smi topo -m` text as users paste it -> a nominal machine, on fixtures in the exact format
// nvidia-smi prints (tab-separated, " X " on the diagonal, legends after the matrix).
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <regex>

#include "planner/core/files.hpp"
#include "planner/topology/gpu_catalog.hpp"
#include "planner/topology/nvidia_smi_topo.hpp"
#include "planner/topology/render.hpp"
#include "planner/topology/topology.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

std::string fixture(const std::string& name) { return test::data("nvidia-smi/" + name); }

Machine read(const std::string& name, const std::string& gpu = "", const std::string& p2p = "same_switch") {
  return parse_nvidia_smi_topo(read_text_file(fixture(name)), fixture(name), NvidiaSmiTopoOptions{gpu, p2p});
}

std::string pt(const Topology& t, int a, int b) { return to_string(t.path_type(a, b), t.nvlinks_between(a, b)); }

bool has_assumption(const Machine& m, const std::string& words) {
  for (const auto& a : m.meta["assumptions"])
    if (a.get<std::string>().find(words) != std::string::npos) return true;
  return false;
}

void expect_rejected(const std::string& text, const std::string& field, const std::string& words) {
  try {
    parse_nvidia_smi_topo(text, "pasted.txt");
    ADD_FAILURE() << "expected an InputError for " << field;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "pasted.txt");
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(NvidiaSmiTopo, DgxH100EightGpusNv18WithNicsAndLegends) {
  Machine m = read("dgx-h100-8gpu.txt", "h100-sxm");
  ASSERT_EQ(m.gpu_count(), 8);
  EXPECT_EQ(m.gpus[5].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(m.gpus[5].memory_bytes, int64_t(81559) << 20);
  EXPECT_DOUBLE_EQ(m.gpus[5].peak_bf16_tflops, 989.4);
  Topology t(m);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        EXPECT_EQ(pt(t, a, b), "NV18");
      }
  // 7 peers x NV18 is more links than a GPU has: one NVSwitch fabric, 18 x 25 GB/s per GPU.
  Route r = t.route(0, 5, TransferMode::PeerCopyEngine);
  EXPECT_EQ(r.describe, "gpu0 -> nvswitch -> gpu5");
  EXPECT_DOUBLE_EQ(r.bottleneck_Bps, 450e9);
  // NUMA affinity places the sockets; the NV-hidden PCIe paths are separate root ports.
  EXPECT_EQ(t.socket_groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(t.pcie_path_type(0, 1), PathType::NODE);
  EXPECT_EQ(t.pcie_path_type(3, 4), PathType::SYS);
  EXPECT_NEAR(t.route(0, 1, TransferMode::HostStaged).bottleneck_Bps / 1e9, 63.015, 0.01);  // Gen5 x16
  ASSERT_EQ(m.meta["nics"].size(), 10u);
  EXPECT_EQ(m.meta["nics"][0], "NIC0 (mlx5_0)");
  EXPECT_TRUE(has_assumption(m, "hide their PCIe path"));
  EXPECT_EQ(m.meta["source"], "nvidia_smi_topo");
}

TEST(NvidiaSmiTopo, WithoutAGpuModelTheFiguresStayUnknownAndSaySo) {
  Machine m = read("dgx-h100-8gpu.txt");
  EXPECT_EQ(m.gpus[0].memory_bytes, 0);
  EXPECT_TRUE(has_assumption(m, "give --gpu")) << m.meta.dump();
  EXPECT_TRUE(has_assumption(m, "NVLink taken as 25 GB/s per link"));
  // The JSON written for editing asks for the memory by name when loaded back.
  try {
    parse_machine_json(machine_to_json(m).dump(), "edit-me.json");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "gpus/0/memory_bytes");
  }
}

TEST(NvidiaSmiTopo, PastedWithSpacesAndInsideAMarkdownFenceReadsTheSame) {
  // Issues show the matrix with tabs turned into runs of spaces, the header's leading tab lost,
  // inside ``` fences and after a prompt line.
  std::string text = read_text_file(fixture("dgx-h100-8gpu.txt"));
  std::string spaced = std::regex_replace(text, std::regex("\t"), "    ");
  spaced = "$ nvidia-smi topo -m\n```\n" + spaced.substr(spaced.find("GPU0")) + "```\n";
  Machine a = read("dgx-h100-8gpu.txt", "h100-sxm");
  Machine b = parse_nvidia_smi_topo(spaced, fixture("dgx-h100-8gpu.txt"), NvidiaSmiTopoOptions{"h100-sxm", "same_switch"});
  EXPECT_EQ(machine_to_json(a), machine_to_json(b));
}

TEST(NvidiaSmiTopo, FourPcieGpusPhbNodeSysPrintBackAsRead) {
  Machine m = read("pcie-4gpu-2socket.txt", "rtx-4090", "none");
  Topology t(m);
  EXPECT_EQ(pt(t, 0, 1), "PHB");
  EXPECT_EQ(pt(t, 2, 3), "NODE");
  EXPECT_EQ(pt(t, 1, 2), "SYS");
  EXPECT_EQ(t.socket_groups(), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(m.gpus[2].numa, 1);
  EXPECT_FALSE(t.p2p_usable(0, 1));  // --p2p none: GeForce has no peer access
  EXPECT_NEAR(t.route(0, 1, TransferMode::HostStaged).bottleneck_Bps / 1e9, 31.5, 0.05);  // Gen4 x16
  // The matrix `topo` prints is the one that was read.
  std::string text = render_matrix(t);
  EXPECT_NE(text.find("GPU0   X      PHB    SYS    SYS"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU3   SYS    SYS    NODE   X"), std::string::npos) << text;
  // The default policy is NCCL's: PHB and NODE are beyond it.
  Topology d(read("pcie-4gpu-2socket.txt", "rtx-4090"));
  EXPECT_FALSE(d.p2p_usable(0, 1));
  Topology all(read("pcie-4gpu-2socket.txt", "rtx-4090", "all"));
  EXPECT_TRUE(all.p2p_usable(1, 2));
}

TEST(NvidiaSmiTopo, TwoGpuNvlinkBridgeOlderFormatWithoutGpuNumaId) {
  Machine m = read("nvlink-bridge-2gpu.txt", "rtx-3090");
  Topology t(m);
  EXPECT_EQ(pt(t, 0, 1), "NV4");
  Route r = t.route(0, 1, TransferMode::PeerCopyEngine);
  EXPECT_EQ(r.describe, "gpu0 -> gpu1");                  // a direct bridge, not a fabric
  EXPECT_DOUBLE_EQ(r.bottleneck_Bps, 4 * 14.0625e9);      // GA102's NVLink 3: 56.25 GB/s per direction
  EXPECT_EQ(m.gpus[0].numa, 0);                           // NUMA Affinity N/A: one socket
  EXPECT_EQ(t.socket_groups().size(), 1u);
}

TEST(NvidiaSmiTopo, SwitchesNestAsPixAndPxb) {
  // One socket: GPUs 0,1 under one switch, 2,3 under another, both under a top switch (PXB);
  // GPU 4 on the CPU's other root port (NODE).
  std::string t =
      "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
      "GPU0\t X \tPIX\tPXB\tPXB\tNODE\t0-31\t0\t\tN/A\n"
      "GPU1\tPIX\t X \tPXB\tPXB\tNODE\t0-31\t0\t\tN/A\n"
      "GPU2\tPXB\tPXB\t X \tPIX\tNODE\t0-31\t0\t\tN/A\n"
      "GPU3\tPXB\tPXB\tPIX\t X \tNODE\t0-31\t0\t\tN/A\n"
      "GPU4\tNODE\tNODE\tNODE\tNODE\t X \t0-31\t0\t\tN/A\n";
  Machine m = parse_nvidia_smi_topo(t, "nested.txt");
  Topology topo(m);
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 5; ++b)
      if (a != b) {
        EXPECT_EQ(pt(topo, a, b), a / 2 == b / 2 && a < 4 && b < 4 ? "PIX" : (a < 4 && b < 4 ? "PXB" : "NODE"));
      }
  EXPECT_TRUE(topo.p2p_usable(0, 3));  // PXB: within NCCL's default level
  EXPECT_FALSE(topo.p2p_usable(0, 4));
}

TEST(NvidiaSmiTopoBadInput, NamesTheLineAndTheCell) {
  const std::string head = "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n";
  expect_rejected("GPU utilisation 99%\n", "", "no `nvidia-smi topo -m` matrix found");
  expect_rejected(head + "GPU0\t X \tNVX\tSYS\t0-7\t0\n", "line 2 (GPU0), column GPU1", "NV# (# > 0), PIX");
  expect_rejected(head + "GPU0\t X \tPIX\n", "line 2 (GPU0)", "3 path-type cells");
  expect_rejected(head + "GPU0\tPIX\tPIX\tPIX\t0-7\t0\n", "line 2 (GPU0), column GPU0", "X on the diagonal");
  expect_rejected(head + "GPU0\t X \tPIX\tPIX\t0-7\t0\nGPU1\tPIX\t X \tPIX\t0-7\t0\n", "line 1 (header)", "no row GPU2");
  expect_rejected(head +
                      "GPU0\t X \tPIX\tSYS\t0-7\t0\n"
                      "GPU1\tPIX\t X \tSYS\t0-7\t0\n"
                      "GPU2\tSYS\tNODE\t X \t0-7\t0\n",
                  "line 4 (GPU2), column GPU1", "the same path type as GPU1's row gives for GPU2 (SYS)");
  // Not a tree: 0-1 and 1-2 share switches, 0-2 would then too.
  expect_rejected(head +
                      "GPU0\t X \tPIX\tPXB\t0-7\t0\n"
                      "GPU1\tPIX\t X \tPIX\t0-7\t0\n"
                      "GPU2\tPXB\tPIX\t X \t0-7\t0\n",
                  "line 2 (GPU0), column GPU2", "one PCIe tree per socket");
  expect_rejected(head + "GPU0\t X \tPIX\tPIX\t0-7\t0\nGPU1\tPIX\t X \tPIX\t0-7\t0\nGPU9\tPIX\tPIX\t X \t0-7\t0\n",
                  "line 4 (GPU9)", "GPU0..GPU2");
  try {
    parse_nvidia_smi_topo(read_text_file(fixture("nvlink-bridge-2gpu.txt")), "x.txt", NvidiaSmiTopoOptions{"rtx-9090", "all"});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--gpu");
    EXPECT_NE(std::string(e.what()).find("rtx-3090"), std::string::npos) << e.what();  // lists the known ones
  }
}

// ---- the command ----

struct Cmd {
  int code = -1;
  std::string out;
};

Cmd run(const std::string& args) {
  Cmd r;
  FILE* p = popen((std::string(PEERPLAN_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(NvidiaSmiTopoCommand, ReadsTheTextAndWritesAMachineToPlanWith) {
  Cmd shown = run("topo --from-nvidia-smi " + fixture("dgx-h100-8gpu.txt") + " --gpu h100-sxm");
  EXPECT_EQ(shown.code, 0) << shown.out;
  EXPECT_NE(shown.out.find("GPU0   X      NV18"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("assumption:"), std::string::npos) << shown.out;
  std::string out = (std::filesystem::temp_directory_path() / "peerplan-from-nvidia-smi.json").string();
  Cmd w = run("topo --from-nvidia-smi " + fixture("nvlink-bridge-2gpu.txt") + " --gpu rtx-3090 --format machine -o " + out);
  EXPECT_EQ(w.code, 0) << w.out;
  Machine m = load_machine(out);
  EXPECT_EQ(m.gpus[1].name, "NVIDIA GeForce RTX 3090");
  Cmd plan = run("plan --model llama-3.1-8b --machine " + out + " --workload chat --requests 20 --json");
  EXPECT_EQ(plan.code, 0) << plan.out.substr(0, 2000);
  std::filesystem::remove(out);
  Cmd both = run("topo --machine hgx-h100x8 --from-nvidia-smi " + fixture("dgx-h100-8gpu.txt"));
  EXPECT_EQ(both.code, 2) << both.out;
  Cmd gpu_without = run("topo --machine hgx-h100x8 --gpu h100-sxm");
  EXPECT_EQ(gpu_without.code, 2) << gpu_without.out;
}

TEST(GpuCatalog, NamesAndRates) {
  EXPECT_EQ(gpu_by_key("H100-SXM")->pci_device, "0x2330");
  EXPECT_EQ(gpu_by_key("NVIDIA L40S")->key, "l40s");
  EXPECT_EQ(gpu_by_pci_device("0x2684")->key, "rtx-4090");
  EXPECT_FALSE(gpu_by_pci_device("").has_value());
  EXPECT_DOUBLE_EQ(nvlink_gbps_per_link("9.0"), 25.0);
  EXPECT_DOUBLE_EQ(nvlink_gbps_per_link("8.6"), 14.0625);
  EXPECT_DOUBLE_EQ(nvlink_gbps_per_link("10.0"), 50.0);
  EXPECT_DOUBLE_EQ(nvlink_gbps_per_link(""), 0.0);
}

}  // namespace
}  // namespace peerplan
