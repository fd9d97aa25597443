// Machine schema: JSON parsing, validation, serialisation (docs/schema.md).
#include "planner/topology/machine.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/topology/machine_check.hpp"
#include "planner/topology/machine_cluster.hpp"

namespace peerplan {

namespace fs = std::filesystem;

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::Gpu: return "gpu";
    case NodeKind::PcieSwitch: return "pcie_switch";
    case NodeKind::HostBridge: return "host_bridge";
    case NodeKind::CpuSocket: return "cpu_socket";
    case NodeKind::NvSwitch: return "nvswitch";
    case NodeKind::Nic: return "nic";
  }
  return "?";
}

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::NvLink: return "nvlink";
    case LinkKind::Pcie: return "pcie";
    case LinkKind::Smp: return "smp";
    case LinkKind::Network: return "network";
  }
  return "?";
}

std::optional<NodeKind> node_kind_from_string(const std::string& s) {
  for (NodeKind k : {NodeKind::Gpu, NodeKind::PcieSwitch, NodeKind::HostBridge, NodeKind::CpuSocket,
                     NodeKind::NvSwitch, NodeKind::Nic})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

std::optional<LinkKind> link_kind_from_string(const std::string& s) {
  for (LinkKind k : {LinkKind::NvLink, LinkKind::Pcie, LinkKind::Smp, LinkKind::Network})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

double pcie_lane_gbps(int gen) {
  // GT/s per lane x line encoding / 8 bits: the per-direction data rate of one lane.
  switch (gen) {
    case 1: return 2.5 * 0.8 / 8;
    case 2: return 5.0 * 0.8 / 8;
    case 3: return 8.0 * 128.0 / 130.0 / 8;
    case 4: return 16.0 * 128.0 / 130.0 / 8;
    case 5: return 32.0 * 128.0 / 130.0 / 8;
    case 6: return 64.0 * 242.0 / 256.0 / 8;
    default: return 0;
  }
}

double link_capacity_gbps(const LinkSpec& l) {
  if (l.gbps > 0) return l.gbps;
  if (l.nvlinks > 0 && l.gbps_per_link > 0) return l.nvlinks * l.gbps_per_link;
  if (l.pcie_gen > 0 && l.pcie_width > 0) return pcie_lane_gbps(l.pcie_gen) * l.pcie_width;
  return 0;
}

double link_latency_s(const LinkSpec& l) {
  if (l.latency_us > 0) return l.latency_us * 1e-6;
  switch (l.kind) {
    case LinkKind::NvLink: return kNominalNvlinkHopS;
    case LinkKind::Pcie: return kNominalPcieHopS;
    case LinkKind::Smp: return kNominalSmpHopS;
    case LinkKind::Network: return kNominalNetworkHopS;
  }
  return 0;
}

bool fused_add_norm(const Machine& m) {
  if (!m.measurements) return true;
  if (m.meta.value(kExecutorNormsKey, std::string()) == kFusedAddNorm) return true;
  for (const ElementwiseTime& e : m.measurements->elementwise)
    if (e.kind == "add_rms_norm") return true;
  return false;
}

namespace {

const std::set<std::string> kPolicies = {"all", "nvlink_only", "same_switch", "none"};

P2PInfo parse_p2p_cell(const JsonIn& c) {
  P2PInfo p;
  if (c.raw().is_boolean()) {
    p.access = c.raw().get<bool>();
    return p;
  }
  if (!c.is_object()) c.fail("", "expected true/false or an object {\"access\": ...}");
  p.access = c.boolean("access");
  p.perf_rank = int(c.integer_or("perf_rank", -1));
  p.atomics = c.boolean_or("atomics", false);
  if (c.has("functional")) p.functional = c.boolean("functional");
  p.note = c.str_or("note", "");
  return p;
}

void parse_p2p(const JsonIn& r, Machine& m) {
  if (!r.has("p2p")) {
    m.p2p_policy = "all";
    return;
  }
  JsonIn p = r.at("p2p");
  if (p.raw().is_string()) {
    std::string s = p.as_str();
    if (!kPolicies.count(s))
      r.fail("p2p", "unknown policy \"" + s + "\"; expected \"all\", \"nvlink_only\", \"same_switch\", \"none\" or an N x N matrix");
    m.p2p_policy = s;
    return;
  }
  if (!p.is_array()) r.fail("p2p", "expected a policy string or an N x N matrix of booleans/objects");
  size_t n = m.gpus.size();
  if (p.size() != n)
    r.fail("p2p", "expected " + std::to_string(n) + " rows (one per GPU), found " + std::to_string(p.size()));
  m.p2p.assign(n, std::vector<P2PInfo>(n));
  for (size_t i = 0; i < n; ++i) {
    JsonIn row = p[i];
    if (!row.is_array() || row.size() != n)
      row.fail("", "expected a row of " + std::to_string(n) + " cells (the matrix must be square, one column per GPU)");
    for (size_t k = 0; k < n; ++k) {
      JsonIn c = row[k];
      if (i == k) continue;  // diagonal unused
      if (c.raw().is_null()) c.fail("", "expected true/false or an object; null is allowed on the diagonal only");
      m.p2p[i][k] = parse_p2p_cell(c);
    }
  }
}

// Measurements name GPUs by id: they must exist in this machine.
void check_measurement_gpus(const JsonIn& r, const Machine& m) {
  const int n = m.gpu_count();
  JsonIn ms = r.object("measurements");
  auto check = [&](const JsonIn& o, const std::string& key, bool host_ok) {
    if (!o.has(key)) return;
    int64_t v = o.integer(key);
    if (v >= n || v < (host_ok ? -1 : 0))
      o.fail(key, "GPU " + std::to_string(v) + " does not exist; this machine has GPUs 0.." + std::to_string(n - 1) +
                      (host_ok ? " (-1 = host)" : ""));
  };
  auto each = [&](const char* key, auto fn) {
    if (auto a = ms.opt(key))
      for (size_t i = 0; i < a->size(); ++i) fn((*a)[i]);
  };
  each("transfers", [&](const JsonIn& t) { check(t, "src", true); check(t, "dst", true); });
  each("latencies", [&](const JsonIn& t) { check(t, "src", true); check(t, "dst", true); });
  each("gemms", [&](const JsonIn& t) { check(t, "gpu", false); });
  each("attention", [&](const JsonIn& t) { check(t, "gpu", false); });
  each("grouped_gemms", [&](const JsonIn& t) { check(t, "gpu", false); });
  each("expert_gemms", [&](const JsonIn& t) { check(t, "gpu", false); });
  each("elementwise", [&](const JsonIn& t) { check(t, "gpu", false); });
  each("collectives", [&](const JsonIn& t) {
    JsonIn g = t.array("gpus");
    for (size_t i = 0; i < g.size(); ++i) {
      int64_t v = g[i].as_integer();
      if (v < 0 || v >= n) g[i].fail("", "GPU " + std::to_string(v) + " does not exist; this machine has GPUs 0.." +
                                              std::to_string(n - 1));
    }
  });
  if (auto h = ms.opt("hbm_gbps"))
    if (h->size() > size_t(n)) ms.fail("hbm_gbps", "expected at most one figure per GPU (" + std::to_string(n) + ")");
}

std::vector<FigureSource> parse_sources(const JsonIn& a) {
  if (!a.is_array()) a.fail("", "expected an array of {\"figure\", \"value\", \"basis\", \"source\"} objects");
  std::vector<FigureSource> out;
  for (size_t i = 0; i < a.size(); ++i) {
    JsonIn e = a[i];
    if (!e.is_object()) e.fail("", "expected an object {\"figure\", \"value\", \"basis\", \"source\"}");
    FigureSource f;
    f.figure = e.str("figure");
    if (e.has("value")) {
      const auto& v = e.at("value").raw();
      if (v.is_number()) f.value = v.dump();
      else if (v.is_string()) f.value = v.get<std::string>();
      else e.fail("value", "expected the figure as a string (\"24.4 GB/s\") or a number");
    }
    f.basis = e.str("basis");
    if (f.basis != "measured" && f.basis != "nominal" && f.basis != "assumed")
      e.fail("basis", "expected \"measured\", \"nominal\" or \"assumed\", found \"" + f.basis + "\"");
    f.source = e.str("source");
    if (f.figure.empty() || f.source.empty())
      e.fail(f.figure.empty() ? "figure" : "source", "expected a non-empty string");
    out.push_back(f);
  }
  return out;
}

}  // namespace

Machine parse_machine_json(const std::string& text, const std::string& origin) {
  json j = parse_json_text(text, origin);
  JsonIn r(j, origin);
  if (!r.is_object()) r.fail("", "expected a JSON object (a peerplan machine, docs/schema.md)");
  Machine m;
  m.source_file = origin;

  std::string schema = r.str("schema");
  if (schema != "peerplan.machine") r.fail("schema", "expected \"peerplan.machine\", found \"" + schema + "\"");
  int64_t version = r.integer("version");
  if (version != kMachineSchemaVersion)
    r.fail("version", "this peerplan reads machine schema version " + std::to_string(kMachineSchemaVersion) +
                          ", found " + std::to_string(version));
  m.name = r.str("name");
  if (m.name.empty()) r.fail("name", "expected a non-empty name");
  m.origin = r.str_or("origin", "nominal");
  if (m.origin != "nominal" && m.origin != "measured")
    r.fail("origin", "expected \"nominal\" or \"measured\", found \"" + m.origin + "\"");
  m.host = r.str_or("host", "");
  m.date = r.str_or("date", "");
  m.description = r.str_or("description", "");
  if (auto meta = r.opt("meta")) {
    if (!meta->is_object()) r.fail("meta", "expected an object");
    m.meta = meta->raw();
  }
  if (auto src = r.opt("sources")) m.sources = parse_sources(*src);
  if (r.has("cluster")) {  // N hosts and their NICs, expanded into the graph (machine_cluster.hpp)
    expand_cluster(r, m);
    validate_machine(m);
    return m;
  }

  JsonIn gpus = r.array("gpus");
  if (gpus.size() == 0) r.fail("gpus", "expected at least one GPU");
  std::map<int64_t, size_t> seen_gpu;
  for (size_t i = 0; i < gpus.size(); ++i) {
    JsonIn g = gpus[i];
    GpuSpec s;
    int64_t id = g.nonnegative_int("id");
    if (auto it = seen_gpu.find(id); it != seen_gpu.end())
      g.fail("id", "duplicate GPU id " + std::to_string(id) + " (also gpus/" + std::to_string(it->second) + "/id)");
    seen_gpu[id] = i;
    if (id != int64_t(i))
      g.fail("id", "GPU ids must be dense and in order (0..N-1); expected " + std::to_string(i) + ", found " +
                       std::to_string(id));
    s.id = int(id);
    s.name = g.str("name");
    s.memory_bytes = g.positive_int("memory_bytes");
    s.uuid = g.str_or("uuid", "");
    s.pci = g.str_or("pci", "");
    s.sm_count = int(g.nonnegative_int_or("sm_count", 0));
    s.compute_capability = g.str_or("compute_capability", "");
    s.numa = int(g.integer_or("numa", -1));
    if (s.numa < -1) g.fail("numa", "expected a NUMA node >= 0 (or leave it out)");
    s.peak_bf16_tflops = g.nonnegative_or("peak_bf16_tflops", 0);
    s.hbm_gbps = g.nonnegative_or("hbm_gbps", 0);
    s.clock_mhz = g.nonnegative_or("clock_mhz", 0);
    m.gpus.push_back(s);
  }

  JsonIn nodes = r.array("nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    JsonIn n = nodes[i];
    NodeSpec s;
    s.id = n.str("id");
    std::string kind = n.str("kind");
    auto k = node_kind_from_string(kind);
    if (!k || *k == NodeKind::Gpu)
      n.fail("kind", "unknown node kind \"" + kind +
                         "\"; expected \"cpu_socket\", \"host_bridge\", \"pcie_switch\", \"nvswitch\" or \"nic\" "
                         "(GPUs go in \"gpus\")");
    s.kind = *k;
    if (s.kind == NodeKind::CpuSocket)
      s.numa = int(n.nonnegative_int("numa"));
    else
      s.numa = int(n.integer_or("numa", -1));
    s.name = n.str_or("name", "");
    s.mem_gbps = n.nonnegative_or("mem_gbps", 0);
    if (s.mem_gbps > 0 && s.kind != NodeKind::CpuSocket)
      n.fail("mem_gbps", "host-memory bandwidth applies to cpu_socket nodes only");
    m.nodes.push_back(s);
  }

  JsonIn links = r.array("links");
  for (size_t i = 0; i < links.size(); ++i) {
    JsonIn l = links[i];
    LinkSpec s;
    s.a = l.str("a");
    s.b = l.str("b");
    std::string kind = l.str("kind");
    auto k = link_kind_from_string(kind);
    if (!k) l.fail("kind", "unknown link kind \"" + kind + "\"; expected \"nvlink\", \"pcie\", \"smp\" or \"network\"");
    s.kind = *k;
    s.gbps = l.positive_or("gbps", 0);
    s.latency_us = l.positive_or("latency_us", 0);
    if (s.kind == LinkKind::NvLink) {
      s.nvlinks = int(l.positive_int("nvlinks"));
      s.gbps_per_link = s.gbps > 0 ? l.positive_or("gbps_per_link", 0) : l.positive("gbps_per_link");
    } else if (s.kind == LinkKind::Pcie) {
      if (s.gbps > 0) {
        s.pcie_gen = int(l.nonnegative_int_or("pcie_gen", 0));
        s.pcie_width = int(l.nonnegative_int_or("pcie_width", 0));
      } else {
        s.pcie_gen = int(l.positive_int("pcie_gen"));
        s.pcie_width = int(l.positive_int("pcie_width"));
      }
    } else if (s.gbps <= 0) {
      l.fail("gbps", std::string("required for ") + kind + " links: the per-direction capacity in GB/s");
    }
    m.links.push_back(s);
  }

  parse_p2p(r, m);
  if (r.has("measurements")) {
    check_measurement_gpus(r, m);
    m.measurements = parse_measurements(r.object("measurements"));
  }
  validate_machine(m);
  return m;
}

Machine load_machine(const std::string& path) {
  std::string text = read_input_file(path, file_kind::kMachine);
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // UTF-8 BOM
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '<') return parse_nccl_xml(text, path);
  return parse_machine_json(text, path);
}

nlohmann::json machine_to_json(const Machine& m) {
  json j;
  j["schema"] = "peerplan.machine";
  j["version"] = kMachineSchemaVersion;
  j["name"] = m.name;
  j["origin"] = m.origin;
  if (!m.host.empty()) j["host"] = m.host;
  if (!m.date.empty()) j["date"] = m.date;
  if (!m.description.empty()) j["description"] = m.description;
  if (!m.sources.empty()) {
    j["sources"] = json::array();
    for (const auto& f : m.sources) {
      json o{{"figure", f.figure}, {"basis", f.basis}, {"source", f.source}};
      if (!f.value.empty()) o["value"] = f.value;
      j["sources"].push_back(o);
    }
  }
  if (!m.meta.empty()) j["meta"] = m.meta;
  j["gpus"] = json::array();
  for (const auto& g : m.gpus) {
    json o{{"id", g.id}, {"name", g.name}};
    // Unknown memory (NCCL XML import) is written as null so a re-load asks for it by name.
    o["memory_bytes"] = g.memory_bytes > 0 ? json(g.memory_bytes) : json(nullptr);
    if (!g.uuid.empty()) o["uuid"] = g.uuid;
    if (!g.pci.empty()) o["pci"] = g.pci;
    if (g.sm_count > 0) o["sm_count"] = g.sm_count;
    if (!g.compute_capability.empty()) o["compute_capability"] = g.compute_capability;
    if (g.numa >= 0) o["numa"] = g.numa;
    if (g.peak_bf16_tflops > 0) o["peak_bf16_tflops"] = g.peak_bf16_tflops;
    if (g.hbm_gbps > 0) o["hbm_gbps"] = g.hbm_gbps;
    if (g.clock_mhz > 0) o["clock_mhz"] = g.clock_mhz;
    j["gpus"].push_back(o);
  }
  j["nodes"] = json::array();
  for (const auto& n : m.nodes) {
    json o{{"id", n.id}, {"kind", to_string(n.kind)}};
    if (n.numa >= 0) o["numa"] = n.numa;
    if (!n.name.empty()) o["name"] = n.name;
    if (n.mem_gbps > 0) o["mem_gbps"] = n.mem_gbps;
    j["nodes"].push_back(o);
  }
  j["links"] = json::array();
  for (const auto& l : m.links) {
    json o{{"a", l.a}, {"b", l.b}, {"kind", to_string(l.kind)}};
    if (l.nvlinks > 0) o["nvlinks"] = l.nvlinks;
    if (l.gbps_per_link > 0) o["gbps_per_link"] = l.gbps_per_link;
    if (l.pcie_gen > 0) o["pcie_gen"] = l.pcie_gen;
    if (l.pcie_width > 0) o["pcie_width"] = l.pcie_width;
    if (l.gbps > 0) o["gbps"] = l.gbps;
    if (l.latency_us > 0) o["latency_us"] = l.latency_us;
    j["links"].push_back(o);
  }
  if (!m.p2p_policy.empty()) {
    j["p2p"] = m.p2p_policy;
  } else {
    json rows = json::array();
    for (size_t i = 0; i < m.p2p.size(); ++i) {
      json row = json::array();
      for (size_t k = 0; k < m.p2p[i].size(); ++k) {
        if (i == k) { row.push_back(nullptr); continue; }
        const P2PInfo& p = m.p2p[i][k];
        json c{{"access", p.access}, {"perf_rank", p.perf_rank}, {"atomics", p.atomics}};
        if (p.functional) c["functional"] = *p.functional;
        if (!p.note.empty()) c["note"] = p.note;
        row.push_back(c);
      }
      rows.push_back(row);
    }
    j["p2p"] = rows;
  }
  if (m.measurements) j["measurements"] = measurements_to_json(*m.measurements);
  return j;
}

std::string resolve_machine_path(const std::string& name) {
  if (name.empty()) throw InputError("", "--machine", "expected a machine file or a shipped machine name");
  if (path_present(name)) return name;  // whatever it is (a FIFO, a symlink loop): the reader says what is wrong
  bool looks_like_path = name.find('/') != std::string::npos || name.ends_with(".json") || name.ends_with(".xml");
  if (looks_like_path) {
    std::string p = find_data_file(name);
    if (path_present(p)) return p;
    throw InputError(name, "", "cannot open file (does it exist and is it readable?)");
  }
  std::string p = find_data_file("models/hardware/" + name + ".json");
  if (fs::exists(p)) return p;
  std::vector<std::string> shipped;
  std::string dir = find_data_file("models/hardware");
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") shipped.push_back(e.path().stem().string());
  std::sort(shipped.begin(), shipped.end());
  std::string list;
  for (const auto& s : shipped) list += (list.empty() ? "" : ", ") + s;
  throw InputError("", "--machine",
                   "\"" + name + "\" is neither a file nor a shipped machine; shipped machines: " +
                       (list.empty() ? "(none found; set PEERPLAN_HOME to the peerplan source tree)" : list));
}

}  // namespace peerplan
