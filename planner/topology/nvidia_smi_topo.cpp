// `nvidia-smi topo -m` text -> a nominal machine (nvidia_smi_topo.hpp, docs/topology.md).
#include "planner/topology/nvidia_smi_topo.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include "planner/core/error.hpp"
#include "planner/topology/gpu_catalog.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

namespace {

// No GPU has more NVLinks than 18 (Hopper, Blackwell); a GPU whose NV# cells add up to more reaches
// its peers through an NVSwitch fabric, which nvidia-smi prints as NV<links to the fabric> per pair.
constexpr int kMaxDirectNvlinksPerGpu = 18;

enum class Kind { Self, NV, PIX, PXB, PHB, NODE, SYS };

struct Cell {
  Kind kind = Kind::SYS;
  int nvlinks = 0;
  bool operator==(const Cell& o) const { return kind == o.kind && nvlinks == o.nvlinks; }
};

std::string cell_text(const Cell& c) {
  switch (c.kind) {
    case Kind::Self: return "X";
    case Kind::NV: return "NV" + std::to_string(c.nvlinks);
    case Kind::PIX: return "PIX";
    case Kind::PXB: return "PXB";
    case Kind::PHB: return "PHB";
    case Kind::NODE: return "NODE";
    case Kind::SYS: return "SYS";
  }
  return "?";
}

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool is_int(const std::string& s) {
  return !s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Union-find over GPU indices.
struct Groups {
  std::vector<int> parent;
  explicit Groups(int n) : parent(size_t(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int a) { return parent[size_t(a)] == a ? a : parent[size_t(a)] = find(parent[size_t(a)]); }
  void join(int a, int b) { parent[size_t(find(a))] = find(b); }
  // Members of each group, groups ordered by their lowest member.
  std::vector<std::vector<int>> list(const std::vector<int>& members) {
    std::map<int, std::vector<int>> by_root;
    std::vector<int> order;
    for (int g : members) {
      int r = find(g);
      if (!by_root.count(r)) order.push_back(r);
      by_root[r].push_back(g);
    }
    std::vector<std::vector<int>> out;
    for (int r : order) out.push_back(by_root[r]);
    return out;
  }
};

class Reader {
 public:
  Reader(std::string origin, NvidiaSmiTopoOptions opt) : origin_(std::move(origin)), opt_(std::move(opt)) {}

  Machine run(const std::string& text) {
    split_lines(text);
    parse_header();
    parse_rows();
    check_symmetric();
    return build();
  }

 private:
  struct Row {
    int line = 0;                  // 1-based line number in the text
    std::vector<Cell> cells;       // one per column
    std::string cpu_affinity;
    int numa = -1;
  };

  [[noreturn]] void fail(int line, const std::string& where, const std::string& expected) const {
    throw InputError(origin_, "line " + std::to_string(line) + (where.empty() ? "" : " " + where), expected);
  }

  void assume(const std::string& what) { assumptions_.push_back(what); }

  void split_lines(const std::string& text) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (!l.empty() && l.back() == '\r') l.pop_back();
      lines_.push_back(l);
    }
  }

  // The header is the first line starting with GPU0 that holds no X cell (the GPU0 row has one).
  void parse_header() {
    for (size_t i = 0; i < lines_.size(); ++i) {
      auto t = tokens(lines_[i]);
      if (t.empty() || t[0] != "GPU0" || std::find(t.begin(), t.end(), "X") != t.end()) continue;
      header_ = int(i);
      static const std::regex gpu_col("GPU([0-9]+)");
      for (size_t k = 0; k < t.size(); ++k) {
        auto next = [&](size_t d) { return k + d < t.size() ? t[k + d] : std::string(); };
        if (t[k] == "CPU" && next(1) == "Affinity") { has_cpu_ = true; ++k; continue; }
        if (t[k] == "NUMA" && next(1) == "Affinity") { has_numa_ = true; ++k; continue; }
        if (t[k] == "GPU" && next(1) == "NUMA" && next(2) == "ID") { has_gpu_numa_ = true; k += 2; continue; }
        if (has_cpu_ || has_numa_ || has_gpu_numa_)
          fail(line_no(header_), "(header)", "device columns before the affinity columns; found \"" + t[k] + "\" after them");
        std::smatch m;
        if (std::regex_match(t[k], m, gpu_col)) {
          if (gpus_ != int(cols_.size()) || std::stoi(m[1]) != gpus_)
            fail(line_no(header_), "(header)", "GPU columns GPU0, GPU1, ... in order before any NIC column; found \"" +
                                                   t[k] + "\" as column " + std::to_string(cols_.size() + 1));
          ++gpus_;
        }
        cols_.push_back(t[k]);
      }
      return;
    }
    throw InputError(origin_, "",
                     "no `nvidia-smi topo -m` matrix found: expected a header line of columns starting with GPU0 "
                     "(GPU0 GPU1 ... CPU Affinity NUMA Affinity), then one row per GPU");
  }

  int line_no(int index) const { return index + 1; }

  Cell parse_cell(const std::string& s, int line, const std::string& row, const std::string& col) const {
    static const std::regex nv("NV([0-9]{1,3})");
    std::smatch m;
    if (s == "X") return {Kind::Self, 0};
    if (std::regex_match(s, m, nv) && std::stoi(m[1]) > 0) return {Kind::NV, std::stoi(m[1])};
    if (s == "PIX") return {Kind::PIX, 0};
    if (s == "PXB") return {Kind::PXB, 0};
    if (s == "PHB") return {Kind::PHB, 0};
    if (s == "NODE") return {Kind::NODE, 0};
    if (s == "SYS" || s == "SOC") return {Kind::SYS, 0};  // SOC: what drivers before ~2017 printed for SYS
    fail(line, "(" + row + "), column " + col,
         "a path type X, NV# (# > 0), PIX, PXB, PHB, NODE or SYS; found \"" + s + "\"");
  }

  void parse_rows() {
    const size_t ncol = cols_.size();
    rows_.assign(size_t(gpus_), Row{});
    std::vector<bool> seen(size_t(gpus_), false);
    static const std::regex gpu_row("GPU([0-9]+)");
    for (size_t i = size_t(header_) + 1; i < lines_.size(); ++i) {
      auto t = tokens(lines_[i]);
      if (t.empty()) continue;
      if (t[0] == "Legend:" || t[0] == "NIC") break;  // the legends follow the matrix
      const int line = line_no(int(i));
      auto col = std::find(cols_.begin(), cols_.end(), t[0]);
      std::smatch m;
      if (col == cols_.end()) {
        if (std::regex_match(t[0], m, gpu_row))
          fail(line, "(" + t[0] + ")", "a row for a GPU in the header; the header has GPU0..GPU" + std::to_string(gpus_ - 1));
        break;  // text after the matrix
      }
      if (t.size() < 1 + ncol)
        fail(line, "(" + t[0] + ")", std::to_string(ncol) + " path-type cells (one per header column), found " +
                                         std::to_string(t.size() - 1));
      const int r = int(col - cols_.begin());
      std::vector<Cell> cells;
      for (size_t k = 0; k < ncol; ++k) {
        Cell c = parse_cell(t[1 + k], line, t[0], cols_[k]);
        if ((c.kind == Kind::Self) != (int(k) == r))
          fail(line, "(" + t[0] + "), column " + cols_[k],
               int(k) == r ? "X on the diagonal" : "a path type (X only where a row meets its own column)");
        cells.push_back(c);
      }
      if (r >= gpus_) continue;  // a NIC row: its cells are checked, the NICs are not modelled
      if (seen[size_t(r)]) fail(line, "(" + t[0] + ")", "one row per GPU; " + t[0] + " appears twice");
      seen[size_t(r)] = true;
      Row& row = rows_[size_t(r)];
      row.line = line;
      row.cells = cells;
      size_t k = 1 + ncol;
      if (has_cpu_ && k < t.size()) row.cpu_affinity = t[k++];
      if (has_numa_ && k < t.size() && is_int(t[k])) row.numa = std::stoi(t[k]);
    }
    for (int g = 0; g < gpus_; ++g)
      if (!seen[size_t(g)])
        fail(line_no(header_), "(header)", "a row for every GPU column; no row GPU" + std::to_string(g) + " follows");
    for (size_t i = size_t(header_); i < lines_.size(); ++i) {  // "NIC0: mlx5_0" (NIC Legend)
      auto t = tokens(lines_[i]);
      if (t.size() == 2 && t[0].size() > 1 && t[0].back() == ':' &&
          std::find(cols_.begin(), cols_.end(), t[0].substr(0, t[0].size() - 1)) != cols_.end())
        nic_names_[t[0].substr(0, t[0].size() - 1)] = t[1];
    }
  }

  const Cell& cell(int a, int b) const { return rows_[size_t(a)].cells[size_t(b)]; }

  void check_symmetric() const {
    for (int a = 0; a < gpus_; ++a)
      for (int b = a + 1; b < gpus_; ++b)
        if (!(cell(a, b) == cell(b, a)))
          fail(rows_[size_t(b)].line, "(GPU" + std::to_string(b) + "), column GPU" + std::to_string(a),
               "the same path type as GPU" + std::to_string(a) + "'s row gives for GPU" + std::to_string(b) + " (" +
                   cell_text(cell(a, b)) + "), found " + cell_text(cell(b, a)));
  }

  std::optional<GpuModel> model() const {
    if (opt_.gpu.empty()) return std::nullopt;
    auto k = gpu_by_key(opt_.gpu);
    if (!k) throw InputError("", "--gpu", "a known GPU: " + gpu_catalog_keys() + "; found \"" + opt_.gpu + "\"");
    return k;
  }

  Machine build() {
    const int n = gpus_;
    auto gm = model();
    Machine m;
    m.source_file = origin_;
    m.name = std::filesystem::path(origin_).stem().string();
    if (m.name.empty()) m.name = "nvidia-smi-topo";
    m.origin = "nominal";
    for (int g = 0; g < n; ++g) {
      GpuSpec s;
      s.id = g;
      if (gm) {
        s.name = gm->name;
        s.memory_bytes = gm->memory_mib << 20;
        s.sm_count = gm->sm_count;
        s.compute_capability = gm->compute_capability;
        s.peak_bf16_tflops = gm->peak_bf16_tflops;
        s.hbm_gbps = gm->hbm_gbps;
        s.clock_mhz = gm->clock_mhz;
      } else {
        s.name = "GPU (model not in nvidia-smi topo -m; give --gpu)";
      }
      m.gpus.push_back(s);
    }
    if (!gm)
      assume("GPU model, memory and compute figures unknown: `nvidia-smi topo -m` does not print them (give --gpu: " +
             gpu_catalog_keys() + ")");
    const int gen = gm && gm->pcie_gen > 0 ? gm->pcie_gen : 4;
    assume("every PCIe link taken as Gen" + std::to_string(gen) + " x16" +
           (gm ? " (the " + gm->name + "'s own link)" : std::string(" (no GPU model given)")) +
           ": the matrix records paths, not link rates");
    double per_link = gm ? nvlink_gbps_per_link(gm->compute_capability) : 0;

    // Sockets: GPUs whose PCIe path stays inside one socket (PIX..NODE) share it. A pair printed as
    // NV# hides its PCIe path; it is joined when the NUMA affinities agree (or are unknown).
    Groups pix(n), pxb(n), phb(n), sock(n);
    bool nv_hidden = false;
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        Kind k = cell(a, b).kind;
        if (k == Kind::PIX) pix.join(a, b);
        if (k == Kind::PIX || k == Kind::PXB) pxb.join(a, b);
        if (k == Kind::PIX || k == Kind::PXB || k == Kind::PHB) phb.join(a, b);
        if (k != Kind::SYS && k != Kind::NV) sock.join(a, b);
        if (k == Kind::NV) {
          nv_hidden = true;
          int na = rows_[size_t(a)].numa, nb = rows_[size_t(b)].numa;
          if (na < 0 || nb < 0 || na == nb) sock.join(a, b);
        }
      }
    if (nv_hidden)
      assume("pairs printed as NV# hide their PCIe path: such GPUs are placed on their own PCIe root ports (NODE) "
             "of the socket their NUMA affinity names");

    std::vector<int> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    auto sockets = sock.list(all);
    std::set<int> numa_used;
    int hb = 0, sw = 0;
    auto pcie = [&](const std::string& a, const std::string& b) {
      LinkSpec l;
      l.a = a;
      l.b = b;
      l.kind = LinkKind::Pcie;
      l.pcie_gen = gen;
      l.pcie_width = 16;
      m.links.push_back(l);
    };
    std::vector<std::string> cpu_ids;
    for (const auto& members : sockets) {
      int numa = rows_[size_t(members[0])].numa;
      bool agree = numa >= 0 && !numa_used.count(numa) &&
                   std::all_of(members.begin(), members.end(), [&](int g) { return rows_[size_t(g)].numa == numa; });
      if (!agree) {
        int want = numa;
        numa = 0;
        while (numa_used.count(numa)) ++numa;
        if (want >= 0)
          assume("GPUs " + list(members) + ": NUMA affinity " + std::to_string(want) +
                 " is shared with GPUs the matrix puts across SYS (or differs inside the group); modelled as socket " +
                 std::to_string(numa) + ", as the path types say");
      }
      numa_used.insert(numa);
      std::string cpu = "cpu" + std::to_string(numa);
      cpu_ids.push_back(cpu);
      m.nodes.push_back(NodeSpec{cpu, NodeKind::CpuSocket, numa, "NUMA node " + std::to_string(numa), 0});
      for (int g : members) m.gpus[size_t(g)].numa = numa;
      for (const auto& bridge : phb.list(members)) {
        std::string hb_id = "hb" + std::to_string(hb++);
        m.nodes.push_back(NodeSpec{hb_id, NodeKind::HostBridge, -1, "root complex", 0});
        pcie(hb_id, cpu);
        auto subtrees = pxb.list(bridge);
        for (const auto& sub : subtrees) {
          auto leaves = pix.list(sub);
          std::string parent = hb_id;
          if (leaves.size() > 1) {  // several switches below one: PXB between them
            parent = "sw" + std::to_string(sw++);
            m.nodes.push_back(NodeSpec{parent, NodeKind::PcieSwitch, -1, "PCIe switch", 0});
            pcie(parent, hb_id);
          }
          for (const auto& leaf : leaves) {
            std::string up = parent;
            if (leaf.size() > 1 || leaves.size() > 1) {
              up = "sw" + std::to_string(sw++);
              m.nodes.push_back(NodeSpec{up, NodeKind::PcieSwitch, -1, "PCIe switch", 0});
              pcie(up, parent);
            }
            for (int g : leaf) pcie("gpu" + std::to_string(g), up);
          }
        }
      }
    }
    for (size_t i = 0; i < cpu_ids.size(); ++i)
      for (size_t k = i + 1; k < cpu_ids.size(); ++k) {
        LinkSpec l;
        l.a = cpu_ids[i];
        l.b = cpu_ids[k];
        l.kind = LinkKind::Smp;
        l.gbps = kNominalSmpGbps;
        m.links.push_back(l);
      }
    if (cpu_ids.size() > 1)
      assume("inter-socket link taken as " + std::to_string(int(kNominalSmpGbps)) +
             " GB/s per direction (nominal; the matrix does not record it)");
    add_nvlinks(m, per_link);
    m.p2p_policy = opt_.p2p;
    assume("peer access: the \"" + opt_.p2p + "\" policy (`nvidia-smi topo -m` does not say; `nvidia-smi topo -p2p r` does)");

    m.description = "Read from the `nvidia-smi topo -m` text " + origin_ +
                     ": path types as nvidia-smi printed them; link rates nominal by link type" +
                     (gm ? "; GPU figures nominal (" + gm->source + ")" : "; GPU model unknown") +
                     ". Profile the host for measured figures.";
    m.meta = {{"source", "nvidia_smi_topo"}, {"assumptions", assumptions_}};
    if (!nic_names_.empty() || int(cols_.size()) > gpus_) {
      nlohmann::json nics = nlohmann::json::array();
      for (size_t c = size_t(gpus_); c < cols_.size(); ++c)
        nics.push_back(nic_names_.count(cols_[c]) ? cols_[c] + " (" + nic_names_[cols_[c]] + ")" : cols_[c]);
      m.meta["nics"] = nics;
      m.meta["assumptions"].push_back("NICs read and left out of the machine: peerplan plans the GPUs of one host");
    }
    validate_machine(m);
    self_check(m);
    return m;
  }

  static std::string list(const std::vector<int>& g) {
    std::string s;
    for (int x : g) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  }

  // NV# pairs: a direct bonded link, or, when a GPU's NV# cells add up to more links than any GPU
  // has, one NVSwitch fabric with NV# links from each of its GPUs (as nvidia-smi counts them).
  void add_nvlinks(Machine& m, double per_link) {
    const int n = gpus_;
    std::vector<int> total(size_t(n), 0);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && cell(a, b).kind == Kind::NV) total[size_t(a)] += cell(a, b).nvlinks;
    std::vector<bool> fabric(size_t(n), false);
    for (int a = 0; a < n; ++a) fabric[size_t(a)] = total[size_t(a)] > kMaxDirectNvlinksPerGpu;
    bool any_nv = false, any_fabric = false;
    if (per_link <= 0) per_link = 25.0;
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        const Cell& c = cell(a, b);
        if (c.kind != Kind::NV) continue;
        any_nv = true;
        if (fabric[size_t(a)] || fabric[size_t(b)]) {
          if (!(fabric[size_t(a)] && fabric[size_t(b)]))
            fail(rows_[size_t(a)].line, "(GPU" + std::to_string(a) + "), column GPU" + std::to_string(b),
                 "an NVSwitch fabric that every NV# peer joins; GPU" + std::to_string(a) + " and GPU" + std::to_string(b) +
                     " disagree (one has more NVLinks in total than a GPU has, the other not)");
          any_fabric = true;
          continue;
        }
        LinkSpec l;
        l.a = "gpu" + std::to_string(a);
        l.b = "gpu" + std::to_string(b);
        l.kind = LinkKind::NvLink;
        l.nvlinks = c.nvlinks;
        l.gbps_per_link = per_link;
        m.links.push_back(l);
      }
    if (any_fabric) {
      m.nodes.push_back(NodeSpec{"nvswitch", NodeKind::NvSwitch, -1, "NVSwitch fabric", 0});
      for (int a = 0; a < n; ++a) {
        if (!fabric[size_t(a)]) continue;
        int links = 0;
        for (int b = 0; b < n; ++b)
          if (a != b && cell(a, b).kind == Kind::NV) {
            if (links && cell(a, b).nvlinks != links)
              fail(rows_[size_t(a)].line, "(GPU" + std::to_string(a) + "), column GPU" + std::to_string(b),
                   "one NV# count to every peer through an NVSwitch fabric (NV" + std::to_string(links) + " elsewhere)");
            links = cell(a, b).nvlinks;
          }
        LinkSpec l;
        l.a = "gpu" + std::to_string(a);
        l.b = "nvswitch";
        l.kind = LinkKind::NvLink;
        l.nvlinks = links;
        l.gbps_per_link = per_link;
        m.links.push_back(l);
      }
      assume("GPUs whose NV# cells add up to more than " + std::to_string(kMaxDirectNvlinksPerGpu) +
             " links reach each other through one NVSwitch fabric (NV# = each GPU's links into it)");
    }
    if (any_nv)
      assume("NVLink taken as " + fmt_rate(per_link) + " GB/s per link per direction" +
             (opt_.gpu.empty() ? " (NVLink 2-4; no GPU model given)" : " (nominal for the GPU given)"));
  }

  static std::string fmt_rate(double r) {
    std::ostringstream o;
    o << r;
    return o.str();
  }

  // The machine must print back the matrix it was read from; a matrix that is no PCIe tree is refused.
  void self_check(const Machine& m) const {
    Topology t(m);
    for (int a = 0; a < gpus_; ++a)
      for (int b = a + 1; b < gpus_; ++b) {
        const Cell& want = cell(a, b);
        std::string got = to_string(t.path_type(a, b), t.nvlinks_between(a, b));
        if (got != cell_text(want))
          fail(rows_[size_t(a)].line, "(GPU" + std::to_string(a) + "), column GPU" + std::to_string(b),
               "path types that form one PCIe tree per socket; this cell reads " + cell_text(want) +
                   " but the tree the other cells give has " + got + " here");
      }
  }

  std::string origin_;
  NvidiaSmiTopoOptions opt_;
  std::vector<std::string> lines_;
  int header_ = -1;
  std::vector<std::string> cols_;
  int gpus_ = 0;
  bool has_cpu_ = false, has_numa_ = false, has_gpu_numa_ = false;
  std::vector<Row> rows_;
  std::map<std::string, std::string> nic_names_;
  nlohmann::json assumptions_ = nlohmann::json::array();
};

}  // namespace

Machine parse_nvidia_smi_topo(const std::string& text, const std::string& origin, const NvidiaSmiTopoOptions& options) {
  if (options.p2p != "all" && options.p2p != "nvlink_only" && options.p2p != "same_switch" && options.p2p != "none")
    throw InputError("", "--p2p", "all, nvlink_only, same_switch or none; found \"" + options.p2p + "\"");
  return Reader(origin, options).run(text);
}

}  // namespace peerplan
