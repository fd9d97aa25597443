#include "profiler/discovery/discovery.hpp"

#include <hwloc.h>
#include <nccl.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <chrono>
#include <ctime>
#include <map>
#include <set>

#include <cublasLt.h>
#include <fmt/format.h>

#include "planner/topology/executor_launch.hpp"
#include "profiler/common/env_switch.hpp"
#include "profiler/common/gemv_rule.hpp"
#include "profiler/common/pdl_switch.hpp"
#include "profiler/common/shared_stream.hpp"
#include "profiler/discovery/nvml.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/w4a16.hpp"

namespace peerplan::profiler {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string uuid_string(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  return fmt::format("GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

// Nominal per-link, per-direction NVLink GB/s by architecture (NVLink 2/3/4: 25, NVLink 5: 50).
double nvlink_gbps_per_link(int cc_major) { return cc_major >= 10 ? 50.0 : 25.0; }

struct HwlocTopo {
  hwloc_topology_t t = nullptr;
  HwlocTopo() {
    if (hwloc_topology_init(&t) != 0) { t = nullptr; return; }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) { hwloc_topology_destroy(t); t = nullptr; }
  }
  ~HwlocTopo() { if (t) hwloc_topology_destroy(t); }
};

std::string pci_name(hwloc_obj_t o) {
  if (o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI)
    return fmt::format("host bridge {:04x}:{:02x}", o->attr->bridge.downstream.pci.domain,
                       o->attr->bridge.downstream.pci.secondary_bus);
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
                     o->attr->pcidev.func);
}

}  // namespace

std::vector<GpuSpec> cuda_gpus() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary) {  // no usable GPU
    cudaGetLastError();
    return {};
  }
  CUDA_CHECK(e);
  std::vector<GpuSpec> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, i));
    GpuSpec g;
    g.id = i;
    g.name = p.name;
    g.uuid = uuid_string(p.uuid);
    char bus[32] = {0};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, i));
    g.pci = lower(bus);
    g.memory_bytes = int64_t(p.totalGlobalMem);
    g.sm_count = p.multiProcessorCount;
    g.compute_capability = fmt::format("{}.{}", p.major, p.minor);
    int clock_khz = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, i));
    g.clock_mhz = clock_khz / 1000.0;
    int mem_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, i);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    if (mem_khz > 0 && bus_bits > 0) g.hbm_gbps = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // nominal; measured in hbm
    out.push_back(g);
  }
  return out;
}

nlohmann::json gpu_stack_versions() {
  int driver = 0, runtime = 0, nccl = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  NCCL_CHECK(ncclGetVersion(&nccl));
  return {{"cuda_driver_api", fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10)},
          {"cuda_runtime", fmt::format("{}.{}", runtime / 1000, (runtime % 1000) / 10)},
          {"nccl", fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100)},
          {"cublaslt", std::to_string(cublasLtGetVersion())}};
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

namespace {

// How the executor launches decode kernels on these GPUs (pdl_switch.hpp): "pdl" only if every one takes it.
std::string launch_mode(const std::vector<GpuSpec>& gpus) {
  for (const GpuSpec& g : gpus)
    if (std::string(kernels::pdl::launch_mode(std::atoi(g.compute_capability.c_str()))) != "pdl") return "serial";
  return gpus.empty() ? "" : "pdl";
}

}  // namespace

HostInfo discover_host() {
  HostInfo h;
  h.hostname = host_name();
  const std::vector<GpuSpec> gpus = cuda_gpus();
  for (const GpuSpec& g : gpus) h.gpus.push_back(HostGpu{g.name, g.uuid, g.memory_bytes});
  h.executor_launch = launch_mode(gpus);
  h.shared_stream = exec::shared_stream_from_env(std::getenv("PEERPLAN_SHARED_STREAM"));
  h.fused_act = exec::fused_act_from_env(std::getenv("PEERPLAN_FUSED_ACT"));
  h.w4_layout = kernels::w4a16_layout_name(kernels::w4a16_layout());
  h.moe_w8_mma = kernels::moe_w8mma_on() ? 1 : 0;
  h.small_gemv = kernels::small_gemv_enabled() ? 1 : 0;
  return h;
}

nlohmann::json host_context() {
  nlohmann::json c = gpu_stack_versions();
  const HostInfo h = discover_host();
  c["host"] = h.hostname;
  c["executor_launch"] = h.executor_launch;  // how this run's decode kernels launch: "pdl" or "serial"
  std::vector<std::string> names;
  for (const HostGpu& g : h.gpus) names.push_back(g.name);
  c["gpus"] = names;
  c["date"] = now_utc();
  return c;
}

Machine discover_machine() {
  Machine m;
  m.origin = "measured";
  m.date = now_utc();
  m.host = host_name();
  m.name = m.host;

  Nvml nvml;
  m.meta["tool"] = "peerplan profile";
  m.meta[kExecutorNormsKey] = kFusedAddNorm;  // the executor timed here runs them (machine.hpp fused_add_norm)
  m.meta.update(gpu_stack_versions());
  m.meta["hwloc"] = HWLOC_VERSION;
  m.meta["driver"] = nvml.available() ? nvml.driver_version() : "unknown (NVML unavailable)";
  m.meta["nvml"] = nvml.available() ? "available" : "unavailable: " + nvml.why_unavailable();
  for (const char* v : {"CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "NCCL_P2P_DISABLE"})
    if (const char* e = std::getenv(v)) m.meta["env"][v] = e;

  m.gpus = cuda_gpus();
  m.meta[kExecutorLaunchKey] = launch_mode(m.gpus);  // as the kernels timed here launch (executor_launch.hpp)
  // Whether this executor runs a MoE layer's shared experts on a second stream (executor_launch.hpp):
  // the plans compiled against this profile then do too. On unless PEERPLAN_SHARED_STREAM=0 (measured
  // faster at up to 8 tokens and priced within 2 % but Qwen1.5-MoE batch 1 at 6 %: docs/moe_executor.md).
  m.meta[kSharedStreamKey] = exec::shared_stream_from_env(std::getenv("PEERPLAN_SHARED_STREAM")) != 0;
  m.meta[kW4LayoutKey] = kernels::w4a16_layout_name(kernels::w4a16_layout());  // the order its W4A16 rows read
  // Whether this executor runs a gated MLP's activation in the gate_up GEMV's epilogue at decode
  // (planner/compile/act_fusion.hpp): plans compiled against this profile then emit no activation op there.
  // On unless PEERPLAN_FUSED_ACT=0: measured 0.7-2.6 % faster decode steps for bf16 and W4A16 at batch 1-2 (one
  // H100, session 31 A); "all" also fuses kernels it slowed, which no profile prices.
  m.meta[kFusedActKey] = exec::fused_act_from_env(std::getenv("PEERPLAN_FUSED_ACT")) != 0;
  m.meta[kMoeW8MmaKey] = kernels::moe_w8mma_on();  // 8-bit experts' tiled groups on 8-bit tensor cores
  m.meta[kSmallGemvKey] = kernels::small_gemv_enabled();  // small matrices at 3-8 tokens on the GEMV (gemv_rule.hpp)
  const int n = m.gpu_count();
  if (n == 0) throw RuntimeError("no CUDA GPU visible (check the driver and CUDA_VISIBLE_DEVICES)");
  std::vector<NvmlGpuInfo> nv(static_cast<size_t>(n));
  std::map<std::string, int> gpu_by_pci;
  for (GpuSpec& g : m.gpus) {
    const size_t i = size_t(g.id);
    nv[i] = nvml.query(g.pci);
    if (nv[i].max_sm_clock_mhz) g.clock_mhz = double(*nv[i].max_sm_clock_mhz);
    // Nominal dense bf16 peak: SMs x clock x 4096 FLOP/clk/SM on Hopper (H100/H200 SXM: ~989 TFLOP/s).
    if (g.compute_capability.rfind("9.", 0) == 0) g.peak_bf16_tflops = double(g.sm_count) * g.clock_mhz * 1e6 * 4096 / 1e12;
    gpu_by_pci[g.pci] = g.id;
  }

  // Directed peer capability.
  m.p2p.assign(size_t(n), std::vector<P2PInfo>(size_t(n)));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      auto& c = m.p2p[size_t(i)][size_t(j)];
      int can = 0, rank = -1, access = 0, atomics = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, i, j));
      CUDA_CHECK(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j));
      CUDA_CHECK(cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, i, j));
      CUDA_CHECK(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i, j));
      c.access = can != 0 && access != 0;
      c.perf_rank = rank;
      c.atomics = atomics != 0;
      if (!c.access) c.note = "cudaDeviceCanAccessPeer says no (no NVLink and no usable PCIe peer path)";
    }

  // PCIe tree, NUMA nodes and sockets through hwloc.
  HwlocTopo topo;
  if (!topo.t) {
    m.meta["hwloc_status"] = "hwloc could not load the topology: PCIe tree and NUMA unknown";
  } else {
    int sockets = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_PACKAGE);
    int numa_nodes = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE);
    m.meta["numa_nodes"] = numa_nodes;
    m.meta["sockets"] = sockets;
    for (int s = 0; s < std::max(1, sockets); ++s) {
      NodeSpec cpu;
      cpu.id = "cpu" + std::to_string(s);
      cpu.kind = NodeKind::CpuSocket;
      cpu.numa = s;
      hwloc_obj_t pkg = hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_PACKAGE, unsigned(s));
      const char* model = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : nullptr;
      cpu.name = model ? model : "CPU socket";
      m.nodes.push_back(cpu);
    }
    for (int s = 1; s < sockets; ++s) {
      LinkSpec l;
      l.a = "cpu0";
      l.b = "cpu" + std::to_string(s);
      l.kind = LinkKind::Smp;
      l.gbps = 64;  // nominal (UPI/xGMI); hwloc does not report it. Stated in meta.assumptions.
      m.links.push_back(l);
      m.meta["assumptions"].push_back("inter-socket link capacity 64 GB/s per direction is nominal, not measured");
    }
    std::set<std::string> nodes_added;
    for (auto& g : m.gpus) {
      unsigned dom = 0, bus = 0, dev = 0, fn = 0;
      if (std::sscanf(g.pci.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) continue;
      hwloc_obj_t pdev = hwloc_get_pcidev_by_busid(topo.t, dom, bus, dev, fn);
      // PCIe link figures: NVML's current generation and width; hwloc's link speed otherwise.
      const auto& ni = nv[size_t(g.id)];
      LinkSpec up_template;
      up_template.kind = LinkKind::Pcie;
      if (ni.pcie_gen && ni.pcie_width && *ni.pcie_gen > 0 && *ni.pcie_width > 0) {
        // Idle GPUs train their link down (gen 1); the max generation is the working one.
        up_template.pcie_gen = ni.max_pcie_gen ? *ni.max_pcie_gen : *ni.pcie_gen;
        up_template.pcie_width = ni.max_pcie_width ? std::min(*ni.max_pcie_width, *ni.pcie_width) : *ni.pcie_width;
      } else if (pdev && pdev->attr->pcidev.linkspeed > 0) {
        up_template.gbps = pdev->attr->pcidev.linkspeed;
      } else {
        up_template.pcie_gen = 5;
        up_template.pcie_width = 16;
        m.meta["assumptions"].push_back("gpu" + std::to_string(g.id) +
                                        ": PCIe link gen/width unknown (no NVML, no hwloc link speed); assumed gen5 x16");
      }
      // Walk up: PCI-PCI bridges (switch ports, collapsed into one switch vertex per top bridge),
      // then the host bridge, then the first CPU-side ancestor (its NUMA node / package).
      std::string prev = g.node_id();
      hwloc_obj_t top_switch = nullptr, host_bridge = nullptr, cpu_side = nullptr;
      for (hwloc_obj_t o = pdev ? pdev->parent : nullptr; o; o = o->parent) {
        if (o->type == HWLOC_OBJ_BRIDGE) {
          if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) top_switch = o;
          else host_bridge = o;
        } else if (o->type != HWLOC_OBJ_PCI_DEVICE && o->type != HWLOC_OBJ_OS_DEVICE) {
          cpu_side = o;
          break;
        }
      }
      int socket = 0;
      if (cpu_side && cpu_side->nodeset) {
        int numa = hwloc_bitmap_first(cpu_side->nodeset);
        g.numa = numa;
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo.t, HWLOC_OBJ_PACKAGE, cpu_side);
        if (!pkg && cpu_side->cpuset) pkg = hwloc_get_next_obj_covering_cpuset_by_type(topo.t, cpu_side->cpuset, HWLOC_OBJ_PACKAGE, nullptr);
        if (pkg) socket = int(pkg->logical_index);
      }
      auto add_node = [&](const std::string& id, NodeKind kind, const std::string& name) {
        if (nodes_added.insert(id).second) {
          NodeSpec ns;
          ns.id = id;
          ns.kind = kind;
          ns.name = name;
          ns.numa = kind == NodeKind::CpuSocket ? socket : -1;
          m.nodes.push_back(ns);
          return true;
        }
        return false;
      };
      auto add_link = [&](const std::string& a, const std::string& b) {
        LinkSpec l = up_template;
        l.a = a;
        l.b = b;
        m.links.push_back(l);
      };
      if (top_switch) {
        std::string id = "sw_" + pci_name(top_switch);
        for (auto& c : id) if (c == ':' || c == '.') c = '_';
        add_node(id, NodeKind::PcieSwitch, "PCIe switch " + pci_name(top_switch));
        add_link(prev, id);
        prev = id;
        if (!nodes_added.insert(id + "/up").second) continue;  // switch already linked upstream
      }
      if (host_bridge) {
        std::string id = fmt::format("hb{}_{:02x}", host_bridge->attr->bridge.downstream.pci.domain,
                                     host_bridge->attr->bridge.downstream.pci.secondary_bus);
        bool fresh = add_node(id, NodeKind::HostBridge, pci_name(host_bridge));
        add_link(prev, id);
        if (!fresh) continue;
        prev = id;
      }
      add_link(prev, "cpu" + std::to_string(socket));
    }
  }

  // NVLink through NVML: count active links between each GPU pair (or to an NVSwitch).
  std::map<std::pair<int, int>, int> nvl;  // (a, b) a < b -> links; b == -1: NVSwitch
  std::map<int, unsigned> versions;
  for (int i = 0; i < n; ++i) {
    auto& g = m.gpus[size_t(i)];
    nlohmann::json links = nlohmann::json::array();
    for (const auto& l : nv[size_t(i)].links) {
      links.push_back({{"link", l.link}, {"active", l.active}, {"version", l.version}, {"remote_pci", l.remote_pci}});
      if (!l.active) continue;
      versions[i] = l.version;
      auto it = gpu_by_pci.find(l.remote_pci);
      if (it != gpu_by_pci.end()) {
        if (i < it->second) nvl[{i, it->second}]++;
      } else {
        nvl[{i, -1}]++;
      }
    }
    m.meta["nvlink"][g.node_id()] = nv[size_t(i)].available ? links : nlohmann::json("unknown (NVML unavailable)");
  }
  bool nvswitch = false;
  for (const auto& [k, count] : nvl) {
    LinkSpec l;
    l.kind = LinkKind::NvLink;
    l.a = "gpu" + std::to_string(k.first);
    l.b = k.second >= 0 ? "gpu" + std::to_string(k.second) : "nvswitch";
    if (k.second < 0) nvswitch = true;
    l.nvlinks = count;
    int major = std::atoi(m.gpus[size_t(k.first)].compute_capability.c_str());
    l.gbps_per_link = nvlink_gbps_per_link(major);
    m.links.push_back(l);
  }
  if (nvswitch) {
    NodeSpec s;
    s.id = "nvswitch";
    s.kind = NodeKind::NvSwitch;
    s.name = "NVSwitch fabric (remote end of NVLinks not a visible GPU)";
    m.nodes.push_back(s);
  }
  if (!nvl.empty()) m.meta["nvlink_gbps_per_link_basis"] = "nominal per-link per-direction rate by architecture (NVLink 4: 25 GB/s)";
  m.description = fmt::format("{} x {}, measured by peerplan profile", n, m.gpus[0].name);
  return m;
}

}  // namespace peerplan::profiler
