// Import of NCCL's topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE) into the machine schema.
// The mapping is documented in docs/schema.md ("NCCL topology XML import").
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include "planner/core/error.hpp"
#include "planner/topology/gpu_catalog.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

namespace {

namespace pt = boost::property_tree;

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
    Xml sx{&*sys, "system"};
    m_.meta = {{"source", "nccl_topo_xml"},
               {"system_version", attr_or(sx, "version", "")},
               {"assumptions", nlohmann::json::array()},
               {"warnings", nlohmann::json::array()}};
    m_.p2p_policy = "same_switch";
    check_version(sx);
    check_one_host(*sys);

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
    if (m_.meta["warnings"].empty()) m_.meta.erase("warnings");
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
  // Something in the file NCCL itself skips (a self-targeted or dangling NVLink): read on, but say so.
  void warn(const std::string& what) {
    auto& a = m_.meta["warnings"];
    if (std::find(a.begin(), a.end(), what) == a.end()) a.push_back(what);
  }

  // Every NCCL since 2.7 (the first with the XML topology) writes and reads <system version="1">
  // (NCCL_TOPO_XML_VERSION) and refuses any other number; a hand-written file without one is read
  // as version 1 and said so.
  void check_version(const Xml& sys) {
    auto v = attr(sys, "version");
    if (!v) {
      assume("system has no version attribute; read as version 1 (what NCCL 2.7 and later write)");
      return;
    }
    if (*v != "1")
      fail(sys, "version",
           "version \"" + *v + "\" is not one NCCL writes or reads: every NCCL since 2.7 uses version 1 "
           "(NCCL_TOPO_XML_VERSION) and refuses others");
  }

  // NCCL 2.19+ marks each <cpu> with its host's host_hash; a file fused from several hosts (multi-node
  // NVLink) holds more than one. peerplan models one host.
  void check_one_host(const pt::ptree& sys) {
    std::string first;
    int i = 0;
    for (auto& [tag, child] : sys) {
      if (tag != "cpu") continue;
      Xml cpu{&child, "system/cpu[" + std::to_string(i++) + "]"};
      std::string h = lower(attr_or(cpu, "host_hash", ""));
      if (h.empty()) continue;
      if (first.empty()) first = h;
      else if (h != first)
        fail(cpu, "host_hash", "this file describes more than one host (host_hash " + first + " and " + h +
                                   "); peerplan models one host: keep the <cpu> elements of one host_hash");
    }
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
    if (lower(sp).rfind("unknown", 0) == 0) {
      // What /sys writes when the link is down or virtual; NCCL falls back to Gen3 for any rate it
      // does not know (kvDictPciGen).
      assume(x.path + ": link_speed \"" + sp + "\"; taken as 8 GT/s (Gen3), as NCCL does");
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
    // NCCL writes link_width="" when /sys has no figure and reads it as 0, then as x16.
    int width = attr_or(x, "link_width", "x").empty() ? 0 : int_attr(x, "link_width");
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
    // NCCL fills a missing class (and speed, width) from /sys for the devices it finds at run time,
    // so files written for NCCL_TOPO_FILE may leave it out; what a pci element holds says what it is.
    std::string cls = lower(attr_or(pci, "class", ""));
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
      known_model(pci, s);
      gpu_xml_.push_back({s, gx, pcie_link(pci), parent, false});
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
    if (cls.rfind("0x03", 0) == 0) {
      // A display/3D controller without <gpu>: an NCCL_TOPO_FILE skeleton (cloud images ship these);
      // NCCL adds the <gpu> from the driver at run time. Numbered in finish_gpus.
      GpuSpec s;
      s.id = -1;
      s.pci = busid;
      s.name = "GPU (PCI class " + cls + ", model not in the file)";
      known_model(pci, s);
      gpu_xml_.push_back({s, pci, pcie_link(pci), parent, true});
      return true;
    }
    if (cls.rfind("0x02", 0) == 0) {  // a network controller without <nic> (skeleton): NCCL's net plugin fills it
      std::string id = "nic" + std::to_string(nic_count_++);
      m_.nodes.push_back(NodeSpec{id, NodeKind::Nic, -1, busid + " (PCI class " + cls + ")", 0});
      pcie(id, parent, pcie_link(pci));
      return true;
    }
    const bool has_children = pci.node->count("pci") > 0;
    if (cls.empty() && has_children)
      assume(pci.path + ": no class attribute; taken as a PCI bridge because it holds pci elements");
    if (cls.rfind("0x0604", 0) == 0 || (cls.empty() && has_children)) {  // PCI bridge: a switch
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

  // Name, memory, SMs and compute capability from the PCI device id, for the GPUs peerplan knows.
  // Skeleton files often omit vendor/device: then the model stays unknown.
  void known_model(const Xml& pci, GpuSpec& s) {
    std::string vendor = lower(attr_or(pci, "vendor", ""));
    if (vendor != "0x10de" && !vendor.empty()) return;
    if (auto k = gpu_by_pci_device(attr_or(pci, "device", ""))) {
      s.name = k->name;
      s.memory_bytes = k->memory_mib << 20;
      s.sm_count = k->sm_count;
      if (s.compute_capability.empty()) s.compute_capability = k->compute_capability;
    }
  }

  // Skeleton GPUs take the indices the <gpu> elements leave free, in PCI bus id order: the order
  // nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use (NCCL writes the CUDA index it runs with).
  void number_skeleton_gpus() {
    std::set<int> used;
    std::vector<GpuXml*> skeleton;
    for (auto& g : gpu_xml_) {
      if (g.skeleton) skeleton.push_back(&g);
      else used.insert(g.spec.id);
    }
    if (skeleton.empty()) return;
    std::stable_sort(skeleton.begin(), skeleton.end(), [](auto* x, auto* y) { return x->spec.pci < y->spec.pci; });
    int next = 0;
    for (auto* g : skeleton) {
      while (used.count(next)) ++next;
      g->spec.id = next++;
    }
    assume(std::to_string(skeleton.size()) + " GPU(s) given as PCI devices of class 0x03 without a <gpu> element (an "
           "NCCL_TOPO_FILE skeleton): numbered by PCI bus id. NCCL fills their model and NVLinks from the driver at "
           "run time; the file records neither, so peerplan sees PCIe links only" +
           std::string(skeleton.front()->spec.memory_bytes > 0 ? "" : " and no GPU model or memory"));
  }

  void finish_gpus() {
    if (gpu_xml_.empty())
      throw InputError(origin_, "system",
                       "no GPU found; expected <gpu> elements or PCI devices of class 0x03xxxx (display/3D controller)");
    number_skeleton_gpus();
    std::stable_sort(gpu_xml_.begin(), gpu_xml_.end(), [](const auto& x, const auto& y) { return x.spec.id < y.spec.id; });
    for (size_t i = 0; i < gpu_xml_.size(); ++i) {
      auto& g = gpu_xml_[i];
      if (g.spec.id != int(i))
        fail(g.xml, g.skeleton ? "busid" : "dev", "GPU dev indices must be 0..N-1 without gaps or duplicates; expected " + std::to_string(i) +
                               ", found " + std::to_string(g.spec.id));
      m_.gpus.push_back(g.spec);
      pcie(g.spec.node_id(), g.parent, g.link);
      by_busid_[g.spec.pci] = g.spec.id;
    }
  }

  // Per-link rate from the source GPU's compute capability (gpu_catalog.hpp).
  double nvlink_rate(int gpu) {
    double r = nvlink_gbps_per_link(m_.gpus[size_t(gpu)].compute_capability);
    if (r > 0) return r;
    assume("GPU " + std::to_string(gpu) + " has no known compute capability; its NVLinks taken as 25 GB/s per link");
    return 25.0;
  }

  // Target classes as NCCL reads them (kvDictPciClass, prefix match): 0x068001 a CPU, 0x03 a GPU,
  // anything else the NVSwitch fabric (0x068000 is what NCCL writes).
  void add_nvlinks() {
    std::map<std::pair<int, int>, int> pair_count;
    std::map<int, int> switch_count;
    for (const auto& n : nvlinks_) {
      if (n.tclass.rfind("0x068001", 0) == 0) {
        throw InputError(origin_, n.field + "@tclass",
                         "NVLink to a CPU (POWER9-style) is not supported by peerplan; remove it to model PCIe only");
      } else if (n.tclass.rfind("0x03", 0) == 0) {
        auto it = by_busid_.find(n.target);
        if (it == by_busid_.end()) {  // NCCL finds no node for it and adds no link
          warn(n.field + ": NVLink target " + n.target + " is not a GPU in this file; ignored, as NCCL does");
          continue;
        }
        if (it->second == n.gpu) {
          warn(n.field + ": NVLink from GPU " + std::to_string(n.gpu) + " to itself (target " + n.target +
               " is its own bus id); ignored");
          continue;
        }
        auto key = std::minmax(n.gpu, it->second);
        pair_count[key] = std::max(pair_count[key], n.count);  // both ends list the same links
      } else {
        if (n.tclass.rfind("0x068000", 0) != 0)
          warn(n.field + ": NVLink target class \"" + n.tclass +
               "\" is not a GPU (0x03xxxx) or a CPU (0x068001); taken as the NVSwitch fabric, as NCCL does");
        switch_count[n.gpu] += n.count;  // all NVSwitch chips form one fabric vertex, as NCCL does
      }
    }
    if (!switch_count.empty()) m_.nodes.push_back(NodeSpec{"nvswitch", NodeKind::NvSwitch, -1, "NVSwitch fabric", 0});
    for (auto [gpu, count] : switch_count) {
      LinkSpec l;
      l.a = "gpu" + std::to_string(gpu);
      l.b = "nvswitch";
      l.kind = LinkKind::NvLink;
      l.nvlinks = count;
      l.gbps_per_link = nvlink_rate(gpu);
      m_.links.push_back(l);
    }
    for (auto [pair, count] : pair_count) {
      LinkSpec l;
      l.a = "gpu" + std::to_string(pair.first);
      l.b = "gpu" + std::to_string(pair.second);
      l.kind = LinkKind::NvLink;
      l.nvlinks = count;
      l.gbps_per_link = nvlink_rate(pair.first);
      m_.links.push_back(l);
    }
  }

  struct GpuXml {
    GpuSpec spec;
    Xml xml;
    std::pair<int, int> link;
    std::string parent;
    bool skeleton;  // a class 0x03 pci element without <gpu>
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
