#pragma once
// NVML loaded at run time (dlopen "libnvidia-ml.so.1"), declaring only the few functions used, so
// the binary needs no NVML headers or link-time library. Without NVML every query says unknown.
#include <optional>
#include <string>
#include <vector>

namespace peerplan::profiler {

struct NvLinkInfo {
  int link = 0;
  bool active = false;
  unsigned version = 0;          // NVML's nvmlDeviceGetNvLinkVersion value, as reported
  std::string remote_pci;        // bus id of the device at the other end ("" unknown)
};

struct NvmlGpuInfo {
  bool available = false;        // NVML answered for this GPU
  std::vector<NvLinkInfo> links; // every link index NVML knows for the GPU
  std::optional<int> pcie_gen, pcie_width;   // current link (nvmlDeviceGetCurrPcieLink*)
  std::optional<int> max_pcie_gen, max_pcie_width;
  std::optional<unsigned> max_sm_clock_mhz, max_mem_clock_mhz;
  std::string error;             // why unavailable
};

class Nvml {
 public:
  Nvml();   // loads and initialises; never throws (available() says whether it worked)
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool available() const { return lib_ != nullptr && inited_; }
  const std::string& why_unavailable() const { return why_; }
  std::string driver_version() const;     // "" if unknown
  NvmlGpuInfo query(const std::string& pci_bus_id) const;
  // The SM clock now (nvmlDeviceGetClockInfo), MHz: what the compute tables record beside each
  // sample, since a GPU at its power cap times tensor-core work ~8 % slower than it serves
  // (docs/profiler.md, "Clocks"). nullopt: NVML cannot say.
  std::optional<unsigned> sm_clock_mhz(const std::string& pci_bus_id) const;

 private:
  void* lib_ = nullptr;
  bool inited_ = false;
  std::string why_;
};

}  // namespace peerplan::profiler
