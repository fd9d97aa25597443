#pragma once
// Runs Lua strategies (plugins/*.lua or user files) and turns what they return into validated,
// memory-checked candidate plans. This is the entry point the search and the `plans` command use.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/strategy/lua_limits.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

// A parameter a strategy declares (`params = { tp = {type="int", default=0, help="..."} }`).
struct StrategyParam {
  std::string name;
  std::string type;           // "int", "number", "bool", "string"
  nlohmann::json default_value;
  std::string help;
};

struct StrategyInfo {
  std::string file;           // the script path it was loaded from
  std::string name;           // the script's `name`
  std::string description;
  std::vector<StrategyParam> params;  // sorted by name
};

struct CandidatePlan {
  Plan plan;                  // validated against the model and machine
  std::string strategy_file;  // which script proposed it
  MemoryReport memory;        // check_memory with the MemoryOptions given to run_strategies
};

// The shipped strategies: every plugins/*.lua (located with find_data_file), sorted by file name.
std::vector<std::string> builtin_strategy_files();
// "tensor_parallel" -> ".../plugins/tensor_parallel.lua"; an existing path is returned as is.
// Throws InputError listing the built-in names when neither exists.
std::string resolve_strategy(const std::string& name_or_path);

// Loads a script (sandboxed) and reads its name, description and parameters. Throws InputError
// naming the file (and line, for Lua errors) when the script is broken.
StrategyInfo describe_strategy(const std::string& file, const LuaLimits& limits = {});

// `--set key=value` pairs: parsed as "key=value"; throws InputError on a malformed pair.
std::map<std::string, std::string> parse_set_options(const std::vector<std::string>& pairs);

// Runs each script's candidates(model, machine, options), validates every returned plan (errors
// name the script and the plan index), checks memory, and drops structural duplicates (the first
// proposer keeps it; later ones are named in its notes). `files` empty means the built-ins.
// `sets` are typed against each strategy's declared parameters; a key no strategy declares is an
// InputError naming the valid keys.
std::vector<CandidatePlan> run_strategies(const std::vector<std::string>& files, const ModelConfig& cfg,
                                          const ModelFigures& fig, const Topology& topo,
                                          const std::map<std::string, std::string>& sets,
                                          const MemoryOptions& mem, const LuaLimits& limits = {});

}  // namespace peerplan
