#pragma once
// What a strategy script sees, built in C++: the model figures and the machine (GPUs, pairwise
// links per transfer mode, groups, symmetry) as JSON that lua_json pushes into the sandbox.
// plugins/README.md documents every field.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/cost/cost_model.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

nlohmann::json model_api_json(const ModelConfig& cfg, const ModelFigures& fig);
// Everything but the functions (lua_bindings adds transfer_time and link). `links` is [src][dst],
// 0-based in C++ (the binding translates Lua's 1-based tables).
nlohmann::json machine_api_json(const Topology& topo);
// The same with `links` empty: the strategy runner fills machine.links lazily from link_api_json
// (a 1024-GPU machine has a million ordered pairs; a script reads a few thousand).
nlohmann::json machine_api_json_without_links(const Topology& topo);
// One entry of `links`: the ordered pair a -> b (a == b gives the self entry).
nlohmann::json link_api_json(const Topology& topo, int a, int b);

struct TransferEstimate {
  bool valid = false;
  double seconds = 0;
  std::string why_invalid;
  std::string source;  // the cost model's CostSource: "measured", "interpolated", ..., "nominal"
};
// Time to move `bytes` from GPU src to dst in `mode` ("peer", "peer_kernel", "nop2p", "host_staged"),
// priced by the simulator's own pricer (CostModel::transfer: same options, same measured and
// network curves), so a strategy is shown the price the simulation will charge. Throws InputError
// for an unknown mode.
TransferEstimate estimate_transfer(const CostModel& cost, int src, int dst, double bytes, const std::string& mode);

}  // namespace peerplan
