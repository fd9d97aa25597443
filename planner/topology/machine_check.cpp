// Structural validation of a machine, whatever its source (JSON, NCCL XML, the profiler).
#include "planner/topology/machine_check.hpp"

#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

namespace {

std::string idx(const char* arr, size_t i, const char* key) {
  return std::string(arr) + "/" + std::to_string(i) + "/" + key;
}

// A figure above its ceiling (or not finite) is refused with the ceiling in the message.
void check_ceiling(const std::string& f, const std::string& field, double v, double ceiling, const char* unit) {
  if (!(v <= ceiling))
    throw InputError(f, field, fmt::format("a figure of at most {:g} {} (the ceiling for any hardware), got {:g}", ceiling,
                                           unit, v));
}

}  // namespace

void validate_structure(const Machine& m) {
  const std::string& f = m.source_file;
  const size_t n = m.gpus.size();
  if (n == 0) throw InputError(f, "gpus", "expected at least one GPU");
  std::map<std::string, NodeKind> kind_of;
  for (size_t i = 0; i < n; ++i) {
    const GpuSpec& g = m.gpus[i];
    if (g.id != int(i))
      throw InputError(f, idx("gpus", i, "id"), "GPU ids must be dense and in order (0..N-1); expected " +
                                                     std::to_string(i) + ", found " + std::to_string(g.id));
    if (g.memory_bytes < 0) throw InputError(f, idx("gpus", i, "memory_bytes"), "expected a positive size in bytes");
    if (g.sm_count < 0) throw InputError(f, idx("gpus", i, "sm_count"), "expected an integer >= 0");
    if (g.peak_bf16_tflops < 0 || g.hbm_gbps < 0 || g.clock_mhz < 0)
      throw InputError(f, idx("gpus", i, "peak_bf16_tflops"), "expected figures >= 0");
    check_ceiling(f, idx("gpus", i, "memory_bytes"), double(g.memory_bytes), double(kMaxMemoryBytes), "bytes");
    check_ceiling(f, idx("gpus", i, "peak_bf16_tflops"), g.peak_bf16_tflops, kMaxTflops, "TFLOP/s");
    check_ceiling(f, idx("gpus", i, "hbm_gbps"), g.hbm_gbps, kMaxBandwidthGbps, "GB/s");
    check_ceiling(f, idx("gpus", i, "clock_mhz"), g.clock_mhz, kMaxClockMhz, "MHz");
    check_ceiling(f, idx("gpus", i, "sm_count"), g.sm_count, kMaxSmCount, "SMs");
    kind_of[g.node_id()] = NodeKind::Gpu;
  }
  static const std::regex gpu_like("gpu[0-9]+");
  std::map<std::string, size_t> node_at;
  std::map<int, size_t> socket_numa;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const NodeSpec& s = m.nodes[i];
    if (s.id.empty()) throw InputError(f, idx("nodes", i, "id"), "expected a non-empty vertex id");
    if (std::regex_match(s.id, gpu_like))
      throw InputError(f, idx("nodes", i, "id"), "\"" + s.id + "\" is reserved for GPU vertices; GPUs go in \"gpus\"");
    if (auto it = node_at.find(s.id); it != node_at.end())
      throw InputError(f, idx("nodes", i, "id"),
                       "duplicate vertex id \"" + s.id + "\" (also nodes/" + std::to_string(it->second) + "/id)");
    node_at[s.id] = i;
    kind_of[s.id] = s.kind;
    if (s.kind == NodeKind::Gpu) throw InputError(f, idx("nodes", i, "kind"), "GPUs go in \"gpus\", not \"nodes\"");
    if (s.mem_gbps < 0) throw InputError(f, idx("nodes", i, "mem_gbps"), "expected a bandwidth >= 0 in GB/s");
    check_ceiling(f, idx("nodes", i, "mem_gbps"), s.mem_gbps, kMaxBandwidthGbps, "GB/s");
    if (s.kind == NodeKind::CpuSocket) {
      if (s.numa < 0) throw InputError(f, idx("nodes", i, "numa"), "a cpu_socket needs its NUMA index (>= 0)");
      if (auto it = socket_numa.find(s.numa); it != socket_numa.end())
        throw InputError(f, idx("nodes", i, "numa"), "two CPU sockets with NUMA index " + std::to_string(s.numa) +
                                                         " (also nodes/" + std::to_string(it->second) + ")");
      socket_numa[s.numa] = i;
    }
  }
  auto vertex_list = [&] {
    std::string v = n == 1 ? "gpu0" : "gpu0..gpu" + std::to_string(n - 1);
    for (const auto& s : m.nodes) v += ", " + s.id;
    return v;
  };
  std::map<std::pair<std::string, std::string>, size_t> pair_at;
  for (size_t i = 0; i < m.links.size(); ++i) {
    const LinkSpec& l = m.links[i];
    for (const char* end : {"a", "b"}) {
      const std::string& v = end[0] == 'a' ? l.a : l.b;
      if (!kind_of.count(v))
        throw InputError(f, idx("links", i, end),
                         "link names vertex \"" + v + "\", which does not exist (vertices: " + vertex_list() + ")");
    }
    if (l.a == l.b) throw InputError(f, idx("links", i, "b"), "self-loop: a link must join two different vertices");
    auto key = std::minmax(l.a, l.b);
    if (auto it = pair_at.find(key); it != pair_at.end())
      throw InputError(f, idx("links", i, "b"),
                       "duplicate link between \"" + l.a + "\" and \"" + l.b + "\" (also links/" +
                           std::to_string(it->second) + "); describe bonded NVLinks with one link and \"nvlinks\"");
    pair_at[key] = i;
    NodeKind ka = kind_of[l.a], kb = kind_of[l.b];
    if (l.nvlinks < 0 || l.gbps_per_link < 0 || l.gbps < 0 || l.latency_us < 0)
      throw InputError(f, idx("links", i, "gbps"), "link figures must be positive");
    if (l.pcie_gen < 0 || l.pcie_gen > 6)
      throw InputError(f, idx("links", i, "pcie_gen"), "expected a PCIe generation 1..6");
    if (l.pcie_width < 0 || l.pcie_width > 32)
      throw InputError(f, idx("links", i, "pcie_width"), "expected a lane count 1..32");
    switch (l.kind) {
      case LinkKind::NvLink:
        for (NodeKind k : {ka, kb})
          if (k != NodeKind::Gpu && k != NodeKind::NvSwitch)
            throw InputError(f, idx("links", i, "kind"), "an nvlink link joins GPUs or a GPU and an nvswitch");
        if (ka == NodeKind::NvSwitch && kb == NodeKind::NvSwitch)
          throw InputError(f, idx("links", i, "kind"), "model one NVSwitch fabric as one nvswitch vertex");
        break;
      case LinkKind::Pcie:
        if (ka == NodeKind::NvSwitch || kb == NodeKind::NvSwitch)
          throw InputError(f, idx("links", i, "kind"), "an nvswitch vertex only takes nvlink links");
        break;
      case LinkKind::Smp:
        if (ka != NodeKind::CpuSocket || kb != NodeKind::CpuSocket)
          throw InputError(f, idx("links", i, "kind"), "an smp link joins two cpu_socket vertices");
        break;
      case LinkKind::Network: break;
    }
    const char* capacity_field = l.gbps > 0 ? "gbps" : l.kind == LinkKind::NvLink ? "gbps_per_link" : l.kind == LinkKind::Pcie ? "pcie_gen" : "gbps";
    if (!(link_capacity_gbps(l) > 0))
      throw InputError(f, idx("links", i, l.kind == LinkKind::NvLink ? "nvlinks" : l.kind == LinkKind::Pcie ? "pcie_gen" : "gbps"),
                       "link capacity must be positive: give gbps, or nvlinks and gbps_per_link, or pcie_gen and pcie_width");
    check_ceiling(f, idx("links", i, "nvlinks"), l.nvlinks, kMaxNvlinks, "bonded links");
    check_ceiling(f, idx("links", i, "gbps_per_link"), l.gbps_per_link, kMaxBandwidthGbps, "GB/s");
    check_ceiling(f, idx("links", i, capacity_field), link_capacity_gbps(l), kMaxBandwidthGbps, "GB/s per direction");
    if (link_capacity_gbps(l) < kMinBandwidthGbps)
      throw InputError(f, idx("links", i, capacity_field),
                       fmt::format("a capacity of at least {:g} GB/s (1 MB/s), got {:g}", kMinBandwidthGbps, link_capacity_gbps(l)));
    check_ceiling(f, idx("links", i, "latency_us"), l.latency_us, kMaxLatencyUs, "us");
  }
  if (!m.p2p.empty()) {
    if (m.p2p.size() != n)
      throw InputError(f, "p2p", "expected an N x N matrix with N = " + std::to_string(n) + " GPUs, found " +
                                     std::to_string(m.p2p.size()) + " rows");
    for (size_t i = 0; i < n; ++i)
      if (m.p2p[i].size() != n)
        throw InputError(f, "p2p/" + std::to_string(i), "expected " + std::to_string(n) + " columns (square matrix)");
  } else if (!m.p2p_policy.empty() && m.p2p_policy != "all" && m.p2p_policy != "nvlink_only" &&
             m.p2p_policy != "same_switch" && m.p2p_policy != "none") {
    throw InputError(f, "p2p", "unknown policy \"" + m.p2p_policy +
                                   "\"; expected \"all\", \"nvlink_only\", \"same_switch\" or \"none\"");
  }
}

void validate_machine(Machine& m) {
  // The Topology constructor runs validate_structure, checks reachability, resolves a p2p policy
  // and fills GPU NUMA nodes from the graph; copy the completed machine back.
  Topology t(m);
  m = t.machine();
}

}  // namespace peerplan
