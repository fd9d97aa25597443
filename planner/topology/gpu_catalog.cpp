// The GPU models peerplan knows (gpu_catalog.hpp). Datasheet figures; memory as nvidia-smi reports it.
#include "planner/topology/gpu_catalog.hpp"

#include <algorithm>
#include <cctype>

namespace peerplan {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

const std::vector<GpuModel>& gpu_catalog() {
  // key, PCI device, name, MiB, SMs, cc, dense bf16 TFLOP/s (FP32 accumulate), memory GB/s, boost MHz, PCIe gen, source
  static const std::vector<GpuModel> k = {
      {"h100-sxm", "0x2330", "NVIDIA H100 80GB HBM3", 81559, 132, "9.0", 989.4, 3350, 1980, 5,
       "NVIDIA H100 Tensor Core GPU datasheet (SXM5)"},
      {"h100-pcie", "0x2331", "NVIDIA H100 PCIe", 81559, 114, "9.0", 756.0, 2000, 1755, 5,
       "NVIDIA H100 Tensor Core GPU datasheet (PCIe)"},
      {"h200", "0x2335", "NVIDIA H200", 143771, 132, "9.0", 989.4, 4800, 1980, 5, "NVIDIA H200 datasheet (SXM)"},
      // H20: NVIDIA publishes no datasheet; figures as OEM spec sheets state them (148 dense bf16,
      // 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s); memory as nvidia-smi prints it (NVIDIA/nvtrust#128).
      // SM count and clock left unknown: not published.
      {"h20", "", "NVIDIA H20", 97871, 0, "9.0", 148.0, 4000, 0, 5,
       "OEM H20 spec sheets (148 TFLOP/s dense BF16, 96 GB HBM3, 4.0 TB/s); nvidia-smi memory from NVIDIA/nvtrust#128"},
      {"a100-sxm4-40gb", "0x20b0", "NVIDIA A100-SXM4-40GB", 40960, 108, "8.0", 312.0, 1555, 1410, 4,
       "NVIDIA A100 datasheet"},
      {"a100-sxm4-80gb", "0x20b2", "NVIDIA A100-SXM4-80GB", 81920, 108, "8.0", 312.0, 2039, 1410, 4,
       "NVIDIA A100 datasheet"},
      {"a100-pcie-80gb", "0x20b5", "NVIDIA A100 80GB PCIe", 81920, 108, "8.0", 312.0, 1935, 1410, 4,
       "NVIDIA A100 datasheet"},
      {"a100-pcie-40gb", "0x20f1", "NVIDIA A100-PCIE-40GB", 40960, 108, "8.0", 312.0, 1555, 1410, 4,
       "NVIDIA A100 datasheet"},
      {"l40s", "0x26b9", "NVIDIA L40S", 46068, 142, "8.9", 362.05, 864, 2520, 4, "NVIDIA L40S datasheet"},
      {"rtx-6000-ada", "0x26b1", "NVIDIA RTX 6000 Ada Generation", 49140, 142, "8.9", 364.2, 960, 2505, 4,
       "NVIDIA Ada Lovelace architecture whitepaper, appendix (RTX 6000 Ada)"},
      {"rtx-4090", "0x2684", "NVIDIA GeForce RTX 4090", 24564, 128, "8.9", 165.2, 1008, 2520, 4,
       "NVIDIA Ada Lovelace architecture whitepaper, appendix (GeForce RTX 4090)"},
      {"rtx-3090", "0x2204", "NVIDIA GeForce RTX 3090", 24576, 82, "8.6", 71.0, 936, 1695, 4,
       "NVIDIA Ampere GA102 GPU architecture whitepaper, appendix (GeForce RTX 3090)"},
  };
  return k;
}

std::optional<GpuModel> gpu_by_pci_device(const std::string& device_id) {
  const std::string d = lower(device_id);
  if (d.empty()) return std::nullopt;
  for (const auto& g : gpu_catalog())
    if (!g.pci_device.empty() && g.pci_device == d) return g;
  return std::nullopt;
}

std::optional<GpuModel> gpu_by_key(const std::string& key) {
  const std::string k = lower(key);
  for (const auto& g : gpu_catalog())
    if (g.key == k || lower(g.name) == k) return g;
  return std::nullopt;
}

std::string gpu_catalog_keys() {
  std::vector<std::string> keys;
  for (const auto& g : gpu_catalog()) keys.push_back(g.key);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

double nvlink_gbps_per_link(const std::string& cc) {
  if (cc.empty() || !std::isdigit(static_cast<unsigned char>(cc[0]))) return 0;
  const int major = std::stoi(cc);
  if (cc == "8.6" || cc == "8.7") return 14.0625;  // GA102 / GA10B: NVLink 3 at half the lane rate (3090 bridge: 4 x 14.06 = 56.25)
  if (major == 6) return 20.0;                      // NVLink 1 (P100)
  if (major >= 7 && major <= 9) return 25.0;        // NVLink 2 / 3 / 4 (V100, A100, H100/H200/H20)
  if (major >= 10) return 50.0;                     // NVLink 5 (B200)
  return 0;
}

}  // namespace peerplan
