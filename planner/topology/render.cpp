// Rendering of a Topology for `peerplan topo`: matrix (like nvidia-smi topo -m), JSON, DOT.
#include "planner/topology/render.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "planner/topology/transfer_curves.hpp"

namespace peerplan {

namespace {

const CurvePoint* largest_point(const TransferCurve* c) {
  if (!c || c->points.empty()) return nullptr;
  return &c->points.back();  // ascending by bytes
}

double gbps_of(const CurvePoint& p) { return p.time.median > 0 ? double(p.bytes) / p.time.median / 1e9 : 0; }

std::string fmt_us(const Figure& f) {
  if (!f.available) return "-";
  return fmt::format("{:.2f}", f.value * 1e6) + (f.measured ? "m" : "n");
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

std::string group_list(const std::vector<std::vector<int>>& groups) {
  std::string out;
  for (const auto& g : groups) {
    out += out.empty() ? "{" : " {";
    for (size_t i = 0; i < g.size(); ++i) out += (i ? "," : "") + std::to_string(g[i]);
    out += "}";
  }
  return out;
}

std::string gib(int64_t bytes) {
  if (bytes <= 0) return "?";
  return fmt::format("{:.1f} GiB", double(bytes) / double(1LL << 30));
}

// A DOT string literal. A newline in `s` becomes DOT's centred line break `\n`; quotes and
// backslashes are escaped so a name cannot end the string or start an escape sequence (labels were
// built with a literal "\\n" that this then escaped, and Graphviz drew the backslashes: issue 19).
std::string dot_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    if (c == '\r' || c == '\t') c = ' ';
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

}  // namespace

std::string fmt_gbps(const Figure& f) {
  if (!f.available) return "-";
  if (std::isinf(f.value)) return "inf";
  std::string v = f.value >= 100 ? fmt::format("{:.0f}", f.value) : fmt::format("{:.1f}", f.value);
  return v + (f.measured ? "m" : "n");
}

Figure peer_bandwidth(const Topology& t, int src, int dst) {
  Figure f;
  Route r = t.route(src, dst, TransferMode::PeerCopyEngine);
  if (!r.valid) {
    f.available = false;
    return f;
  }
  if (auto p = largest_point(pair_transfer_curve(t, src, dst, TransferMode::PeerCopyEngine))) {
    f.value = gbps_of(*p);
    f.measured = true;
    return f;
  }
  f.value = r.bottleneck_Bps / 1e9;
  return f;
}

Figure host_staged_bandwidth(const Topology& t, int src, int dst) {
  Figure f;
  if (auto p = largest_point(pair_transfer_curve(t, src, dst, TransferMode::HostStaged))) {
    f.value = gbps_of(*p);
    f.measured = true;
    return f;
  }
  Route r = t.route(src, dst, TransferMode::HostStaged);
  f.available = r.valid;
  f.value = r.bottleneck_Bps / 1e9;
  return f;
}

Figure pair_latency(const Topology& t, int src, int dst) {
  Figure f;
  if (const auto& m = t.machine().measurements) {
    for (const char* kind : {"sm_pingpong", "ce_small"})
      for (const auto& l : m->latencies)
        if (l.src == src && l.dst == dst && l.kind == kind) {
          f.value = l.time.median;
          f.measured = true;
          return f;
        }
  }
  Route r = t.route(src, dst, TransferMode::PeerCopyEngine);
  if (!r.valid) r = t.route(src, dst, TransferMode::HostStaged);
  f.available = r.valid;
  f.value = r.latency_s;
  return f;
}

std::string render_matrix(const Topology& t) {
  const Machine& m = t.machine();
  const int n = t.gpu_count();
  std::ostringstream o;
  o << "Machine " << m.name << " (" << m.source_file << "): " << n << " GPU" << (n == 1 ? "" : "s") << ", "
    << (m.measured() ? "measured profile" : "nominal specs") << (m.host.empty() ? "" : ", host " + m.host)
    << (m.date.empty() ? "" : ", " + m.date) << "\n";
  for (const char* k : {"driver", "cuda", "nccl"})
    if (m.meta.contains(k) && m.meta[k].is_string()) o << "  " << k << " " << m.meta[k].get<std::string>() << "\n";
  if (m.meta.contains("assumptions") && m.meta["assumptions"].is_array())
    for (const auto& a : m.meta["assumptions"])
      if (a.is_string()) o << "  assumption: " << a.get<std::string>() << "\n";
  if (m.meta.contains("warnings") && m.meta["warnings"].is_array())
    for (const auto& a : m.meta["warnings"])
      if (a.is_string()) o << "  warning: " << a.get<std::string>() << "\n";
  o << "\n";

  const size_t w = 7;
  // Path types, as nvidia-smi topo -m.
  o << pad("", w);
  for (int b = 0; b < n; ++b) o << pad("GPU" + std::to_string(b), w);
  o << pad("Socket", 8) << "NUMA Affinity\n";
  for (int a = 0; a < n; ++a) {
    o << pad("GPU" + std::to_string(a), w);
    for (int b = 0; b < n; ++b) o << pad(to_string(t.path_type(a, b), t.nvlinks_between(a, b)), w);
    int numa = m.gpus[size_t(a)].numa;
    o << pad(t.vertex_id(t.socket_vertex(a)), 8) << (numa >= 0 ? std::to_string(numa) : "N/A") << "\n";
  }
  o << "\nLegend:\n"
       "  X    = Self\n"
       "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
       "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
       "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
       "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
       "  PIX  = Connection traversing at most a single PCIe bridge\n"
       "  NV#  = Connection traversing a bonded set of # NVLinks\n";

  auto pair_table = [&](const std::string& title, auto cell) {
    o << "\n" << title << "\n";
    o << pad("src\\dst", w + 1);
    for (int b = 0; b < n; ++b) o << pad("GPU" + std::to_string(b), w + 1);
    o << "\n";
    for (int a = 0; a < n; ++a) {
      o << pad("GPU" + std::to_string(a), w + 1);
      for (int b = 0; b < n; ++b) o << pad(a == b ? "X" : cell(a, b), w + 1);
      o << "\n";
    }
  };
  pair_table("Peer copy bandwidth, GB/s per direction (row = source):",
             [&](int a, int b) { return fmt_gbps(peer_bandwidth(t, a, b)); });
  pair_table("Host-staged bandwidth (device -> pinned host -> device), GB/s per direction:",
             [&](int a, int b) { return fmt_gbps(host_staged_bandwidth(t, a, b)); });
  pair_table("Latency, one-way, us:", [&](int a, int b) { return fmt_us(pair_latency(t, a, b)); });
  pair_table("P2P capability (row = source):", [&](int a, int b) {
    const P2PInfo& p = m.p2p[size_t(a)][size_t(b)];
    if (p.access && p.functional && !*p.functional) return std::string("BROKEN");
    return std::string(p.access ? "OK" : "no");
  });
  o << "  m = measured (" << (m.measured() ? "this profile: median of the largest transfer" : "none in this file")
    << "), n = nominal (link specs: route bottleneck, hop latencies), - = not possible on this pair\n"
    << "  P2P: OK = peer access, no = none (use host-staged), BROKEN = capable but failed the functional check\n";

  // P2P notes, one line per distinct reason with the pairs it covers.
  std::vector<std::pair<std::string, std::vector<std::string>>> notes;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const P2PInfo& p = m.p2p[size_t(a)][size_t(b)];
      if (a == b || p.note.empty()) continue;
      auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& x) { return x.first == p.note; });
      if (it == notes.end()) it = notes.insert(notes.end(), {p.note, {}});
      it->second.push_back(fmt::format("{}->{}", a, b));
    }
  for (const auto& [note, pairs] : notes) {
    std::string which = pairs.size() <= 4 ? "" : fmt::format(" ({} pairs)", pairs.size());
    std::string list;
    for (size_t i = 0; i < pairs.size() && i < 4; ++i) list += (i ? ", " : "") + pairs[i];
    o << "  GPU " << list << (pairs.size() > 4 ? ", ..." : "") << which << ": " << note << "\n";
  }

  o << "\nGPUs:\n";
  o << pad("", w) << pad("name", 32) << pad("memory", 12) << pad("SMs", 5) << pad("cc", 5) << pad("bf16 TF", 9)
    << "PCI\n";
  for (const auto& g : m.gpus)
    o << pad("GPU" + std::to_string(g.id), w) << pad(g.name.empty() ? "?" : g.name, 32) << pad(gib(g.memory_bytes), 12)
      << pad(g.sm_count ? std::to_string(g.sm_count) : "?", 5)
      << pad(g.compute_capability.empty() ? "?" : g.compute_capability, 5)
      << pad(g.peak_bf16_tflops > 0 ? fmt::format("{:.0f}", g.peak_bf16_tflops) : "?", 9)
      << (g.pci.empty() ? "-" : g.pci) << "\n";

  o << "\nGroups:\n"
    << "  NVLink islands:   " << group_list(t.nvlink_islands()) << "\n"
    << "  PCIe switches:    " << group_list(t.switch_groups()) << "\n"
    << "  sockets:          " << group_list(t.socket_groups()) << "\n";
  auto cls = t.symmetry_classes();
  std::vector<std::vector<int>> classes;
  for (int a = 0; a < n; ++a) {
    if (size_t(cls[size_t(a)]) >= classes.size()) classes.resize(size_t(cls[size_t(a)]) + 1);
    classes[size_t(cls[size_t(a)])].push_back(a);
  }
  o << "  symmetry classes: " << group_list(classes) << "  (GPUs in one class are interchangeable)\n";
  return o.str();
}

namespace {

nlohmann::json pair_json(const Topology& t, int a, int b) {
  auto fig = [](const Figure& f, const char* unit_key, double scale) {
    nlohmann::json o{{"available", f.available}, {"source", f.measured ? "measured" : "nominal"}};
    if (f.available) o[unit_key] = std::isinf(f.value) ? nlohmann::json(nullptr) : nlohmann::json(f.value * scale);
    return o;
  };
  Route peer = t.route(a, b, TransferMode::PeerCopyEngine);
  Route staged = t.route(a, b, TransferMode::HostStaged);
  nlohmann::json p{{"src", a},
                   {"dst", b},
                   {"path_type", to_string(t.path_type(a, b), t.nvlinks_between(a, b))},
                   {"p2p_usable", t.p2p_usable(a, b)},
                   {"peer", fig(peer_bandwidth(t, a, b), "gbps", 1)},
                   {"host_staged", fig(host_staged_bandwidth(t, a, b), "gbps", 1)},
                   {"latency", fig(pair_latency(t, a, b), "us", 1e6)}};
  p["peer"]["route"] = peer.valid ? peer.describe : "";
  if (!peer.valid) p["peer"]["why"] = peer.why_invalid;
  p["host_staged"]["route"] = staged.describe;
  return p;
}

// pair_json(t, a, b).dump(2) nested 4 spaces deep, byte for byte, written directly: building and
// dumping a JSON value per pair was most of `topo --format json`'s time on 1024 GPUs (1M pairs).
// Numbers and strings go through nlohmann's own serializer, so they read exactly as dump() writes
// them; keys are in dump()'s (sorted) order. render_test checks it against pair_json.
void append_pair_text(std::string& out, const Topology& t, int a, int b) {
  auto num = [&](double v) {  // dump()'s own number writer (shortest round trip, ".0" on integers)
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    char buf[64];
    out.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
  };
  auto str = [&](const std::string& v) {  // printable ASCII without quote or backslash needs no escaping
    bool plain = std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; });
    if (!plain) {
      out += nlohmann::json(v).dump();
      return;
    }
    out += '"';
    out += v;
    out += '"';
  };
  auto key = [&](const char* k) {  // a key of the pair's sub-objects, after the first
    out += ",\n        \"";
    out += k;
    out += "\": ";
  };
  // {"available", [unit before "route"], "route", "source", [unit after "source"], ["why"]}
  auto fig = [&](const Figure& f, const char* unit_key, double scale, const std::string* route, const std::string* why) {
    out += "{\n        \"available\": ";
    out += f.available ? "true" : "false";
    auto unit = [&] {
      if (!f.available) return;
      key(unit_key);
      if (std::isinf(f.value)) out += "null";
      else num(f.value * scale);
    };
    const bool unit_first = std::string_view(unit_key) < "route";
    if (unit_first) unit();
    if (route) {
      key("route");
      str(*route);
    }
    key("source");
    out += f.measured ? "\"measured\"" : "\"nominal\"";
    if (!unit_first) unit();
    if (why) {
      key("why");
      str(*why);
    }
    out += "\n      }";
  };
  Route peer = t.route(a, b, TransferMode::PeerCopyEngine);
  Route staged = t.route(a, b, TransferMode::HostStaged);
  const std::string no_route;
  out += "{\n      \"dst\": ";
  out += std::to_string(b);
  out += ",\n      \"host_staged\": ";
  fig(host_staged_bandwidth(t, a, b), "gbps", 1, &staged.describe, nullptr);
  out += ",\n      \"latency\": ";
  fig(pair_latency(t, a, b), "us", 1e6, nullptr, nullptr);
  out += ",\n      \"p2p_usable\": ";
  out += t.p2p_usable(a, b) ? "true" : "false";
  out += ",\n      \"path_type\": ";
  str(to_string(t.path_type(a, b), t.nvlinks_between(a, b)));
  out += ",\n      \"peer\": ";
  fig(peer_bandwidth(t, a, b), "gbps", 1, peer.valid ? &peer.describe : &no_route, peer.valid ? nullptr : &peer.why_invalid);
  out += ",\n      \"src\": ";
  out += std::to_string(a);
  out += "\n    }";
}

// Everything but the pairs.
nlohmann::json render_json_head(const Topology& t) {
  nlohmann::json j;
  j["machine"] = machine_to_json(t.machine());
  j["groups"] = {{"nvlink_islands", t.nvlink_islands()},
                 {"switch_groups", t.switch_groups()},
                 {"socket_groups", t.socket_groups()}};
  j["symmetry_classes"] = t.symmetry_classes();
  return j;
}

// `text` (a dump(2) of a value) as it reads nested `by` spaces deeper: raw newlines only occur
// between lines (dump escapes those inside strings).
void append_indented(std::string& out, const std::string& text, int by) {
  const std::string pad(size_t(by), ' ');
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
}

}  // namespace

nlohmann::json render_json(const Topology& t) {
  const int n = t.gpu_count();
  nlohmann::json j = render_json_head(t);
  nlohmann::json pairs = nlohmann::json::array();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) pairs.push_back(pair_json(t, a, b));
  j["pairs"] = pairs;
  return j;
}

void render_json_text(const Topology& t, const std::function<void(std::string_view)>& sink) {
  const int n = t.gpu_count();
  nlohmann::json head = render_json_head(t);
  head["pairs"] = nlohmann::json::array();  // placeholder: keeps the key order of render_json's dump
  std::string out = "{";
  bool first_key = true;
  for (auto it = head.begin(); it != head.end(); ++it) {
    out += first_key ? "\n  " : ",\n  ";
    first_key = false;
    out += nlohmann::json(it.key()).dump() + ": ";
    if (it.key() != "pairs" || n < 2) {
      append_indented(out, it.value().dump(2), 2);
      continue;
    }
    out += "[";
    bool first = true;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        out += first ? "\n    " : ",\n    ";
        first = false;
        append_pair_text(out, t, a, b);
        if (out.size() >= (1u << 20)) {  // hand over 1 MiB at a time: 400 MB never held at once
          sink(out);
          out.clear();
        }
      }
    out += "\n  ]";
  }
  out += "\n}";
  sink(out);
}

std::string render_json_text(const Topology& t) {
  std::string all;
  render_json_text(t, [&](std::string_view part) { all += part; });
  return all;
}

std::string render_dot(const Topology& t) {
  const Machine& m = t.machine();
  std::ostringstream o;
  o << "// peerplan topo --format dot: render with `dot -Tsvg`\n";
  o << "graph " << dot_quote(m.name) << " {\n"
    << "  label=" << dot_quote(m.name + (m.measured() ? " (measured profile)" : " (nominal specs)")) << ";\n"
    << "  node [fontname=\"Helvetica\"]; edge [fontname=\"Helvetica\", fontsize=10];\n";
  for (const auto& g : m.gpus) {
    std::string label = "GPU" + std::to_string(g.id) + "\n" + (g.name.empty() ? "?" : g.name);
    if (g.memory_bytes > 0) label += "\n" + gib(g.memory_bytes);
    o << "  " << dot_quote(g.node_id()) << " [shape=box, style=filled, fillcolor=\"#b7e1a1\", label=" << dot_quote(label)
      << "];\n";
  }
  for (const auto& s : m.nodes) {
    std::string shape = "ellipse", fill = "#dddddd";
    std::string label = s.id;
    switch (s.kind) {
      case NodeKind::CpuSocket:
        shape = "box3d"; fill = "#a9c8f0";
        label += "\nNUMA " + std::to_string(s.numa);
        if (s.mem_gbps > 0) label += "\nmemory " + fmt::format("{:.0f}", s.mem_gbps) + " GB/s";
        break;
      case NodeKind::NvSwitch: shape = "hexagon"; fill = "#f5c97a"; break;
      case NodeKind::HostBridge: shape = "invhouse"; break;
      case NodeKind::Nic: shape = "cds"; break;
      default: break;
    }
    if (!s.name.empty()) label += "\n" + s.name;
    o << "  " << dot_quote(s.id) << " [shape=" << shape << ", style=filled, fillcolor=\"" << fill << "\", label="
      << dot_quote(label) << "];\n";
  }
  for (const auto& l : m.links) {
    std::string label, style = "solid", color = "black";
    double cap = link_capacity_gbps(l);
    switch (l.kind) {
      case LinkKind::NvLink: label = "NV" + std::to_string(l.nvlinks); color = "#2e7d32"; break;
      case LinkKind::Pcie:
        label = l.pcie_gen > 0 ? fmt::format("Gen{} x{}", l.pcie_gen, l.pcie_width) : "PCIe";
        break;
      case LinkKind::Smp: label = "SMP"; style = "dashed"; break;
      case LinkKind::Network: label = "net"; style = "dotted"; break;
    }
    label += fmt::format("\n{:.0f} GB/s", cap);
    o << "  " << dot_quote(l.a) << " -- " << dot_quote(l.b) << " [label=" << dot_quote(label) << ", color=\"" << color
      << "\", style=" << style << (l.kind == LinkKind::NvLink ? ", penwidth=2" : "") << "];\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace peerplan
