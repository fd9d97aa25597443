#pragma once
// --moe-routing, the same on plan, plans, simulate and validate (issue 14): which experts each
// token of a MoE model goes to. It replaces the workload's "moe_routing" object; the result is
// bound to the model so the compiler, the simulator and the executor route alike.
#include <string>

#include <CLI/CLI.hpp>

#include "planner/model/model_config.hpp"
#include "planner/model/routing_model.hpp"
#include "planner/model/workload.hpp"

namespace peerplan::cli {

inline constexpr const char* kMoeRoutingHelp =
    "MoE routing: uniform (each token picks top-k distinct experts uniformly), zipf:S (expert popularity\n"
    "~ 1/rank^S, hot experts scattered over the ids), or popularity:FILE.json (a JSON array of one weight\n"
    "per routed expert); add ,seed=N for another draw. Default: the workload's \"moe_routing\", else uniform";

inline void add_moe_routing_option(CLI::App* sub, std::string& into) {
  sub->add_option("--moe-routing", into, kMoeRoutingHelp)->type_name("uniform|zipf:S|popularity:FILE");
}

// `arg` (when given) replaces w's routing; the routing is checked against the model (a popularity
// list needs one weight per expert) and bound to cfg. Throws InputError naming --moe-routing or
// the file and field the routing came from.
inline void bind_moe_routing(const std::string& arg, Workload& w, ModelConfig& cfg) {
  if (!arg.empty()) w.moe_routing = routing::parse_routing_arg(arg);
  routing::check_routing_for_model(w.moe_routing, cfg.experts, cfg.name);
  cfg.moe_routing = w.moe_routing;
}

}  // namespace peerplan::cli
