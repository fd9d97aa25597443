#pragma once
// The Boost.Graph model of a machine: typed vertices (GPU, PCIe switch, host bridge, CPU socket,
// NVSwitch, NIC) and directed edges with per-direction capacity and latency (each physical link of
// the schema becomes two directed edges, so the two directions of a link never contend).
// Host memory of a socket is modelled as an edge cpuN -> cpuN ("memory bus", capacity mem_gbps,
// infinite when unknown) that host-staged routes list twice: the D2H write and the H2D read both
// consume it, and max_min_rates counts an edge once per appearance in a flow.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "planner/topology/machine.hpp"

namespace peerplan {

enum class TransferMode {
  PeerCopyEngine,  // cudaMemcpyPeer with peer access enabled (NVLink or PCIe P2P)
  PeerKernel,      // SM loads/stores into peer memory
  RuntimeNoP2P,    // cudaMemcpyPeer with peer access disabled: the driver stages through the host
  HostStaged,      // application D2H into pinned memory, then H2D
};
const char* to_string(TransferMode m);
std::optional<TransferMode> transfer_mode_from_string(const std::string& s);  // "peer","peer_kernel","nop2p","host_staged"

// The nvidia-smi topo -m / NCCL vocabulary, best (smallest) first.
enum class PathType { Self, NV, PIX, PXB, PHB, NODE, SYS, None };
std::string to_string(PathType t, int nvlinks = 0);  // "NV18", "PIX", ...

struct VertexProps {
  NodeKind kind = NodeKind::Gpu;
  std::string id;
  int gpu = -1;   // GPU ordinal for GPU vertices
  int numa = -1;
};

struct EdgeProps {
  LinkKind kind = LinkKind::Pcie;
  double capacity_Bps = 0;  // bytes per second, this direction
  double latency_s = 0;
  int nvlinks = 0;
  int pcie_gen = 0, pcie_width = 0;
  bool memory_bus = false;  // the cpuN -> cpuN host-memory edge
  int index = 0;            // dense edge index 0..E-1, for contention vectors
};

using TopoGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, EdgeProps>;
using Vertex = boost::graph_traits<TopoGraph>::vertex_descriptor;
using Edge = boost::graph_traits<TopoGraph>::edge_descriptor;

struct Route {
  bool valid = false;
  std::string why_invalid;        // e.g. "P2P not supported between GPU 0 and GPU 3 (different root complexes)"
  TransferMode mode = TransferMode::PeerCopyEngine;
  PathType type = PathType::None;
  int nvlinks = 0;
  std::vector<int> edges;         // dense edge indices in order
  double bottleneck_Bps = 0;      // min capacity along the route (host-staged: across both legs)
  double latency_s = 0;           // sum of hop latencies
  std::string describe;           // "gpu0 -> sw0 -> gpu1"
  bool network = false;           // crosses hosts: GPU -> PCIe -> NIC -> network -> NIC -> PCIe -> GPU
};

class Topology {
 public:
  explicit Topology(const Machine& m);  // throws InputError for an invalid machine
  const Machine& machine() const { return machine_; }
  const TopoGraph& graph() const { return g_; }
  int gpu_count() const;
  int edge_count() const { return int(edges_.size()); }
  Edge edge(int index) const { return edges_[size_t(index)]; }
  const EdgeProps& edge_props(int index) const { return g_[edges_[size_t(index)]]; }
  std::string edge_name(int index) const;  // "gpu0->sw0"
  Vertex gpu_vertex(int gpu) const;

  // Route between two GPUs in a mode. Peer modes require usable P2P in that direction;
  // HostStaged/RuntimeNoP2P go GPU -> ... -> socket memory -> ... -> GPU via the source's socket;
  // between hosts (a merged MPI profile) they go over the network instead: GPU -> PCIe -> the
  // GPU's nearest NIC -> network link -> the other host's NIC -> PCIe -> GPU (GPUDirect RDMA, as
  // NCCL moves data between hosts), with Route::network set.
  Route route(int src, int dst, TransferMode mode) const;
  // Hosts: GPUs joined without a network link share one (index in order of their lowest GPU).
  int host_of(int gpu) const { return host_of_[size_t(gpu)]; }
  PathType path_type(int a, int b) const;   // as nvidia-smi topo -m would print it
  int nvlinks_between(int a, int b) const;  // direct NVLink count (through an NVSwitch: per GPU links)
  bool p2p_usable(int src, int dst) const;
  PathType pcie_path_type(int a, int b) const;  // the PCIe-only path type (what host-staged traffic crosses)
  std::string p2p_why_not(int src, int dst) const;  // "" if usable, else the reason in words

  // The CPU socket a GPU hangs off (its PCIe path reaches it without crossing an SMP link):
  // the socket's vertex and its NUMA index.
  Vertex socket_vertex(int gpu) const;
  int socket_numa(int gpu) const;
  std::optional<Vertex> find_vertex(const std::string& id) const;
  const std::string& vertex_id(Vertex v) const { return g_[v].id; }

  // Groups of GPUs, each sorted, groups sorted: NVLink islands (connected by NVLink or an
  // NVSwitch), GPUs under one PCIe switch, GPUs on one socket.
  std::vector<std::vector<int>> nvlink_islands() const;
  std::vector<std::vector<int>> switch_groups() const;
  std::vector<std::vector<int>> socket_groups() const;

  // Symmetry: GPU a and b are interchangeable if swapping them is an automorphism of the graph
  // (same path types and capacities to every other GPU). Returns a class id per GPU.
  std::vector<int> symmetry_classes() const;

 private:
  // Shortest path (in hops) over edges of the allowed kinds whose intermediate vertices are of
  // the allowed kinds; empty if none. Returns dense edge indices.
  std::vector<int> shortest_path(Vertex s, Vertex t, bool nvlink, bool pcie_smp) const;
  std::vector<int> nvlink_path(int a, int b) const;
  std::vector<int> pcie_path(Vertex s, Vertex t) const;
  Route make_route(std::vector<int> edges, TransferMode mode, PathType type, int nvlinks) const;
  Route network_route(int src, int dst, TransferMode mode) const;
  void check_gpu(int g) const;
  // Breadth-first trees from every GPU, CPU socket and NIC, built once in the constructor:
  // shortest_path from those sources walks a tree instead of searching the graph, so routing all
  // pairs of a 1024-GPU machine takes seconds, not minutes. Same paths as the search (same
  // visiting order).
  void build_path_trees();
  std::vector<int> tree_path(const std::vector<int>& pred, Vertex s, Vertex t) const;

  Machine machine_;
  TopoGraph g_;
  std::vector<Edge> edges_;
  std::vector<Vertex> gpu_vertices_;
  std::vector<Vertex> socket_of_;        // per GPU
  std::vector<int> memory_edge_;         // per vertex: dense index of its memory edge, -1 if none
  std::vector<int> host_of_;             // per GPU
  std::vector<int> vertex_host_;         // per vertex (-1: reachable from no GPU without the network)
  std::map<std::string, Vertex> vertex_by_id_;
  // [0]: NVLink-only trees, [1]: PCIe+SMP trees; per source vertex, the dense index of the edge
  // that reached each vertex (-1: not reached); empty for vertices that are not sources.
  std::vector<std::vector<int>> trees_[2];
  std::vector<int> nearest_nic_;                    // per GPU: vertex of its nearest NIC, -1 none
  std::vector<std::vector<int>> nearest_nic_path_;  // per GPU: the PCIe path to it
  std::map<std::pair<Vertex, Vertex>, int> network_edge_;  // (NIC a, NIC b) -> dense edge index
};

// Max-min fair rates (progressive filling) for concurrent flows. flow_edges[f] lists the dense edge
// indices flow f crosses; capacity[e] is bytes/s. A flow with no edges gets +inf.
// Optionally each flow has a demand cap (bytes/s; <= 0 means uncapped).
// flow_weights (optional, shaped as flow_edges): what a flow consumes of an edge per byte/s of its rate
// (1 where absent; an edge listed twice adds both): a resource that is not bytes, such as a GPU's SM slots, which a
// kernel fills at its own solo rate (weight 1 / that rate).
std::vector<double> max_min_rates(const std::vector<std::vector<int>>& flow_edges,
                                  const std::vector<double>& capacity,
                                  const std::vector<double>& demand = {},
                                  const std::vector<std::vector<double>>& flow_weights = {});

}  // namespace peerplan
