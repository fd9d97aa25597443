// The Boost.Graph model of a machine: construction, routes, path types, groups.
#include "planner/topology/topology.hpp"

#include <algorithm>
#include <map>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>

#include "planner/core/error.hpp"
#include "planner/topology/machine_check.hpp"

namespace peerplan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Which edges a path may use: memory edges never; NVLink and/or PCIe+SMP as asked.
struct EdgeFilter {
  const TopoGraph* g = nullptr;
  bool nvlink = false, pcie_smp = false;
  bool operator()(Edge e) const {
    const EdgeProps& p = (*g)[e];
    if (p.memory_bus) return false;
    if (p.kind == LinkKind::NvLink) return nvlink;
    if (p.kind == LinkKind::Pcie || p.kind == LinkKind::Smp) return pcie_smp;
    return false;
  }
};

// Which vertices a path may pass through: GPUs and NICs do not forward traffic; NVLink paths
// may only pass through NVSwitches (peer copies are not relayed by a third GPU).
struct VertexFilter {
  const TopoGraph* g = nullptr;
  Vertex s{}, t{};
  bool nvlink = false;
  bool operator()(Vertex v) const {
    if (v == s || v == t) return true;
    NodeKind k = (*g)[v].kind;
    if (k == NodeKind::Gpu || k == NodeKind::Nic) return false;
    return nvlink ? k == NodeKind::NvSwitch : k != NodeKind::NvSwitch;
  }
};

struct PredecessorEdges : boost::default_bfs_visitor {
  std::vector<Edge>* pred = nullptr;
  std::vector<char>* reached = nullptr;
  template <class G>
  void tree_edge(Edge e, const G& g) const {
    Vertex v = boost::target(e, g);
    (*pred)[v] = e;
    (*reached)[v] = 1;
  }
};

}  // namespace

const char* to_string(TransferMode m) {
  switch (m) {
    case TransferMode::PeerCopyEngine: return "peer";
    case TransferMode::PeerKernel: return "peer_kernel";
    case TransferMode::RuntimeNoP2P: return "nop2p";
    case TransferMode::HostStaged: return "host_staged";
  }
  return "?";
}

std::optional<TransferMode> transfer_mode_from_string(const std::string& s) {
  for (TransferMode m : {TransferMode::PeerCopyEngine, TransferMode::PeerKernel, TransferMode::RuntimeNoP2P,
                         TransferMode::HostStaged})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

std::string to_string(PathType t, int nvlinks) {
  switch (t) {
    case PathType::Self: return "X";
    case PathType::NV: return "NV" + std::to_string(nvlinks);
    case PathType::PIX: return "PIX";
    case PathType::PXB: return "PXB";
    case PathType::PHB: return "PHB";
    case PathType::NODE: return "NODE";
    case PathType::SYS: return "SYS";
    case PathType::None: return "-";
  }
  return "?";
}

Topology::Topology(const Machine& m) : machine_(m) {
  validate_structure(machine_);
  const std::string& f = machine_.source_file;
  const int n = machine_.gpu_count();

  for (const auto& gs : machine_.gpus) {
    Vertex v = boost::add_vertex(VertexProps{NodeKind::Gpu, gs.node_id(), gs.id, gs.numa}, g_);
    gpu_vertices_.push_back(v);
  }
  for (const auto& ns : machine_.nodes) boost::add_vertex(VertexProps{ns.kind, ns.id, -1, ns.numa}, g_);
  for (Vertex v = 0; v < boost::num_vertices(g_); ++v) vertex_by_id_.emplace(g_[v].id, v);

  auto add_edge = [&](Vertex a, Vertex b, EdgeProps p) {
    p.index = int(edges_.size());
    edges_.push_back(boost::add_edge(a, b, p, g_).first);
  };
  for (const auto& l : machine_.links) {
    Vertex a = *find_vertex(l.a), b = *find_vertex(l.b);
    EdgeProps p;
    p.kind = l.kind;
    p.capacity_Bps = link_capacity_gbps(l) * 1e9;
    p.latency_s = link_latency_s(l);
    p.nvlinks = l.nvlinks;
    p.pcie_gen = l.pcie_gen;
    p.pcie_width = l.pcie_width;
    add_edge(a, b, p);  // one directed edge per direction: the directions never contend
    add_edge(b, a, p);
  }
  memory_edge_.assign(boost::num_vertices(g_), -1);
  for (size_t i = 0; i < machine_.nodes.size(); ++i) {
    const NodeSpec& ns = machine_.nodes[i];
    if (ns.kind != NodeKind::CpuSocket) continue;
    Vertex v = *find_vertex(ns.id);
    EdgeProps p;
    p.kind = LinkKind::Smp;
    p.capacity_Bps = ns.mem_gbps > 0 ? ns.mem_gbps * 1e9 : kInf;  // unknown: not a bottleneck
    p.latency_s = kNominalMemoryS;
    p.memory_bus = true;
    memory_edge_[v] = int(edges_.size());
    add_edge(v, v, p);
  }

  // Hosts: connected components without network links (one host unless the machine is a merged
  // multi-host profile).
  {
    const size_t nv = boost::num_vertices(g_);
    std::vector<size_t> root(nv);
    std::iota(root.begin(), root.end(), size_t(0));
    std::function<size_t(size_t)> find = [&](size_t x) { return root[x] == x ? x : root[x] = find(root[x]); };
    for (Edge e : edges_)
      if (g_[e].kind != LinkKind::Network) root[find(boost::source(e, g_))] = find(boost::target(e, g_));
    std::map<size_t, int> index;
    vertex_host_.assign(nv, -1);
    for (int gpu = 0; gpu < n; ++gpu) {
      size_t r = find(gpu_vertices_[size_t(gpu)]);
      auto it = index.emplace(r, int(index.size())).first;
      host_of_.push_back(it->second);
    }
    for (size_t v = 0; v < nv; ++v)
      if (auto it = index.find(find(v)); it != index.end()) vertex_host_[v] = it->second;
  }

  build_path_trees();

  // Each GPU's socket: the nearest CPU socket reached over PCIe without crossing an SMP link.
  bool any_socket = false;
  for (const auto& ns : machine_.nodes) any_socket |= ns.kind == NodeKind::CpuSocket;
  if (!any_socket)
    throw InputError(f, "nodes", "expected at least one cpu_socket node: host-staged transfers go through a socket's memory");
  for (int gpu = 0; gpu < n; ++gpu) {
    std::optional<Vertex> best;
    size_t best_len = 0;
    for (const auto& ns : machine_.nodes) {
      if (ns.kind != NodeKind::CpuSocket) continue;
      Vertex sv = *find_vertex(ns.id);
      auto p = pcie_path(gpu_vertices_[size_t(gpu)], sv);
      if (p.empty()) continue;
      bool crosses_smp = std::any_of(p.begin(), p.end(), [&](int e) { return edge_props(e).kind == LinkKind::Smp; });
      if (crosses_smp) continue;
      if (!best || p.size() < best_len) { best = sv; best_len = p.size(); }
    }
    if (!best)
      throw InputError(f, "links", "gpu" + std::to_string(gpu) +
                                       " has no PCIe path to a cpu_socket; add pcie links from it (or its switch) "
                                       "to a host_bridge or cpu_socket");
    socket_of_.push_back(*best);
    if (machine_.gpus[size_t(gpu)].numa < 0) {
      machine_.gpus[size_t(gpu)].numa = g_[*best].numa;
      g_[gpu_vertices_[size_t(gpu)]].numa = g_[*best].numa;
    }
  }

  // Resolve a p2p policy into the directed matrix.
  if (machine_.p2p.empty()) {
    if (machine_.p2p_policy.empty()) machine_.p2p_policy = "all";
    const std::string& pol = machine_.p2p_policy;
    machine_.p2p.assign(size_t(n), std::vector<P2PInfo>(size_t(n)));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        PathType t = path_type(a, b);
        // GPUs of different hosts (a cluster) never have peer access: CUDA P2P does not cross a NIC.
        const bool other_host = host_of(a) != host_of(b);
        bool ok = !other_host && (pol == "all" || (pol == "nvlink_only" && t == PathType::NV) ||
                                  (pol == "same_switch" && (t == PathType::NV || t == PathType::PIX || t == PathType::PXB)));
        P2PInfo& p = machine_.p2p[size_t(a)][size_t(b)];
        p.access = ok;
        if (other_host)
          p.note = "GPUs on different hosts: no peer access across the network";
        else if (!ok)
          p.note = "no peer access under p2p policy \"" + pol + "\" (path " + to_string(t, nvlinks_between(a, b)) + ")";
      }
  }
}

int Topology::gpu_count() const { return machine_.gpu_count(); }

std::string Topology::edge_name(int index) const {
  Edge e = edge(index);
  const EdgeProps& p = g_[e];
  if (p.memory_bus) return g_[boost::source(e, g_)].id + ".memory";
  return g_[boost::source(e, g_)].id + "->" + g_[boost::target(e, g_)].id;
}

Vertex Topology::gpu_vertex(int gpu) const {
  check_gpu(gpu);
  return gpu_vertices_[size_t(gpu)];
}

std::optional<Vertex> Topology::find_vertex(const std::string& id) const {
  if (auto it = vertex_by_id_.find(id); it != vertex_by_id_.end()) return it->second;
  return std::nullopt;
}

void Topology::build_path_trees() {
  const size_t nv = boost::num_vertices(g_);
  for (auto& t : trees_) t.assign(nv, {});
  std::vector<Vertex> queue;
  for (Vertex s = 0; s < nv; ++s) {
    NodeKind k = g_[s].kind;
    if (k != NodeKind::Gpu && k != NodeKind::CpuSocket && k != NodeKind::Nic) continue;
    for (int nvlink = 1; nvlink >= 0; --nvlink) {
      // As shortest_path's filtered search: edges of the allowed kinds; every vertex may be an
      // end point, but only the source and allowed intermediates are expanded.
      EdgeFilter ef{&g_, nvlink == 1, nvlink == 0};
      std::vector<int>& pred = trees_[nvlink == 1 ? 0 : 1][s];
      pred.assign(nv, -1);
      std::vector<char> seen(nv, 0);
      seen[s] = 1;
      queue.assign(1, s);
      for (size_t head = 0; head < queue.size(); ++head) {
        Vertex u = queue[head];
        if (u != s) {
          NodeKind ku = g_[u].kind;
          if (ku == NodeKind::Gpu || ku == NodeKind::Nic) continue;
          if (nvlink == 1 ? ku != NodeKind::NvSwitch : ku == NodeKind::NvSwitch) continue;
        }
        for (Edge e : boost::make_iterator_range(boost::out_edges(u, g_))) {
          if (!ef(e)) continue;
          Vertex v = boost::target(e, g_);
          if (seen[v]) continue;
          seen[v] = 1;
          pred[v] = g_[e].index;
          queue.push_back(v);
        }
      }
    }
  }
  const int n = gpu_count();
  nearest_nic_.assign(size_t(n), -1);
  nearest_nic_path_.assign(size_t(n), {});
  // Each GPU's NIC: the nearest on its host (fewest PCIe hops); among equally near NICs the one
  // fewest GPUs use so far, so two GPUs behind one switch with two NICs take one each (one rail
  // per GPU, as NCCL assigns them), and otherwise the first in the machine's order.
  std::vector<Vertex> nics;
  for (Vertex v = 0; v < nv; ++v)
    if (g_[v].kind == NodeKind::Nic) nics.push_back(v);
  std::map<Vertex, int> users;
  for (int g = 0; g < n && !nics.empty(); ++g) {
    for (Vertex v : nics) {
      if (vertex_host_[v] != host_of(g)) continue;
      auto p = pcie_path(gpu_vertices_[size_t(g)], v);
      if (p.empty()) continue;
      const auto& best = nearest_nic_path_[size_t(g)];
      if (nearest_nic_[size_t(g)] < 0 || p.size() < best.size() ||
          (p.size() == best.size() && users[v] < users[Vertex(nearest_nic_[size_t(g)])])) {
        nearest_nic_[size_t(g)] = int(v);
        nearest_nic_path_[size_t(g)] = std::move(p);
      }
    }
    if (nearest_nic_[size_t(g)] >= 0) ++users[Vertex(nearest_nic_[size_t(g)])];
  }
  for (Edge e : edges_)
    if (g_[e].kind == LinkKind::Network) network_edge_.emplace(std::make_pair(boost::source(e, g_), boost::target(e, g_)), g_[e].index);
}

std::vector<int> Topology::tree_path(const std::vector<int>& pred, Vertex s, Vertex t) const {
  if (pred[t] < 0) return {};
  std::vector<int> path;
  for (Vertex v = t; v != s; v = boost::source(edge(pred[v]), g_)) path.push_back(pred[v]);
  std::reverse(path.begin(), path.end());
  return path;
}

void Topology::check_gpu(int g) const {
  if (g < 0 || g >= gpu_count())
    throw InputError(machine_.source_file, "gpu",
                     "GPU " + std::to_string(g) + " does not exist; machine \"" + machine_.name + "\" has GPUs 0.." +
                         std::to_string(gpu_count() - 1));
}

Vertex Topology::socket_vertex(int gpu) const {
  check_gpu(gpu);
  return socket_of_[size_t(gpu)];
}

int Topology::socket_numa(int gpu) const { return g_[socket_vertex(gpu)].numa; }

std::vector<int> Topology::shortest_path(Vertex s, Vertex t, bool nvlink, bool pcie_smp) const {
  if (s == t) return {};
  if (nvlink != pcie_smp) {
    const auto& trees = trees_[nvlink ? 0 : 1];
    if (s < trees.size() && !trees[s].empty()) return tree_path(trees[s], s, t);
  }
  EdgeFilter ef{&g_, nvlink, pcie_smp};
  VertexFilter vf{&g_, s, t, nvlink};
  boost::filtered_graph<TopoGraph, EdgeFilter, VertexFilter> fg(g_, ef, vf);
  std::vector<Edge> pred(boost::num_vertices(g_));
  std::vector<char> reached(boost::num_vertices(g_), 0);
  PredecessorEdges vis;
  vis.pred = &pred;
  vis.reached = &reached;
  boost::breadth_first_search(fg, s, boost::visitor(vis));
  if (!reached[t]) return {};
  std::vector<int> path;
  for (Vertex v = t; v != s; v = boost::source(pred[v], g_)) path.push_back(g_[pred[v]].index);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int> Topology::nvlink_path(int a, int b) const {
  return shortest_path(gpu_vertex(a), gpu_vertex(b), true, false);
}

std::vector<int> Topology::pcie_path(Vertex s, Vertex t) const { return shortest_path(s, t, false, true); }

PathType Topology::pcie_path_type(int a, int b) const {
  if (a == b) return PathType::Self;
  auto p = pcie_path(gpu_vertex(a), gpu_vertex(b));
  if (p.empty()) return PathType::None;
  int switches = 0, bridges = 0, cpus = 0;
  bool smp = false;
  for (size_t i = 0; i < p.size(); ++i) {
    Edge e = edge(p[i]);
    if (g_[e].kind == LinkKind::Smp) smp = true;
    if (i + 1 == p.size()) break;
    switch (g_[boost::target(e, g_)].kind) {
      case NodeKind::PcieSwitch: ++switches; break;
      case NodeKind::HostBridge: ++bridges; break;
      case NodeKind::CpuSocket: ++cpus; break;
      default: break;
    }
  }
  if (smp) return PathType::SYS;
  if (cpus > 0) return bridges >= 2 ? PathType::NODE : PathType::PHB;
  if (bridges > 0) return PathType::PHB;
  return switches > 1 ? PathType::PXB : PathType::PIX;
}

PathType Topology::path_type(int a, int b) const {
  if (a == b) {
    check_gpu(a);
    return PathType::Self;
  }
  if (!nvlink_path(a, b).empty()) return PathType::NV;
  return pcie_path_type(a, b);
}

int Topology::nvlinks_between(int a, int b) const {
  if (a == b) return 0;
  auto p = nvlink_path(a, b);
  if (p.empty()) return 0;
  return std::min(edge_props(p.front()).nvlinks, edge_props(p.back()).nvlinks);
}

bool Topology::p2p_usable(int src, int dst) const {
  check_gpu(src);
  check_gpu(dst);
  if (src == dst) return true;
  return machine_.p2p[size_t(src)][size_t(dst)].usable();
}

std::string Topology::p2p_why_not(int src, int dst) const {
  if (p2p_usable(src, dst)) return "";
  const P2PInfo& p = machine_.p2p[size_t(src)][size_t(dst)];
  std::string base = "GPU " + std::to_string(src) + " cannot access GPU " + std::to_string(dst) + " as a peer";
  if (p.access && p.functional && !*p.functional)
    return base + ": reported capable but failed the functional check" + (p.note.empty() ? "" : " (" + p.note + ")");
  return base + (p.note.empty() ? " (cudaDeviceCanAccessPeer says no)" : ": " + p.note);
}

Route Topology::make_route(std::vector<int> edges, TransferMode mode, PathType type, int nvlinks) const {
  Route r;
  r.valid = true;
  r.mode = mode;
  r.type = type;
  r.nvlinks = nvlinks;
  r.edges = std::move(edges);
  r.bottleneck_Bps = kInf;
  // An edge listed k times (host memory: write then read) carries k times the flow's rate.
  for (int e : r.edges) {
    int k = int(std::count(r.edges.begin(), r.edges.end(), e));
    r.bottleneck_Bps = std::min(r.bottleneck_Bps, edge_props(e).capacity_Bps / k);
    r.latency_s += edge_props(e).latency_s;
  }
  if (!r.edges.empty()) {
    r.describe = g_[boost::source(edge(r.edges.front()), g_)].id;
    bool in_memory = false;
    for (int e : r.edges) {
      if (edge_props(e).memory_bus) {
        if (!in_memory) r.describe += " [host memory: write, read]";
        in_memory = true;
        continue;
      }
      in_memory = false;
      r.describe += " -> " + g_[boost::target(edge(e), g_)].id;
    }
  }
  return r;
}

Route Topology::route(int src, int dst, TransferMode mode) const {
  check_gpu(src);
  check_gpu(dst);
  if (mode == TransferMode::PeerCopyEngine || mode == TransferMode::PeerKernel) {
    if (src == dst) {
      Route r = make_route({}, mode, PathType::Self, 0);
      r.describe = "gpu" + std::to_string(src) + " (local)";
      return r;
    }
    if (!p2p_usable(src, dst)) {
      Route r;
      r.mode = mode;
      r.type = path_type(src, dst);
      r.nvlinks = nvlinks_between(src, dst);
      r.why_invalid = p2p_why_not(src, dst) + "; use host_staged or nop2p";
      return r;
    }
    auto nv = nvlink_path(src, dst);
    if (!nv.empty()) return make_route(nv, mode, PathType::NV, nvlinks_between(src, dst));
    auto pc = pcie_path(gpu_vertex(src), gpu_vertex(dst));
    if (pc.empty()) {
      Route r;
      r.mode = mode;
      r.why_invalid = "no NVLink or PCIe path between GPU " + std::to_string(src) + " and GPU " + std::to_string(dst);
      return r;
    }
    return make_route(pc, mode, pcie_path_type(src, dst), 0);
  }
  if (host_of(src) != host_of(dst)) return network_route(src, dst, mode);
  // Host-staged and the runtime's no-P2P path: up to the source's socket, through its memory
  // (written, then read), then down to the destination, crossing the SMP link if it is elsewhere.
  Vertex sock = socket_vertex(src);
  auto up = pcie_path(gpu_vertex(src), sock);
  auto down = pcie_path(sock, gpu_vertex(dst));
  if (down.empty()) {
    Route r;
    r.mode = mode;
    r.why_invalid = "no PCIe path from socket " + g_[sock].id + " to GPU " + std::to_string(dst);
    return r;
  }
  std::vector<int> edges = up;
  edges.push_back(memory_edge_[sock]);
  edges.push_back(memory_edge_[sock]);
  edges.insert(edges.end(), down.begin(), down.end());
  return make_route(edges, mode, pcie_path_type(src, dst), 0);
}

Route Topology::network_route(int src, int dst, TransferMode mode) const {
  Route bad;
  bad.mode = mode;
  // The NIC nearest (fewest PCIe hops) to a GPU on its host (found in the constructor).
  auto nearest_nic = [&](int gpu, std::vector<int>* path) -> std::optional<Vertex> {
    if (nearest_nic_[size_t(gpu)] < 0) return std::nullopt;
    *path = nearest_nic_path_[size_t(gpu)];
    return Vertex(nearest_nic_[size_t(gpu)]);
  };
  std::vector<int> up, down_rev;
  auto a = nearest_nic(src, &up);
  auto b = nearest_nic(dst, &down_rev);
  if (!a || !b) {
    bad.why_invalid = "GPU " + std::to_string(a ? dst : src) + "'s host has no NIC with a PCIe path to it (network route)";
    return bad;
  }
  std::optional<int> net;
  if (auto it = network_edge_.find({*a, *b}); it != network_edge_.end()) net = it->second;
  if (!net) {
    bad.why_invalid = "no network link from " + g_[*a].id + " to " + g_[*b].id;
    return bad;
  }
  // The path to dst was found from dst's side: its reverse edges lead from the NIC down to dst.
  auto down = pcie_path(*b, gpu_vertex(dst));
  std::vector<int> edges = up;
  edges.push_back(*net);
  edges.insert(edges.end(), down.begin(), down.end());
  Route r = make_route(edges, mode, PathType::None, 0);
  r.network = true;
  return r;
}

namespace {

std::vector<std::vector<int>> groups_from_keys(const std::vector<int>& key) {
  std::vector<std::vector<int>> out;
  std::vector<int> seen_keys;
  for (size_t i = 0; i < key.size(); ++i) {
    auto it = std::find(seen_keys.begin(), seen_keys.end(), key[i]);
    if (it == seen_keys.end()) {
      seen_keys.push_back(key[i]);
      out.push_back({int(i)});
    } else {
      out[size_t(it - seen_keys.begin())].push_back(int(i));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::vector<int>> Topology::nvlink_islands() const {
  const int n = gpu_count();
  std::vector<int> root(static_cast<size_t>(n));
  std::iota(root.begin(), root.end(), 0);
  std::function<int(int)> find = [&](int x) { return root[size_t(x)] == x ? x : root[size_t(x)] = find(root[size_t(x)]); };
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (!nvlink_path(a, b).empty()) root[size_t(find(b))] = find(a);
  std::vector<int> key(static_cast<size_t>(n));
  for (int a = 0; a < n; ++a) key[size_t(a)] = find(a);
  return groups_from_keys(key);
}

std::vector<std::vector<int>> Topology::switch_groups() const {
  // Key: the first PCIe switch on the GPU's way to its socket; a GPU on a root port alone is its
  // own group.
  const int n = gpu_count();
  std::vector<int> key(static_cast<size_t>(n));
  for (int a = 0; a < n; ++a) {
    key[size_t(a)] = -1 - a;
    for (int e : pcie_path(gpu_vertex(a), socket_vertex(a))) {
      Vertex t = boost::target(edge(e), g_);
      if (g_[t].kind == NodeKind::PcieSwitch) {
        key[size_t(a)] = int(t);
        break;
      }
    }
  }
  return groups_from_keys(key);
}

std::vector<std::vector<int>> Topology::socket_groups() const {
  const int n = gpu_count();
  std::vector<int> key(static_cast<size_t>(n));
  for (int a = 0; a < n; ++a) key[size_t(a)] = int(socket_vertex(a));
  return groups_from_keys(key);
}

}  // namespace peerplan
