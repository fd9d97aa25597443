#pragma once
// Runs Lua strategies (plugins/*.lua or user files) and turns what they return into validated,
// memory-checked candidate plans. This is the entry point the search and the `plans` command use.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
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

// Bounds on what a strategy hands over: a script's values cross into C++ (and into every report)
// only within these, whatever its own memory cap. An excess is an InputError naming the script,
// the plan and the field.
inline constexpr size_t kMaxPlansPerStrategy = 10000;
inline constexpr size_t kMaxPlanNameBytes = 8192;    // name: room for every GPU id of a 1024-GPU plan
inline constexpr size_t kMaxStrategyNameBytes = 256; // strategy
inline constexpr size_t kMaxPlanNotes = 64;
inline constexpr size_t kMaxPlanNoteBytes = 4096;    // each note
inline constexpr size_t kMaxPlanExtraBytes = 256 << 10;  // `extra` as compact JSON

// A strategy that failed (script error, limit, invalid plan): its plans are left out, the other
// strategies' plans are still returned.
struct StrategyFailure {
  std::string file;
  std::string message;  // the InputError's full text (names the script, line or plan and field)
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
// InputError naming the valid keys. `cost` is the simulator's cost model (its topology is the
// machine the scripts see): machine.transfer_time prices with it, so a strategy is shown the price
// the simulation charges.
// Each strategy runs in its own child process (LuaLimits::isolate). A strategy that fails is left
// out: its error goes to `failures`, or to stderr as a warning when `failures` is null; when every
// strategy failed, the first failure is thrown (InputError, exit 2).
std::vector<CandidatePlan> run_strategies(const std::vector<std::string>& files, const ModelConfig& cfg,
                                          const ModelFigures& fig, const CostModel& cost,
                                          const std::map<std::string, std::string>& sets,
                                          const MemoryOptions& mem, const LuaLimits& limits = {},
                                          std::vector<StrategyFailure>* failures = nullptr);

// Checks one plan as a script returned it against the bounds above; throws InputError(origin, field, ...).
void check_plan_bounds(const nlohmann::json& plan, const std::string& origin);

}  // namespace peerplan
