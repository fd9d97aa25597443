#pragma once
// What a strategy script sees, built in C++: the model figures and the machine (GPUs, pairwise
// links per transfer mode, groups, symmetry) as JSON that lua_json pushes into the sandbox.
// plugins/README.md documents every field.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

nlohmann::json model_api_json(const ModelConfig& cfg, const ModelFigures& fig);
// Everything but the functions (lua_bindings adds transfer_time and link). `links` is [src][dst],
// 0-based in C++ (the binding translates Lua's 1-based tables).
nlohmann::json machine_api_json(const Topology& topo);

struct TransferEstimate {
  bool valid = false;
  double seconds = 0;
  std::string why_invalid;
  std::string source;  // the cost model's CostSource: "measured", "interpolated", ..., "nominal"
};
// Time to move `bytes` from GPU src to dst in `mode` ("peer", "peer_kernel", "nop2p", "host_staged"),
// priced by planner/cost (price_transfer): the profile's measured curve when there is one, else the
// route's nominal bottleneck and latency. Throws InputError for an unknown mode.
TransferEstimate estimate_transfer(const Topology& topo, int src, int dst, double bytes, const std::string& mode);

}  // namespace peerplan
