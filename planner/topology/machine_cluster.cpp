// Cluster expansion of the machine schema (machine_cluster.hpp, docs/schema.md "Clusters").
#include "planner/topology/machine_cluster.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/topology/machine_check.hpp"

namespace peerplan {

namespace fs = std::filesystem;

namespace {

// The host machine: a shipped name, a path (relative to the cluster file first), or inline.
Machine load_host(const JsonIn& c, const std::string& cluster_file) {
  JsonIn h = c.at("host");
  if (h.is_object()) {
    if (h.raw().contains("cluster")) c.fail("host", "a cluster's host is one host, not another cluster");
    return parse_machine_json(h.raw().dump(), cluster_file + " (cluster/host)");
  }
  if (!h.raw().is_string())
    c.fail("host", "expected a shipped machine name (\"hgx-h100x8\"), a machine file path or an inline machine object");
  std::string name = h.as_str();
  std::string path;
  fs::path rel = fs::path(cluster_file).parent_path() / name;
  std::error_code ec;
  if (!name.empty() && fs::path(name).is_relative() && fs::is_regular_file(rel, ec)) {
    path = rel.string();
  } else {
    try {
      path = resolve_machine_path(name);
    } catch (const InputError& e) {
      c.fail("host", e.expected());
    }
  }
  if (fs::weakly_canonical(path, ec) == fs::weakly_canonical(cluster_file, ec))
    c.fail("host", "names this file itself; expected a one-host machine");
  std::string text = read_input_file(path, file_kind::kMachine);
  if (parse_json_text(text, path).contains("cluster"))
    c.fail("host", "\"" + path + "\" is itself a cluster; a cluster's host is one host");
  return load_machine(path);
}

void check_host(const JsonIn& c, const Machine& host) {
  auto bad = [&](const std::string& why) { c.fail("host", "\"" + host.source_file + "\" " + why); };
  if (host.measured()) bad("is a measured profile; a cluster repeats a nominal host (its measurements are of one host)");
  if (host.p2p_policy.empty()) bad("gives p2p as a matrix; a cluster's host gives it as a policy (\"all\", \"nvlink_only\", ...)");
  for (const auto& l : host.links)
    if (l.kind == LinkKind::Network) bad("has network links; a cluster's host is one host (the cluster adds the network)");
}

// The vertex a GPU's own PCIe link ends at (its switch or root port), where its NIC goes.
const LinkSpec* gpu_pcie_link(const Machine& host, int gpu, std::string* parent) {
  const std::string id = "gpu" + std::to_string(gpu);
  for (const auto& l : host.links) {
    if (l.kind != LinkKind::Pcie) continue;
    if (l.a == id && l.b.rfind("gpu", 0) != 0) { *parent = l.b; return &l; }
    if (l.b == id && l.a.rfind("gpu", 0) != 0) { *parent = l.a; return &l; }
  }
  return nullptr;
}

}  // namespace

void expand_cluster(const JsonIn& root, Machine& m) {
  for (const char* key : {"gpus", "nodes", "links", "p2p", "measurements"})
    if (root.has(key))
      root.fail(key, std::string("a cluster machine takes its GPUs, nodes, links and p2p from cluster/host; leave out \"") +
                         key + "\"");
  JsonIn c = root.object("cluster");
  const int64_t hosts = c.positive_int("hosts");
  if (hosts > kMaxClusterHosts) c.fail("hosts", fmt::format("at most {} hosts, got {}", kMaxClusterHosts, hosts));
  Machine host = load_host(c, m.source_file);
  check_host(c, host);
  const int G = host.gpu_count();

  // NICs per host: one per GPU, or K spread over the GPUs.
  int64_t nics = G;
  if (!c.has("nics")) {
    // default: per_gpu
  } else if (JsonIn n = c.at("nics"); n.raw().is_string()) {
    if (n.as_str() != "per_gpu") c.fail("nics", "expected \"per_gpu\" or a number of NICs per host, found \"" + n.as_str() + "\"");
  } else {
    nics = c.positive_int("nics");
    if (nics > G) c.fail("nics", fmt::format("at most one NIC per GPU ({} per host), got {}", G, nics));
  }
  const double nic_gbps = c.positive("nic_gbps");
  if (nic_gbps > kMaxBandwidthGbps || nic_gbps < kMinBandwidthGbps)
    c.fail("nic_gbps", fmt::format("GB/s per direction (400 Gb/s = 50) between {:g} and {:g}, got {:g}", kMinBandwidthGbps,
                                   kMaxBandwidthGbps, nic_gbps));
  const double latency_us = c.positive_or("nic_latency_us", 0);
  if (latency_us > kMaxLatencyUs) c.fail("nic_latency_us", fmt::format("at most {:g} us, got {:g}", kMaxLatencyUs, latency_us));
  const double all_nics = double(hosts) * double(nics);
  const double mesh = all_nics * (all_nics - 1) / 2 - double(hosts) * double(nics) * double(nics - 1) / 2;
  if (mesh > double(kMaxClusterNetworkLinks))
    c.fail("hosts", fmt::format("{} hosts x {} NICs make {:.0f} network links (full mesh), over the {} this reader builds; "
                                "give fewer NICs per host (\"nics\": 1) or fewer hosts",
                                hosts, nics, mesh, kMaxClusterNetworkLinks));

  // Where each NIC attaches: the PCIe parent of GPU k*G/nics.
  struct Rail {
    std::string parent;
    LinkSpec pcie;
  };
  std::vector<Rail> rails;
  for (int64_t k = 0; k < nics; ++k) {
    int gpu = int(k * G / nics);
    Rail r;
    const LinkSpec* l = gpu_pcie_link(host, gpu, &r.parent);
    if (!l) c.fail("host", fmt::format("\"{}\": gpu{} has no PCIe link to a switch or root port, so no NIC can be attached "
                                       "next to it", host.source_file, gpu));
    r.pcie = *l;
    r.pcie.gbps = std::min(link_capacity_gbps(*l), nic_gbps);
    rails.push_back(r);
  }

  int numa_span = 0;  // sockets' NUMA indices per host, offset per host so they stay unique
  for (const auto& n : host.nodes) numa_span = std::max(numa_span, n.numa + 1);
  for (const auto& g : host.gpus) numa_span = std::max(numa_span, g.numa + 1);
  auto vid = [&](int64_t h, const std::string& v) {
    if (v.rfind("gpu", 0) == 0 && v.size() > 3 && std::all_of(v.begin() + 3, v.end(), ::isdigit))
      return "gpu" + std::to_string(h * G + std::stoll(v.substr(3)));
    return fmt::format("h{}-{}", h, v);
  };
  auto rail_id = [](int64_t h, int64_t k) { return fmt::format("h{}-rail{}", h, k); };

  m.gpus.clear();
  m.nodes.clear();
  m.links.clear();
  for (int64_t h = 0; h < hosts; ++h) {
    for (GpuSpec g : host.gpus) {
      g.id = int(h * G + g.id);
      if (g.numa >= 0) g.numa += int(h) * numa_span;
      g.uuid.clear();
      m.gpus.push_back(g);
    }
    for (NodeSpec n : host.nodes) {
      n.id = vid(h, n.id);
      if (n.numa >= 0) n.numa += int(h) * numa_span;
      m.nodes.push_back(n);
    }
    for (LinkSpec l : host.links) {
      l.a = vid(h, l.a);
      l.b = vid(h, l.b);
      m.links.push_back(l);
    }
    for (int64_t k = 0; k < nics; ++k) {
      NodeSpec nic;
      nic.id = rail_id(h, k);
      nic.kind = NodeKind::Nic;
      nic.name = fmt::format("NIC, rail {} ({:g} GB/s = {:g} Gb/s)", k, nic_gbps, nic_gbps * 8);
      m.nodes.push_back(nic);
      LinkSpec l = rails[size_t(k)].pcie;
      l.a = nic.id;
      l.b = vid(h, rails[size_t(k)].parent);
      m.links.push_back(l);
    }
  }
  for (int64_t a = 0; a < hosts; ++a)
    for (int64_t b = a + 1; b < hosts; ++b)
      for (int64_t ka = 0; ka < nics; ++ka)
        for (int64_t kb = 0; kb < nics; ++kb) {
          LinkSpec l;
          l.a = rail_id(a, ka);
          l.b = rail_id(b, kb);
          l.kind = LinkKind::Network;
          l.gbps = nic_gbps;
          l.latency_us = latency_us;
          m.links.push_back(l);
        }
  m.p2p_policy = host.p2p_policy;
  m.p2p.clear();
  if (m.description.empty())
    m.description = fmt::format("{} x \"{}\" ({} GPUs), {} NICs of {:g} GB/s per host, network as a full mesh",
                                hosts, host.name, hosts * G, nics, nic_gbps);
}

}  // namespace peerplan
