#include "profiler/discovery/nvml.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstring>

namespace peerplan::profiler {
namespace {

// The subset of nvml.h used here (ABI-stable since NVML 10).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2;
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

template <class F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

std::string normalise_bus_id(std::string s) {
  // NVML: "00000000:18:00.0"; CUDA: "0000:18:00.0". Compare as lowercase with a 4-digit domain.
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  size_t colon = s.find(':');
  if (colon != std::string::npos && colon > 4) s = s.substr(colon - 4);
  return s;
}

}  // namespace

Nvml::Nvml() {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    why_ = std::string("dlopen(libnvidia-ml.so.1) failed: ") + dlerror();
    return;
  }
  auto init = sym<nvmlReturn_t (*)()>(lib_, "nvmlInit_v2");
  if (!init) { why_ = "libnvidia-ml.so.1 has no nvmlInit_v2"; return; }
  nvmlReturn_t r = init();
  if (r != NVML_SUCCESS) { why_ = "nvmlInit_v2 returned " + std::to_string(r); return; }
  inited_ = true;
}

Nvml::~Nvml() {
  if (inited_)
    if (auto f = sym<nvmlReturn_t (*)()>(lib_, "nvmlShutdown")) f();
  if (lib_) dlclose(lib_);
}

std::string Nvml::driver_version() const {
  if (!available()) return "";
  auto f = sym<nvmlReturn_t (*)(char*, unsigned)>(lib_, "nvmlSystemGetDriverVersion");
  char buf[96] = {0};
  if (f && f(buf, sizeof buf) == NVML_SUCCESS) return buf;
  return "";
}

NvmlGpuInfo Nvml::query(const std::string& pci) const {
  NvmlGpuInfo info;
  if (!available()) { info.error = why_; return info; }
  auto by_pci = sym<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  nvmlDevice_t dev = nullptr;
  if (!by_pci || by_pci(pci.c_str(), &dev) != NVML_SUCCESS) {
    info.error = "nvmlDeviceGetHandleByPciBusId_v2(" + pci + ") failed";
    return info;
  }
  info.available = true;
  auto state = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*)>(lib_, "nvmlDeviceGetNvLinkState");
  auto version = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*)>(lib_, "nvmlDeviceGetNvLinkVersion");
  auto remote = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlPciInfo_t*)>(lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  for (unsigned l = 0; state && l < kMaxLinks; ++l) {
    int st = 0;
    if (state(dev, l, &st) != NVML_SUCCESS) continue;  // link index not present on this GPU
    NvLinkInfo li;
    li.link = int(l);
    li.active = st == 1;
    if (version) version(dev, l, &li.version);
    nvmlPciInfo_t rp{};
    if (li.active && remote && remote(dev, l, &rp) == NVML_SUCCESS) li.remote_pci = normalise_bus_id(rp.busId);
    info.links.push_back(li);
  }
  auto get_uint = [&](const char* name, std::optional<int>& out) {
    auto f = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>(lib_, name);
    unsigned v = 0;
    if (f && f(dev, &v) == NVML_SUCCESS) out = int(v);
  };
  get_uint("nvmlDeviceGetCurrPcieLinkGeneration", info.pcie_gen);
  get_uint("nvmlDeviceGetCurrPcieLinkWidth", info.pcie_width);
  get_uint("nvmlDeviceGetMaxPcieLinkGeneration", info.max_pcie_gen);
  get_uint("nvmlDeviceGetMaxPcieLinkWidth", info.max_pcie_width);
  auto clock = sym<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*)>(lib_, "nvmlDeviceGetMaxClockInfo");
  unsigned v = 0;
  if (clock && clock(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS) info.max_sm_clock_mhz = v;
  if (clock && clock(dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) info.max_mem_clock_mhz = v;
  return info;
}

std::optional<unsigned> Nvml::sm_clock_mhz(const std::string& pci) const {
  if (!available()) return std::nullopt;
  auto by_pci = sym<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  auto clock = sym<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*)>(lib_, "nvmlDeviceGetClockInfo");
  nvmlDevice_t dev = nullptr;
  unsigned v = 0;
  if (!by_pci || !clock || by_pci(pci.c_str(), &dev) != NVML_SUCCESS) return std::nullopt;
  if (clock(dev, NVML_CLOCK_SM, &v) != NVML_SUCCESS || v == 0) return std::nullopt;
  return v;
}

}  // namespace peerplan::profiler
