#pragma once
// Conversions between Lua values and JSON, for handing figures to scripts and reading plans back.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

struct lua_State;

namespace peerplan {

// Pushes `j` as a Lua value: objects -> tables with string keys, arrays -> sequences (1-based),
// null -> nil (so absent and null read the same in a script).
void push_json(lua_State* L, const nlohmann::json& j);

// Converts the Lua value at `index`: a table whose keys are exactly 1..n is an array (the empty
// table is an empty array), any other table an object. Functions, userdata, threads, NaN/inf and
// cycles are refused with InputError(origin, <path>, ...), path as the script writes it:
// "stages[2].gpus" (1-based).
// `budget_bytes` bounds the result (32 bytes per value plus string lengths): a DAG of shared
// subtables is copied per reference, so a few Lua tables can otherwise expand exponentially.
nlohmann::json lua_to_json(lua_State* L, int index, const std::string& origin, const std::string& path = "",
                           int64_t budget_bytes = 256LL << 20);

// One budget shared by several conversions (every plan of one strategy): a script cannot multiply
// its memory cap by returning the same large value in many plans.
struct LuaJsonBudget {
  int64_t left;
  int64_t total;
};
nlohmann::json lua_to_json(lua_State* L, int index, const std::string& origin, const std::string& path,
                           LuaJsonBudget& budget);

// A field named as a JSON pointer into `doc` ("stages/1/layer_begin", 0-based, as the plan JSON
// readers name it) rewritten as a script reads the same value: "stages[2].layer_begin".
std::string lua_field_name(const std::string& pointer_field, const nlohmann::json& doc);

}  // namespace peerplan
