#pragma once
// Human and machine views of a Topology: an `nvidia-smi topo -m`-style matrix with bandwidth,
// P2P and latency tables, a JSON dump (machine + derived routes and groups), Graphviz DOT.
// Each figure says where it came from: measured (profile) or nominal (link specs).
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "planner/topology/topology.hpp"

namespace peerplan {

struct Figure {
  double value = 0;        // GB/s for bandwidths, seconds for latencies
  bool measured = false;   // true: from the profile's measurements; false: nominal (graph)
  bool available = true;   // false: the mode cannot be used on this pair (e.g. no peer access)
};

// Bandwidths are read from the curve the cost model prices the pair from (pair_transfer_curve,
// transfer_curves.hpp): the throughput of its largest point, which is also the pricer's figure at
// that size; else the route's nominal capacity (the pricer derates it by
// CostOptions::link_efficiency and adds a set-up time).
// Peer copy bandwidth src -> dst; unavailable without usable P2P.
Figure peer_bandwidth(const Topology& t, int src, int dst);
// Host-staged bandwidth (across hosts: the network curve the pricer uses).
Figure host_staged_bandwidth(const Topology& t, int src, int dst);
// One-way latency: measured sm_pingpong, else ce_small, else the nominal route latency (peer
// route when usable, else host-staged).
Figure pair_latency(const Topology& t, int src, int dst);

// "396m", "63.0n", "-": a bandwidth cell as the matrix prints it.
std::string fmt_gbps(const Figure& f);

std::string render_matrix(const Topology& t);
std::string render_dot(const Topology& t);
nlohmann::json render_json(const Topology& t);
// render_json(t).dump(2), byte for byte, without holding every pair as a JSON value at once
// (a 1024-GPU machine has a million pairs: 5.9 GB as one document, ~0.4 GB as text).
std::string render_json_text(const Topology& t);
// The same text handed to `sink` in parts of about 1 MiB (1024 GPUs: ~400 MB, never held whole).
void render_json_text(const Topology& t, const std::function<void(std::string_view)>& sink);

}  // namespace peerplan
