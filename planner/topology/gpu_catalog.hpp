#pragma once
// Nominal specifications of the GPUs peerplan knows by name or PCI device id: the one table the
// NCCL XML import (device id), `topo --from-nvidia-smi --gpu NAME` and the NVLink rate per
// compute capability read. Figures are datasheet values (nominal), memory as nvidia-smi reports it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace peerplan {

struct GpuModel {
  std::string key;           // short name for --gpu: "h100-sxm", "rtx-4090"
  std::string pci_device;    // NVIDIA PCI device id, "0x2330"; empty when not recorded here
  std::string name;          // as nvidia-smi prints it: "NVIDIA H100 80GB HBM3"
  int64_t memory_mib = 0;    // as nvidia-smi reports it
  int sm_count = 0;
  std::string compute_capability;  // "9.0"
  double peak_bf16_tflops = 0;     // dense, FP32 accumulate
  double hbm_gbps = 0;
  double clock_mhz = 0;            // boost
  int pcie_gen = 0;                // the card's own host link (x16)
  std::string source;        // where the figures come from
};

const std::vector<GpuModel>& gpu_catalog();
std::optional<GpuModel> gpu_by_pci_device(const std::string& device_id);  // case-insensitive
std::optional<GpuModel> gpu_by_key(const std::string& key);              // "h100-sxm"; also the full name
std::string gpu_catalog_keys();                                           // "a100-pcie-40gb, ..., rtx-4090"

// Nominal per-link, per-direction NVLink rate in GB/s for a compute capability ("8.6"): NVLink 1
// (6.x) 20, NVLink 2/3/4 (7.x, 8.0, 9.x) 25, GA102's NVLink 3 x4 bridge (8.6) 14.0625, NVLink 5
// (10.x) 50. 0 for an unknown or empty capability.
double nvlink_gbps_per_link(const std::string& compute_capability);

}  // namespace peerplan
