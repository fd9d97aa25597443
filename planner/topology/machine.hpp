#pragma once
// The machine schema (docs/schema.md): one format for hypothetical machines (nominal specs only)
// and measured profiles (the same plus `measurements`). Loaded from JSON or from NCCL's topology
// XML (recognised by content). Vertex ids are strings; GPU vertices are "gpu<N>".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/topology/measurements.hpp"

namespace peerplan {

inline constexpr int kMachineSchemaVersion = 1;
// Inter-socket (UPI / xGMI) capacity per direction when a source does not record it (NCCL's XML,
// nvidia-smi's matrix): a stated nominal assumption.
inline constexpr double kNominalSmpGbps = 64.0;

enum class NodeKind { Gpu, PcieSwitch, HostBridge, CpuSocket, NvSwitch, Nic };
enum class LinkKind { NvLink, Pcie, Smp, Network };  // Smp: inter-socket (UPI / xGMI / Infinity Fabric)

const char* to_string(NodeKind k);   // JSON names: "gpu", "pcie_switch", "host_bridge", "cpu_socket", "nvswitch", "nic"
const char* to_string(LinkKind k);   // "nvlink", "pcie", "smp", "network"
std::optional<NodeKind> node_kind_from_string(const std::string& s);
std::optional<LinkKind> link_kind_from_string(const std::string& s);

struct GpuSpec {
  int id = 0;                    // dense 0..N-1; also the CUDA ordinal on the profiled host
  std::string name;              // "NVIDIA H200"
  std::string uuid;              // "GPU-..." (empty for hypothetical machines)
  std::string pci;               // "0000:18:00.0"
  int64_t memory_bytes = 0;
  int sm_count = 0;
  std::string compute_capability;  // "9.0"
  int numa = -1;                 // NUMA node / socket index, -1 unknown
  double peak_bf16_tflops = 0;   // dense bf16 tensor-core peak (nominal, or measured)
  double hbm_gbps = 0;           // memory bandwidth, GB/s (1e9 B/s)
  double clock_mhz = 0;
  std::string node_id() const { return "gpu" + std::to_string(id); }
};

struct NodeSpec {
  std::string id;                // unique, e.g. "sw0", "cpu1", "nvswitch"
  NodeKind kind = NodeKind::PcieSwitch;
  int numa = -1;                 // for CPU sockets: the socket/NUMA index
  std::string name;              // free text (model, PCI address)
  double mem_gbps = 0;           // CPU sockets only: host-memory bandwidth (0 = unknown/unlimited)
};

struct LinkSpec {
  std::string a, b;              // vertex ids; the link is full duplex: capacity per direction
  LinkKind kind = LinkKind::Pcie;
  int nvlinks = 0;               // NVLink: number of links bonded between a and b
  double gbps_per_link = 0;      // NVLink: per-link, per-direction GB/s
  int pcie_gen = 0, pcie_width = 0;
  double gbps = 0;               // per-direction capacity, GB/s. If 0, derived from nvlinks or gen x width.
  double latency_us = 0;         // one-way latency of this hop (0 = use a nominal default)
};

// Directed peer capability, as cudaDeviceCanAccessPeer / cudaDeviceGetP2PAttribute report it,
// plus the profiler's functional check.
struct P2PInfo {
  bool access = false;
  int perf_rank = -1;
  bool atomics = false;
  std::optional<bool> functional;  // nullopt: not checked (hypothetical machine)
  std::string note;                // why unavailable/broken, if known
  bool usable() const { return access && functional.value_or(true); }
};

// Where one figure of a hand-written machine comes from (optional "sources" array, docs/schema.md):
// the figure, its value as the source states it, whether it is measured, nominal (a spec sheet) or
// assumed, and the citation.
struct FigureSource {
  std::string figure;   // "peer copy GPU0 -> GPU1, P2P on"
  std::string value;    // "24.44 GB/s" (free text: units as the source gives them)
  std::string basis;    // "measured", "nominal" or "assumed"
  std::string source;   // citation: document, repository and file or issue, URL
};

struct Machine {
  std::string source_file;
  std::string name;
  std::string host;          // hostname for profiles, "" for hypothetical machines
  std::string origin = "nominal";  // "nominal" (hand-written) or "measured" (peerplan profile)
  std::string date;
  std::string description;
  std::vector<FigureSource> sources;  // optional citations of the figures (hypothetical machines)
  std::vector<GpuSpec> gpus;
  std::vector<NodeSpec> nodes;   // non-GPU vertices
  std::vector<LinkSpec> links;
  std::vector<std::vector<P2PInfo>> p2p;  // [src][dst], size N x N; diagonal unused
  // When the JSON gave p2p as a policy ("all", "nvlink_only", "same_switch", "none"), its name; the
  // matrix above is then resolved from the topology. Empty when the matrix was explicit.
  std::string p2p_policy;
  nlohmann::json meta = nlohmann::json::object();  // driver, CUDA, NCCL versions, tool version...
  std::optional<Measurements> measurements;

  int gpu_count() const { return int(gpus.size()); }
  bool measured() const { return measurements.has_value(); }
};

// Loads a machine JSON or an NCCL topology XML (detected by the first non-blank character).
// Validates everything: ids unique, links name existing vertices, no self-loops, capacities and
// sizes positive, p2p matrix square. Throws InputError naming the file and field.
Machine load_machine(const std::string& path);
Machine parse_machine_json(const std::string& text, const std::string& origin);
// NCCL_TOPO_DUMP_FILE format (docs/schema.md, "NCCL topology XML import"); `origin` names the file.
Machine parse_nccl_xml(const std::string& text, const std::string& origin);
nlohmann::json machine_to_json(const Machine& m);

// Structural checks shared by every source (JSON, XML, profiler): throws InputError naming
// m.source_file and the field. Resolves m.p2p from m.p2p_policy when the matrix is empty.
void validate_machine(Machine& m);

// "h200x2-nvlink" -> models/hardware/h200x2-nvlink.json (via find_data_file); an existing path is
// returned unchanged. Unknown names throw InputError listing the shipped machines.
std::string resolve_machine_path(const std::string& name_or_path);

// Per-direction GB/s of a link after applying the derivation rules (explicit gbps, else
// nvlinks * gbps_per_link, else PCIe GT/s x width x line encoding / 8, before protocol overhead:
// Gen5 x16 = 63.0), so every consumer agrees. docs/schema.md lists the rules.
double link_capacity_gbps(const LinkSpec& l);
// One-way latency of a hop in seconds: latency_us if given, else the nominal default of its kind.
double link_latency_s(const LinkSpec& l);

// Whether plans on this machine run the residual add inside the next norm (vLLM's and SGLang's
// fused_add_rms_norm; the executor since session 15): true for a machine without measurements, for a
// profile whose meta says its executor fuses (kExecutorNormsKey, written by `peerplan profile` since
// then, whatever it measured) and for one that timed add_rms_norm; false for a profile of the
// executor before it, whose prices, and the runs validated with them, rest on the two kernels. The
// compiler emits the norms accordingly, so a profile prices what timed it.
inline constexpr const char* kExecutorNormsKey = "executor_norms";
inline constexpr const char* kFusedAddNorm = "fused_add_rms_norm";
bool fused_add_norm(const Machine& m);

}  // namespace peerplan
