// Import of NCCL's topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE) into the machine schema.
// The mapping is documented in docs/schema.md ("NCCL topology XML import").
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <sstream>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include "planner/core/error.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

namespace {

namespace pt = boost::property_tree;

constexpr double kNominalSmpGbps = 64.0;  // NCCL does not record the inter-socket link; stated assumption

constexpr int kMaxPciDepth = 32;  // real PCIe trees are a few levels deep; bounds recursion on hostile files
constexpr int kMaxXmlDepth = 1000;  // element nesting before parsing (xml_depth); kMaxPciDepth gives the real limit

// Deepest element nesting in `text`, stopping once past `limit`. Boost's XML reader recurses once
// per level, so 10 000 nested elements overflowed the stack (found under ASan, whose frames are
// larger, by CliNcclXmlHostile.TenThousandNestedElements); this scan is iterative. Quoted attribute
// values are skipped; <?...?>, <!...> and </...> do not open a level.
int xml_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    if (text[i] != '<' || i + 1 >= text.size()) continue;
    const char next = text[i + 1];
    size_t j = i + 1;
    char quote = 0;
    for (; j < text.size(); ++j) {  // the tag's closing '>', outside quotes
      if (quote) {
        if (text[j] == quote) quote = 0;
      } else if (text[j] == '"' || text[j] == '\'') {
        quote = text[j];
      } else if (text[j] == '>') {
        break;
      }
    }
    if (next == '/') --depth;
    else if (next != '?' && next != '!' && !(j < text.size() && text[j - 1] == '/')) deepest = std::max(deepest, ++depth);
    i = j;
  }
  return deepest;
}

// NVIDIA PCI device ids -> product, memory and SM count as nvidia-smi / cudaGetDeviceProperties
// report them. The XML records the device id but not the name or memory; an id not listed here
// leaves both unknown (the JSON conversion then asks for memory_bytes by name).
struct KnownGpu {
  const char* device;
  const char* name;
  int64_t memory_mib;
  int sm_count;
};
constexpr KnownGpu kKnownGpus[] = {
    {"0x2330", "NVIDIA H100 80GB HBM3", 81559, 132},
    {"0x2331", "NVIDIA H100 PCIe", 81559, 114},
    {"0x2335", "NVIDIA H200", 143771, 132},
    {"0x20b0", "NVIDIA A100-SXM4-40GB", 40960, 108},
    {"0x20b2", "NVIDIA A100-SXM4-80GB", 81920, 108},
    {"0x20b5", "NVIDIA A100 80GB PCIe", 81920, 108},
    {"0x20f1", "NVIDIA A100-PCIE-40GB", 40960, 108},
    {"0x26b9", "NVIDIA L40S", 46068, 142},
    {"0x2684", "NVIDIA GeForce RTX 4090", 24564, 128},
};

struct Xml {
  const pt::ptree* node;
  std::string path;  // "system/cpu[0]/pci[1]"
};

struct NvlinkRef {
  int gpu;
  std::string target;
  int count;
  std::string tclass;
  std::string field;
};

class Importer {
 public:
  explicit Importer(std::string origin) : origin_(std::move(origin)) {}

  Machine run(const std::string& text) {
    pt::ptree doc;
    if (xml_depth(text, kMaxXmlDepth) > kMaxXmlDepth)
      throw InputError(origin_, "", "XML nested deeper than " + std::to_string(kMaxXmlDepth) +
                                        " elements; expected an NCCL topology file (NCCL_TOPO_DUMP_FILE output)");
    try {
      std::istringstream in(text);
      pt::read_xml(in, doc);
    } catch (const pt::xml_parser_error& e) {
      throw InputError(origin_, "", "malformed XML at line " + std::to_string(e.line()) + " (" + e.message() +
                                        "); expected an NCCL topology file (NCCL_TOPO_DUMP_FILE output)");
    }
    auto sys = doc.get_child_optional("system");
    if (!sys)
      throw InputError(origin_, "system",
                       "expected an NCCL topology XML whose root element is <system> (NCCL_TOPO_DUMP_FILE output)");
    m_.source_file = origin_;
    m_.name = std::filesystem::path(origin_).stem().string();
    if (m_.name.empty()) m_.name = "nccl-topology";
    m_.origin = "nominal";
    m_.description = "Imported from the NCCL topology XML " + origin_ +
                     ": PCIe and NVLink structure as NCCL saw it; link rates are nominal; GPU names and memory "
                     "come from the PCI device id where peerplan knows it (unknown otherwise); P2P follows NCCL's "
                     "default level (same_switch). Profile the host for measured figures.";
    m_.meta = {{"source", "nccl_topo_xml"},
               {"system_version", attr_or(Xml{&*sys, "system"}, "version", "")},
               {"assumptions", nlohmann::json::array()}};
    m_.p2p_policy = "same_switch";

    std::map<std::string, int> cpu_index;
    std::vector<int> socket_numas;
    for (auto& [tag, child] : *sys) {
      if (tag != "cpu") continue;
      Xml cpu{&child, "system/cpu[" + std::to_string(cpu_index[tag]++) + "]"};
      int numa = int_attr(cpu, "numaid");
      if (numa < -1) fail(cpu, "numaid", "expected a NUMA node >= 0 (or -1: unknown)");
      if (numa == -1) {
        // NCCL writes -1 when the kernel exposes no NUMA node (virtual machines): number the socket
        // by its position and say so.
        numa = int(socket_numas.size());
        assume(cpu.path + " has numaid -1 (no NUMA information): taken as socket " +
                                         std::to_string(numa));
      }
      if (std::find(socket_numas.begin(), socket_numas.end(), numa) != socket_numas.end())
        fail(cpu, "numaid", "two <cpu> elements with numaid " + std::to_string(numa) + "; expected one per NUMA node");
      NodeSpec s;
      s.id = "cpu" + std::to_string(numa);
      s.kind = NodeKind::CpuSocket;
      s.numa = numa;
      s.name = attr_or(cpu, "vendor", "") + " " + attr_or(cpu, "arch", "");
      m_.nodes.push_back(s);
      socket_numas.push_back(numa);
      std::map<std::string, int> idx;
      for (auto& [ctag, cchild] : child) {
        if (ctag != "pci") continue;
        Xml pci{&cchild, cpu.path + "/pci[" + std::to_string(idx[ctag]++) + "]"};
        root_port(pci, s.id);
      }
    }
    if (socket_numas.empty()) throw InputError(origin_, "system/cpu", "expected at least one <cpu> element");
    // Sockets are fully connected (UPI / xGMI); NCCL does not record the rate.
    for (size_t i = 0; i < socket_numas.size(); ++i)
      for (size_t k = i + 1; k < socket_numas.size(); ++k) {
        LinkSpec l;
        l.a = "cpu" + std::to_string(socket_numas[i]);
        l.b = "cpu" + std::to_string(socket_numas[k]);
        l.kind = LinkKind::Smp;
        l.gbps = kNominalSmpGbps;
        m_.links.push_back(l);
      }
    finish_gpus();
    add_nvlinks();
    if (m_.meta["assumptions"].empty()) m_.meta.erase("assumptions");
    validate_machine(m_);
    return m_;
  }

 private:
  [[noreturn]] void fail(const Xml& x, const std::string& attr, const std::string& expected) const {
    throw InputError(origin_, x.path + (attr.empty() ? "" : "@" + attr), expected);
  }

  // Records a stated assumption once (a pci element's link is read for its parent link and its own).
  void assume(const std::string& what) {
    auto& a = m_.meta["assumptions"];
    if (std::find(a.begin(), a.end(), what) == a.end()) a.push_back(what);
  }

  std::optional<std::string> attr(const Xml& x, const std::string& name) const {
    auto a = x.node->get_child_optional("<xmlattr>." + name);
    if (!a) return std::nullopt;
    std::string v = a->get_value<std::string>();
    // Attributes end up in the machine JSON; nlohmann refuses to write invalid UTF-8, so refuse it here,
    // where the message can still name the file and the attribute.
    try {
      (void)nlohmann::json(v).dump();
    } catch (const nlohmann::json::exception&) {
      fail(x, name, "attribute value is not valid UTF-8");
    }
    return v;
  }
  std::string attr_or(const Xml& x, const std::string& name, const std::string& def) const {
    return attr(x, name).value_or(def);
  }
  std::string str_attr(const Xml& x, const std::string& name) const {
    auto a = attr(x, name);
    if (!a || a->empty()) fail(x, name, "required attribute is missing");
    return *a;
  }
  int int_attr(const Xml& x, const std::string& name) const {
    std::string s = str_attr(x, name);
    try {
      size_t used = 0;
      long v = std::stol(s, &used, 0);
      if (used != s.size()) throw std::invalid_argument(s);
      return int(v);
    } catch (const std::exception&) {
      fail(x, name, "expected an integer, found \"" + s + "\"");
    }
  }

  static std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
  }

  // link_speed "16.0 GT/s PCIe" -> generation 4; link_width "16".
  std::pair<int, int> pcie_link(const Xml& x) {
    std::string sp = attr_or(x, "link_speed", "");
    if (sp.empty()) {
      // NCCL's own fallback when /sys does not say (kvDictPciGen default): Gen3.
      assume(x.path + ": no link_speed; taken as 8 GT/s (Gen3), as NCCL does");
      sp = "8.0 GT/s PCIe";
    }
    double gts = 0;
    try {
      gts = std::stod(sp);
    } catch (const std::exception&) {
      fail(x, "link_speed", "expected a PCIe link speed such as \"16.0 GT/s PCIe\", found \"" + sp + "\"");
    }
    const std::pair<double, int> gens[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}};
    int gen = 0;
    for (auto [r, g] : gens)
      if (std::abs(gts - r) < 0.01) gen = g;
    if (!gen) fail(x, "link_speed", "unknown PCIe rate \"" + sp + "\"; expected 2.5, 5, 8, 16, 32 or 64 GT/s");
    int width = int_attr(x, "link_width");
    if (width == 0) {
      // NCCL writes 0 when /sys has no width (virtual machines) and then uses x16 itself.
      assume(x.path + ": link_width 0 (unknown); taken as x16, as NCCL does");
      width = 16;
    }
    if (width < 1 || width > 32) fail(x, "link_width", "expected a lane count 1..32, found " + std::to_string(width));
    return {gen, width};
  }

  void pcie(const std::string& a, const std::string& b, std::pair<int, int> gw) {
    LinkSpec l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::Pcie;
    l.pcie_gen = gw.first;
    l.pcie_width = gw.second;
    m_.links.push_back(l);
  }

  // A pci element directly under a cpu hangs off its own root port: a host bridge vertex.
  void root_port(const Xml& pci, const std::string& cpu) {
    size_t nodes = m_.nodes.size(), links = m_.links.size();
    std::string hb = "hb" + std::to_string(hb_count_++);
    m_.nodes.push_back(NodeSpec{hb, NodeKind::HostBridge, -1, str_attr(pci, "busid"), 0});
    auto gw = pcie_link(pci);
    pcie(hb, cpu, gw);
    if (!device(pci, hb)) {  // nothing NCCL cares about below this port
      m_.nodes.resize(nodes);
      m_.links.resize(links);
      --hb_count_;
    }
  }

  // Returns whether anything (GPU, NIC) was added at or below this element.
  bool device(const Xml& pci, const std::string& parent, int depth = 1) {
    if (depth > kMaxPciDepth)
      fail(pci, "", "PCI elements nested deeper than " + std::to_string(kMaxPciDepth) + " levels; expected a PCIe tree");
    std::string busid = lower(str_attr(pci, "busid"));
    std::string cls = lower(str_attr(pci, "class"));
    if (auto g = pci.node->get_child_optional("gpu")) {
      Xml gx{&*g, pci.path + "/gpu"};
      GpuSpec s;
      s.id = int_attr(gx, "dev");
      if (s.id < 0) fail(gx, "dev", "expected a device index >= 0");
      int sm = int_attr(gx, "sm");
      if (sm < 10) fail(gx, "sm", "expected a compute capability such as 90, found " + std::to_string(sm));
      s.compute_capability = std::to_string(sm / 10) + "." + std::to_string(sm % 10);
      s.name = "GPU sm_" + std::to_string(sm) + " (from NCCL XML)";
      s.pci = busid;
      if (lower(attr_or(pci, "vendor", "")) == "0x10de") {
        std::string dev = lower(attr_or(pci, "device", ""));
        for (const auto& k : kKnownGpus)
          if (dev == k.device) {
            s.name = k.name;
            s.memory_bytes = k.memory_mib << 20;
            s.sm_count = k.sm_count;
          }
      }
      gpu_xml_.push_back({s, gx, pcie_link(pci), parent});
      std::map<std::string, int> idx;
      for (auto& [tag, child] : *g) {
        if (tag != "nvlink") continue;
        Xml nx{&child, gx.path + "/nvlink[" + std::to_string(idx[tag]++) + "]"};
        int count = int_attr(nx, "count");
        if (count <= 0) fail(nx, "count", "expected a positive NVLink count");
        nvlinks_.push_back({s.id, lower(str_attr(nx, "target")), count, lower(str_attr(nx, "tclass")), nx.path});
      }
      return true;
    }
    if (pci.node->get_child_optional("nic")) {
      std::string id = "nic" + std::to_string(nic_count_++);
      std::string name = busid;
      if (auto net = pci.node->get_child_optional("nic.net"))
        name = attr_or(Xml{&*net, pci.path + "/nic/net"}, "name", busid);  // attr(): UTF-8 checked (fuzz finding)
      m_.nodes.push_back(NodeSpec{id, NodeKind::Nic, -1, name, 0});
      pcie(id, parent, pcie_link(pci));
      return true;
    }
    if (cls.rfind("0x0604", 0) == 0) {  // PCI bridge: a switch
      size_t nodes = m_.nodes.size(), links = m_.links.size(), gpus = gpu_xml_.size(), nv = nvlinks_.size();
      std::string id = "sw" + std::to_string(sw_count_++);
      m_.nodes.push_back(NodeSpec{id, NodeKind::PcieSwitch, -1, busid, 0});
      pcie(id, parent, pcie_link(pci));
      bool any = false;
      std::map<std::string, int> idx;
      for (auto& [tag, child] : *pci.node) {
        if (tag != "pci") continue;
        any |= device(Xml{&child, pci.path + "/pci[" + std::to_string(idx[tag]++) + "]"}, id, depth + 1);
      }
      if (!any) {
        m_.nodes.resize(nodes);
        m_.links.resize(links);
        gpu_xml_.resize(gpus);
        nvlinks_.resize(nv);
        --sw_count_;
      }
      return any;
    }
    return false;  // storage, other devices: not part of the GPU topology
  }

  void finish_gpus() {
    if (gpu_xml_.empty()) throw InputError(origin_, "system", "no <gpu> element found; expected at least one GPU");
    std::stable_sort(gpu_xml_.begin(), gpu_xml_.end(), [](const auto& x, const auto& y) { return x.spec.id < y.spec.id; });
    for (size_t i = 0; i < gpu_xml_.size(); ++i) {
      auto& g = gpu_xml_[i];
      if (g.spec.id != int(i))
        fail(g.xml, "dev", "GPU dev indices must be 0..N-1 without gaps or duplicates; expected " + std::to_string(i) +
                               ", found " + std::to_string(g.spec.id));
      m_.gpus.push_back(g.spec);
      pcie(g.spec.node_id(), g.parent, g.link);
      by_busid_[g.spec.pci] = g.spec.id;
    }
  }

  static double nvlink_rate(const std::string& cc) {
    int major = std::stoi(cc);
    if (major <= 6) return 20.0;   // NVLink 1 (P100)
    if (major <= 9) return 25.0;   // NVLink 2 / 3 / 4 (V100, A100, H100/H200)
    return 50.0;                   // NVLink 5 (B200)
  }

  void add_nvlinks() {
    std::map<std::pair<int, int>, int> pair_count;
    std::map<int, int> switch_count;
    for (const auto& n : nvlinks_) {
      if (n.tclass == "0x068000") {
        switch_count[n.gpu] += n.count;  // all NVSwitch chips form one fabric vertex, as NCCL does
      } else if (n.tclass.rfind("0x0302", 0) == 0 || n.tclass.rfind("0x0300", 0) == 0) {
        auto it = by_busid_.find(n.target);
        if (it == by_busid_.end())
          throw InputError(origin_, n.field + "@target", "NVLink target " + n.target + " is not a GPU in this file");
        if (it->second == n.gpu) throw InputError(origin_, n.field + "@target", "NVLink from a GPU to itself");
        auto key = std::minmax(n.gpu, it->second);
        pair_count[key] = std::max(pair_count[key], n.count);  // both ends list the same links
      } else if (n.tclass.rfind("0x0604", 0) == 0 || n.tclass.rfind("0x0600", 0) == 0) {
        throw InputError(origin_, n.field + "@tclass",
                         "NVLink to a CPU (POWER9-style) is not supported by peerplan; remove it to model PCIe only");
      } else {
        throw InputError(origin_, n.field + "@tclass",
                         "unknown NVLink target class \"" + n.tclass + "\"; expected 0x068000 (NVSwitch) or a GPU class");
      }
    }
    if (!switch_count.empty()) m_.nodes.push_back(NodeSpec{"nvswitch", NodeKind::NvSwitch, -1, "NVSwitch fabric", 0});
    for (auto [gpu, count] : switch_count) {
      LinkSpec l;
      l.a = "gpu" + std::to_string(gpu);
      l.b = "nvswitch";
      l.kind = LinkKind::NvLink;
      l.nvlinks = count;
      l.gbps_per_link = nvlink_rate(m_.gpus[size_t(gpu)].compute_capability);
      m_.links.push_back(l);
    }
    for (auto [pair, count] : pair_count) {
      LinkSpec l;
      l.a = "gpu" + std::to_string(pair.first);
      l.b = "gpu" + std::to_string(pair.second);
      l.kind = LinkKind::NvLink;
      l.nvlinks = count;
      l.gbps_per_link = nvlink_rate(m_.gpus[size_t(pair.first)].compute_capability);
      m_.links.push_back(l);
    }
  }

  struct GpuXml {
    GpuSpec spec;
    Xml xml;
    std::pair<int, int> link;
    std::string parent;
  };

  std::string origin_;
  Machine m_;
  int hb_count_ = 0, sw_count_ = 0, nic_count_ = 0;
  std::vector<GpuXml> gpu_xml_;
  std::vector<NvlinkRef> nvlinks_;
  std::map<std::string, int> by_busid_;
};

}  // namespace

Machine parse_nccl_xml(const std::string& text, const std::string& origin) { return Importer(origin).run(text); }

}  // namespace peerplan
