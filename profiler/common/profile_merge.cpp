#include "profiler/common/profile_merge.hpp"

#include <algorithm>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/common/summary.hpp"

namespace peerplan::profiler {

namespace {

int map_id(const std::map<int, int>& m, int id, const char* what) {
  if (id < 0) return id;  // the host side of h2d / d2h
  auto it = m.find(id);
  if (it == m.end())
    throw RuntimeError(std::string("MPI merge: a rank's ") + what + " names GPU " + std::to_string(id) +
                       ", which it does not own");
  return it->second;
}

std::string gpu_vertex(int id) { return "gpu" + std::to_string(id); }

// "gpu3" -> 3; anything else -> -1.
int gpu_of_vertex(const std::string& v) {
  if (v.rfind("gpu", 0) != 0 || v.size() == 3) return -1;
  for (size_t i = 3; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return -1;
  return std::stoi(v.substr(3));
}

}  // namespace

void append_measurements(Measurements& to, Measurements from) {
  for (auto& c : from.transfers) to.transfers.push_back(std::move(c));
  for (auto& l : from.latencies) to.latencies.push_back(l);
  for (auto& c : from.collectives) to.collectives.push_back(std::move(c));
  for (auto& c : from.peer_allreduce) to.peer_allreduce.push_back(std::move(c));
  for (auto& g : from.gemms) to.gemms.push_back(g);
  for (auto& a : from.attention) to.attention.push_back(a);
  for (auto& g : from.grouped_gemms) to.grouped_gemms.push_back(std::move(g));
  for (auto& e : from.expert_gemms) to.expert_gemms.push_back(std::move(e));
  for (auto& e : from.elementwise) to.elementwise.push_back(std::move(e));
  if (from.hbm_gbps.size() > to.hbm_gbps.size()) to.hbm_gbps.resize(from.hbm_gbps.size(), 0.0);
  for (size_t i = 0; i < from.hbm_gbps.size(); ++i)
    if (from.hbm_gbps[i] > 0) to.hbm_gbps[i] = from.hbm_gbps[i];
  if (to.launch_overhead_s == 0) to.launch_overhead_s = from.launch_overhead_s;
  if (!to.power_throttle) to.power_throttle = from.power_throttle;
  to.extra.merge_patch(from.extra);  // object keys (launch.gpuN, not_applicable.x) merge
}

void remap_gpu_ids(Measurements& ms, const std::map<int, int>& m) {
  for (auto& t : ms.transfers) {
    t.src = map_id(m, t.src, "transfer source");
    t.dst = map_id(m, t.dst, "transfer destination");
  }
  for (auto& l : ms.latencies) {
    l.src = map_id(m, l.src, "latency source");
    l.dst = map_id(m, l.dst, "latency destination");
  }
  for (auto& c : ms.collectives)
    for (int& g : c.gpus) g = map_id(m, g, "collective group");
  for (auto& c : ms.peer_allreduce)
    for (int& g : c.gpus) g = map_id(m, g, "peer all-reduce group");
  for (auto& g : ms.gemms) g.gpu = map_id(m, g.gpu, "GEMM");
  for (auto& a : ms.attention) a.gpu = map_id(m, a.gpu, "attention");
  for (auto& g : ms.grouped_gemms) g.gpu = map_id(m, g.gpu, "grouped GEMM");
  for (auto& e : ms.expert_gemms) e.gpu = map_id(m, e.gpu, "expert GEMM");
  for (auto& e : ms.elementwise) e.gpu = map_id(m, e.gpu, "elementwise kernel");
  // hbm_gbps is indexed by GPU; extra.launch is keyed "gpu<N>".
  std::vector<double> hbm;
  for (size_t i = 0; i < ms.hbm_gbps.size(); ++i) {
    if (ms.hbm_gbps[i] <= 0) continue;
    int g = map_id(m, int(i), "HBM figure");
    if (hbm.size() <= size_t(g)) hbm.resize(size_t(g) + 1, 0.0);
    hbm[size_t(g)] = ms.hbm_gbps[i];
  }
  ms.hbm_gbps = hbm;
  if (ms.extra.contains("launch") && ms.extra["launch"].is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [k, v] : ms.extra["launch"].items()) {
      int g = gpu_of_vertex(k);
      out[g >= 0 ? gpu_vertex(map_id(m, g, "launch figure")) : k] = v;
    }
    ms.extra["launch"] = out;
  }
}

std::string rank_result_to_json(const Measurements& ms) {
  Measurements copy = ms;
  nlohmann::json hbm = nlohmann::json::object();
  for (size_t i = 0; i < copy.hbm_gbps.size(); ++i)
    if (copy.hbm_gbps[i] > 0) hbm[std::to_string(i)] = copy.hbm_gbps[i];
  copy.hbm_gbps.clear();
  return nlohmann::json{{"measurements", measurements_to_json(copy)}, {"hbm_gbps_by_gpu", hbm}}.dump();
}

Measurements rank_result_from_json(const std::string& text, const std::string& origin) {
  json doc = parse_json_text(text, origin);
  JsonIn j(doc, origin);
  Measurements ms = parse_measurements(j.object("measurements"));
  JsonIn hbm = j.object("hbm_gbps_by_gpu");
  for (const auto& [key, value] : hbm.raw().items()) {
    int g = gpu_of_vertex("gpu" + key);
    if (g < 0) hbm.fail(key, "a GPU id (a non-negative integer) as key");
    if (ms.hbm_gbps.size() <= size_t(g)) ms.hbm_gbps.resize(size_t(g) + 1, 0.0);
    ms.hbm_gbps[size_t(g)] = hbm.positive(key);
  }
  return ms;
}

Machine merge_mpi_profile(const MergeInput& in) {
  const RankLayout& L = in.layout;
  const int n = L.size();
  const size_t hosts = L.hosts.size();
  if (in.host_machines.size() != hosts)
    throw RuntimeError("MPI merge: " + std::to_string(in.host_machines.size()) + " host discoveries for " +
                       std::to_string(hosts) + " hosts");
  if (in.rank_results.size() != size_t(n))
    throw RuntimeError("MPI merge: results of " + std::to_string(in.rank_results.size()) + " ranks, expected " +
                       std::to_string(n));
  const bool multi = hosts > 1;
  auto prefix = [&](size_t h, const std::string& id) { return multi ? "h" + std::to_string(h) + "." + id : id; };

  Machine out;
  const Machine& first = in.host_machines[0];
  out.origin = "measured";
  out.date = first.date;
  out.meta = first.meta;
  std::string host_names;
  for (size_t h = 0; h < hosts; ++h) host_names += (h ? "," : "") + in.host_machines[h].host;
  out.host = host_names;
  out.name = !in.name.empty() ? in.name : multi ? "mpi-" + std::to_string(hosts) + "hosts-" + std::to_string(n) + "gpus" : first.name;
  out.description = "measured by `mpirun -np " + std::to_string(n) + " peerplan profile --mpi` on " + host_names;

  // NUMA indices are machine-wide in the schema (one cpu_socket per index): host h's are shifted
  // by the node counts of the hosts before it (meta.mpi.hosts[h].numa_offset undoes it).
  std::vector<int> numa_offset(hosts, 0);
  for (size_t h = 1; h < hosts; ++h) {
    int top = -1;
    for (const auto& node : in.host_machines[h - 1].nodes) top = std::max(top, node.numa);
    for (const auto& g : in.host_machines[h - 1].gpus) top = std::max(top, g.numa);
    numa_offset[h] = numa_offset[h - 1] + top + 1;
  }
  auto shift = [&](size_t h, int numa) { return numa < 0 ? numa : numa + numa_offset[h]; };

  // GPUs in rank order; local ordinal -> global id per host.
  std::vector<std::map<int, std::vector<int>>> global_of(hosts);  // several only when ranks share a GPU
  for (int r = 0; r < n; ++r) {
    size_t h = size_t(L.host_of[size_t(r)]);
    const auto& hm = in.host_machines[h];
    int dev = L.ranks[size_t(r)].device;
    auto it = std::find_if(hm.gpus.begin(), hm.gpus.end(), [&](const GpuSpec& g) { return g.id == dev; });
    if (it == hm.gpus.end())
      throw RuntimeError("MPI merge: rank " + std::to_string(r) + " uses GPU " + std::to_string(dev) + " of " +
                         hm.host + ", which that host's discovery does not list");
    GpuSpec g = *it;
    g.id = r;
    g.numa = shift(h, g.numa);
    out.gpus.push_back(g);
    global_of[h][dev].push_back(r);
  }

  // Vertices and links of each host; links to GPUs no rank uses are dropped with their GPU.
  std::vector<std::string> host_nic(hosts);
  for (size_t h = 0; h < hosts; ++h) {
    const auto& hm = in.host_machines[h];
    for (const auto& node : hm.nodes) {
      NodeSpec s = node;
      s.id = prefix(h, node.id);
      s.numa = shift(h, node.numa);
      if (node.kind == NodeKind::Nic && host_nic[h].empty()) host_nic[h] = s.id;
      out.nodes.push_back(s);
    }
    auto rename = [&](const std::string& v) -> std::vector<std::string> {
      int g = gpu_of_vertex(v);
      if (g < 0) return {prefix(h, v)};
      std::vector<std::string> out;
      if (auto it = global_of[h].find(g); it != global_of[h].end())
        for (int r : it->second) out.push_back(gpu_vertex(r));
      return out;  // empty: no rank uses this GPU
    };
    for (const auto& l : hm.links)
      for (const auto& a : rename(l.a))
        for (const auto& b : rename(l.b)) {
          LinkSpec s = l;
          s.a = a;
          s.b = b;
          out.links.push_back(s);
        }
  }

  // Peer capability: from each host's discovery within a host; none across hosts.
  out.p2p.assign(size_t(n), std::vector<P2PInfo>(size_t(n)));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      if (!L.same_host(i, j)) {
        out.p2p[size_t(i)][size_t(j)].functional = false;
        out.p2p[size_t(i)][size_t(j)].note = "different hosts: network";
        continue;
      }
      const auto& hm = in.host_machines[size_t(L.host_of[size_t(i)])];
      size_t di = size_t(L.ranks[size_t(i)].device), dj = size_t(L.ranks[size_t(j)].device);
      if (di == dj && L.shared_gpus) {
        auto& p = out.p2p[size_t(i)][size_t(j)];
        p.access = true;
        p.functional = true;
        p.note = "same GPU (PEERPLAN_MPI_SHARE_GPU smoke test)";
        continue;
      }
      if (di < hm.p2p.size() && dj < hm.p2p[di].size()) out.p2p[size_t(i)][size_t(j)] = hm.p2p[di][dj];
    }

  // Measurements: concatenated; per-GPU figures are disjoint by construction.
  Measurements ms;
  ms.meta = first.measurements ? first.measurements->meta : nlohmann::json::object();
  for (int r = 0; r < n; ++r) {
    if (r == 0) ms.launch_overhead_s = in.rank_results[0].launch_overhead_s;  // GPU 0's, as single-process
    append_measurements(ms, in.rank_results[size_t(r)]);
  }

  // Network: one link per pair of hosts between their first NICs (a synthetic NIC where hwloc found
  // none), priced by the measured cross-host send/recv bandwidth where there is one.
  if (multi) {
    for (size_t h = 0; h < hosts; ++h)
      if (host_nic[h].empty()) {
        host_nic[h] = prefix(h, "nic");
        out.nodes.push_back(NodeSpec{host_nic[h], NodeKind::Nic, -1, "network interface (not found by hwloc)", 0});
        // Attach it where a NIC would sit: the host's first CPU socket, else its first GPU.
        std::string at;
        for (const auto& node : in.host_machines[h].nodes)
          if (node.kind == NodeKind::CpuSocket) { at = prefix(h, node.id); break; }
        if (at.empty()) at = gpu_vertex(L.ranks_on(int(h)).front());
        LinkSpec l;
        l.a = at;
        l.b = host_nic[h];
        l.kind = LinkKind::Pcie;
        l.pcie_gen = 5;
        l.pcie_width = 16;
        out.links.push_back(l);
      }
    for (size_t a = 0; a < hosts; ++a)
      for (size_t b = a + 1; b < hosts; ++b) {
        double best = 0;
        for (const auto& t : ms.transfers)
          if (t.mode == "net_nccl" && t.src >= 0 && t.dst >= 0) {
            size_t hs = size_t(L.host_of[size_t(t.src)]), hd = size_t(L.host_of[size_t(t.dst)]);
            if ((hs == a && hd == b) || (hs == b && hd == a)) best = std::max(best, curve_peak(t.points).gbps_best);
          }
        LinkSpec l;
        l.a = host_nic[a];
        l.b = host_nic[b];
        l.kind = LinkKind::Network;
        l.gbps = best > 0 ? best : kNominalNetworkGbps;
        out.links.push_back(l);
      }
  }

  nlohmann::json mpi = in.how;
  mpi["ranks"] = nlohmann::json::array();
  for (const auto& r : L.ranks) mpi["ranks"].push_back(rank_info_to_json(r));
  mpi["hosts"] = nlohmann::json::array();
  for (size_t h = 0; h < hosts; ++h) {
    const auto& hm = in.host_machines[h];
    mpi["hosts"].push_back({{"host", hm.host},
                            {"gpus", L.ranks_on(int(h))},
                            {"driver", hm.meta.value("driver", "unknown")},
                            {"vertex_prefix", prefix(h, "")},
                            {"numa_offset", numa_offset[h]}});
  }
  out.meta["mpi"] = mpi;
  ms.meta["launcher"] = "mpirun -np " + std::to_string(n) + " (one rank per GPU)";
  out.measurements = std::move(ms);
  validate_machine(out);
  return out;
}

}  // namespace peerplan::profiler
