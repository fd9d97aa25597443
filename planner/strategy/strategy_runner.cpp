#include "planner/strategy/strategy_runner.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <lua.hpp>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/strategy/lua_bindings.hpp"
#include "planner/strategy/lua_host.hpp"
#include "planner/strategy/lua_isolate.hpp"
#include "planner/strategy/lua_json.hpp"
#include "planner/strategy/strategy_api.hpp"

namespace peerplan {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lua_files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".lua") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

const char* kShape =
    "the script to return a table {name = \"...\", description = \"...\", params = {key = {type = \"int\", "
    "default = 0, help = \"...\"}}, candidates = function(model, machine, options) return {plan, ...} end}";

// Reads t[key] without metamethods: a returned table's __index would otherwise run script code
// outside any protected call (no limits, no error handler).
void raw_field(lua_State* L, int t, const char* key) {
  t = lua_absindex(L, t);
  lua_pushstring(L, key);
  lua_rawget(L, t);
}

// A loaded strategy: its Lua state with the returned table at stack index 1.
struct Loaded {
  std::unique_ptr<LuaHost> host;
  StrategyInfo info;
};

std::string type_of_default(const nlohmann::json& v) {
  if (v.is_boolean()) return "bool";
  if (v.is_number_integer()) return "int";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  return "";
}

Loaded load_strategy(const std::string& file, const LuaLimits& limits) {
  Loaded s;
  s.host = std::make_unique<LuaHost>(file, limits);
  lua_State* L = s.host->state();
  // The helper library: plugins/lib/<name>.lua -> global lib.<name>, loaded in name order.
  lua_newtable(L);
  lua_setglobal(L, "lib");
  for (const auto& path : lua_files_in(find_data_file("plugins/lib"))) {
    std::string stem = fs::path(path).stem().string();
    s.host->run_file(path, 1, "loading the helper library lib/" + stem + ".lua");
    lua_getglobal(L, "lib");
    lua_insert(L, -2);
    lua_setfield(L, -2, stem.c_str());
    lua_pop(L, 1);
  }
  s.host->run_file(file, 1, "loading the strategy");
  if (!lua_istable(L, -1)) throw InputError(file, "", std::string("expected ") + kShape);
  auto str_field = [&](const char* key, bool required) {
    raw_field(L, -1, key);
    std::string v;
    if (lua_type(L, -1) == LUA_TSTRING) v = lua_tostring(L, -1);
    else if (required || !lua_isnil(L, -1))
      throw InputError(file, key, std::string("a string; expected ") + kShape);
    lua_pop(L, 1);
    return v;
  };
  s.info.file = file;
  s.info.name = str_field("name", true);
  s.info.description = str_field("description", false);
  raw_field(L, -1, "candidates");
  if (!lua_isfunction(L, -1)) throw InputError(file, "candidates", std::string("a function; expected ") + kShape);
  lua_pop(L, 1);
  raw_field(L, -1, "params");
  if (!lua_isnil(L, -1)) {
    nlohmann::json params = lua_to_json(L, -1, file, "/params", limits.memory_bytes);
    if (!params.is_object() && !(params.is_array() && params.empty()))
      throw InputError(file, "params", "a table keyed by parameter name");
    if (params.is_object()) {
      for (auto it = params.begin(); it != params.end(); ++it) {
        StrategyParam p;
        p.name = it.key();
        const auto& v = it.value();
        if (v.is_object()) {
          // A script's table can hold anything: check types here, not in nlohmann's value() (which
          // throws a type_error that names neither the file nor the field).
          auto text = [&](const char* key, std::string fallback) {
            auto f = v.find(key);
            if (f == v.end() || f->is_null()) return fallback;
            if (!f->is_string()) throw InputError(file, "params/" + p.name + "/" + key, "a string");
            return f->get<std::string>();
          };
          p.default_value = v.value("default", nlohmann::json());
          p.type = text("type", type_of_default(p.default_value));
          p.help = text("help", "");
        } else {
          p.default_value = v;  // shorthand: params = { tp = 0 }
          p.type = type_of_default(v);
        }
        if (p.type == "integer") p.type = "int";
        if (p.type != "int" && p.type != "number" && p.type != "bool" && p.type != "string")
          throw InputError(file, "params/" + p.name + "/type", "one of int, number, bool, string");
        if (p.default_value.is_null())
          throw InputError(file, "params/" + p.name + "/default", "a default value of type " + p.type);
        bool ok = (p.type == "bool" && p.default_value.is_boolean()) ||
                  (p.type == "int" && p.default_value.is_number_integer()) ||
                  (p.type == "number" && p.default_value.is_number()) ||
                  (p.type == "string" && p.default_value.is_string());
        if (!ok) throw InputError(file, "params/" + p.name + "/default", "a value of type " + p.type);
        s.info.params.push_back(std::move(p));
      }
    }
  }
  lua_pop(L, 1);
  return s;
}

nlohmann::json typed_value(const StrategyParam& p, const std::string& text, const std::string& strategy) {
  auto bad = [&](const char* what) {
    return InputError("", "--set " + p.name,
                      fmt::format("{} for parameter '{}' of {} ({}), got '{}'", what, p.name, strategy,
                                  p.help.empty() ? "no description" : p.help, text));
  };
  if (p.type == "string") return text;
  if (p.type == "bool") {
    if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "0" || text == "no" || text == "off") return false;
    throw bad("true or false");
  }
  size_t pos = 0;
  try {
    if (p.type == "int") {
      long long v = std::stoll(text, &pos);
      if (pos == text.size()) return int64_t(v);
    } else {
      double v = std::stod(text, &pos);
      if (pos == text.size()) return v;
    }
  } catch (const std::exception&) {
  }
  throw bad(p.type == "int" ? "an integer" : "a number");
}

std::string structural_key(const Plan& p) {
  nlohmann::json j = plan_to_json(p);
  j.erase("name");
  j.erase("strategy");
  j.erase("notes");
  j.erase("extra");
  return j.dump();
}

nlohmann::json info_to_json(const StrategyInfo& info) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : info.params)
    params.push_back({{"name", p.name}, {"type", p.type}, {"default", p.default_value}, {"help", p.help}});
  return {{"file", info.file}, {"name", info.name}, {"description", info.description}, {"params", params}};
}

StrategyInfo info_from_json(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw RuntimeError("a strategy process returned no description of " + file);
  StrategyInfo info;
  info.file = file;
  info.name = j.value("name", "");
  info.description = j.value("description", "");
  for (const auto& p : j.value("params", nlohmann::json::array()))
    info.params.push_back({p.value("name", ""), p.value("type", ""), p.value("default", nlohmann::json()), p.value("help", "")});
  return info;
}

// What runs in the strategy's process: load it, call candidates(model, machine, options), and
// convert the returned plans to JSON. Plans are converted one by one so errors name the plan's
// position; one conversion budget (the script's memory cap) covers all of them, so neither shared
// subtables nor one large value returned in many plans can multiply past it.
nlohmann::json candidates_job(const std::string& file, const LuaLimits& limits, const nlohmann::json& model_json,
                              const nlohmann::json& machine_json, const CostModel& cost, const nlohmann::json& options) {
  Loaded s = load_strategy(file, limits);
  lua_State* L = s.host->state();
  raw_field(L, -1, "candidates");
  push_json(L, model_json);
  push_json(L, machine_json);
  open_machine_bindings(L, -1, &cost);
  push_json(L, options);
  s.host->call(3, 1, "candidates(model, machine, options)");
  if (!lua_istable(L, -1))
    throw InputError(file, "candidates()", std::string("a list of plan tables (return {} when no plan applies), got a ") +
                                               luaL_typename(L, -1));
  lua_Integer count = lua_Integer(lua_rawlen(L, -1));
  if (count > lua_Integer(kMaxPlansPerStrategy))
    throw InputError(file, "candidates()", fmt::format("at most {} plans, got {}", kMaxPlansPerStrategy, count));
  LuaJsonBudget budget{limits.memory_bytes, limits.memory_bytes};
  nlohmann::json plans = nlohmann::json::array();
  for (lua_Integer i = 1; i <= count; ++i) {
    lua_rawgeti(L, -1, i);
    std::string origin = fmt::format("{}: plan #{}", file, i);
    plans.push_back(lua_to_json(L, -1, origin, "", budget));
    try {
      check_plan_bounds(plans.back(), origin);
    } catch (const InputError& e) {
      throw InputError(e.file(), lua_field_name(e.field(), plans.back()), e.expected());
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return plans;
}

}  // namespace

std::vector<std::string> builtin_strategy_files() { return lua_files_in(find_data_file("plugins")); }

std::string resolve_strategy(const std::string& name_or_path) {
  std::error_code ec;  // a FIFO or a symlink loop is the user's file: the reader says what is wrong
  if (path_present(name_or_path) && !fs::is_directory(name_or_path, ec)) return name_or_path;
  std::string shipped = find_data_file("plugins/" + name_or_path + ".lua");
  if (fs::is_regular_file(shipped)) return shipped;
  std::vector<std::string> names;
  for (const auto& f : builtin_strategy_files()) names.push_back(fs::path(f).stem().string());
  throw InputError("", "--strategy",
                   fmt::format("an existing .lua file or a built-in strategy name ({}); got '{}'",
                               names.empty() ? std::string("none found: is plugins/ next to the binary or $PEERPLAN_HOME set?")
                                             : fmt::format("{}", fmt::join(names, ", ")),
                               name_or_path));
}

StrategyInfo describe_strategy(const std::string& file, const LuaLimits& limits) {
  nlohmann::json j = run_isolated(file, limits, [&] { return info_to_json(load_strategy(file, limits).info); });
  return info_from_json(j, file);
}

std::map<std::string, std::string> parse_set_options(const std::vector<std::string>& pairs) {
  std::map<std::string, std::string> out;
  for (const auto& s : pairs) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError("", "--set", "key=value (e.g. --set tp=4), got '" + s + "'");
    out[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return out;
}

void check_plan_bounds(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) return;  // parse_plan_json says what a plan must be
  auto too_long = [&](const std::string& field, size_t cap, size_t got) {
    throw InputError(origin, field, fmt::format("at most {} bytes, got {}", cap, got));
  };
  for (auto [key, cap] : {std::pair<const char*, size_t>{"name", kMaxPlanNameBytes}, {"strategy", kMaxStrategyNameBytes}})
    if (auto it = j.find(key); it != j.end() && it->is_string() && it->get_ref<const std::string&>().size() > cap)
      too_long(key, cap, it->get_ref<const std::string&>().size());
  if (auto it = j.find("notes"); it != j.end()) {
    if (it->is_array() && it->size() > kMaxPlanNotes)
      throw InputError(origin, "notes", fmt::format("at most {} notes, got {}", kMaxPlanNotes, it->size()));
    if (it->is_string() && it->get_ref<const std::string&>().size() > kMaxPlanNoteBytes)
      too_long("notes", kMaxPlanNoteBytes, it->get_ref<const std::string&>().size());
    if (it->is_array())
      for (size_t i = 0; i < it->size(); ++i)
        if ((*it)[i].is_string() && (*it)[i].get_ref<const std::string&>().size() > kMaxPlanNoteBytes)
          too_long(fmt::format("notes/{}", i), kMaxPlanNoteBytes, (*it)[i].get_ref<const std::string&>().size());
  }
  if (auto it = j.find("extra"); it != j.end()) {
    size_t bytes = it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
    if (bytes > kMaxPlanExtraBytes)
      throw InputError(origin, "extra", fmt::format("at most {} KiB of data as JSON, got {} KiB", kMaxPlanExtraBytes >> 10,
                                                    (bytes + 1023) >> 10));
  }
}

std::vector<CandidatePlan> run_strategies(const std::vector<std::string>& files_in, const ModelConfig& cfg,
                                          const ModelFigures& fig, const CostModel& cost,
                                          const std::map<std::string, std::string>& sets,
                                          const MemoryOptions& mem, const LuaLimits& limits_in,
                                          std::vector<StrategyFailure>* failures_out) {
  const Topology& topo = cost.topology();
  const LuaLimits limits = for_machine(limits_in, topo.gpu_count());  // defaults grow with the machine
  std::vector<std::string> files = files_in.empty() ? builtin_strategy_files() : files_in;
  if (files.empty())
    throw InputError("", "--strategy", "at least one strategy; no plugins/*.lua found (set $PEERPLAN_HOME)");
  const nlohmann::json model_json = model_api_json(cfg, fig);
  const nlohmann::json machine_json = machine_api_json_without_links(topo);  // links: lazy (lua_bindings)

  // Failures are kept whole: when every strategy fails, the first is thrown as it was raised.
  std::vector<std::pair<std::string, InputError>> failed;
  std::vector<StrategyInfo> infos;
  std::set<std::string> declared;
  for (const auto& f : files) {
    try {
      infos.push_back(describe_strategy(f, limits));
    } catch (const InputError& e) {
      failed.emplace_back(f, e);
      continue;
    }
    for (const auto& p : infos.back().params) declared.insert(p.name + " (" + infos.back().name + ")");
  }
  for (const auto& [key, value] : sets) {
    bool known = false;
    for (const auto& s : infos)
      for (const auto& p : s.params) known = known || p.name == key;
    if (!known && failed.empty())
      throw InputError("", "--set " + key,
                       fmt::format("a parameter of the selected strategies: {}",
                                   declared.empty() ? std::string("they declare none") : fmt::format("{}", fmt::join(declared, ", "))));
  }

  std::vector<CandidatePlan> out;
  std::map<std::string, size_t> seen;  // structural key -> index in out
  for (const auto& info : infos) {
    const std::string& file = info.file;
    nlohmann::json options = nlohmann::json::object();
    for (const auto& p : info.params) {
      auto it = sets.find(p.name);
      options[p.name] = it == sets.end() ? p.default_value : typed_value(p, it->second, info.name);
    }
    std::vector<CandidatePlan> mine;
    std::vector<std::string> also;  // notes for earlier plans this strategy proposed again
    std::vector<size_t> also_at;
    try {
      nlohmann::json plans = run_isolated(file, limits, [&] {
        return candidates_job(file, limits, model_json, machine_json, cost, options);
      });
      if (!plans.is_array()) throw RuntimeError("a strategy process returned no list of plans");
      for (size_t i = 0; i < plans.size(); ++i) {
        nlohmann::json& j = plans[i];
        std::string origin = fmt::format("{}: plan #{}", file, i + 1);
        try {
          check_plan_bounds(j, origin);
        } catch (const InputError& e) {
          throw InputError(e.file(), lua_field_name(e.field(), j), e.expected());
        }
        if (j.is_object()) {
          if (!j.contains("strategy")) j["strategy"] = info.name;
          if (j.contains("name") && j["name"].is_string()) origin += " (" + j["name"].get<std::string>() + ")";
        }
        CandidatePlan c;
        try {
          c.plan = parse_plan_json(j, origin);
          validate_plan_for_model(c.plan, cfg, topo.gpu_count(), origin);
        } catch (const InputError& e) {
          // The plan readers name JSON positions (0-based); say it as the script wrote it.
          throw InputError(e.file(), lua_field_name(e.field(), j), e.expected());
        }
        c.strategy_file = file;
        mine.push_back(std::move(c));
      }
    } catch (const InputError& e) {
      failed.emplace_back(file, e);
      continue;
    }
    for (auto& c : mine) {
      auto key = structural_key(c.plan);
      if (auto it = seen.find(key); it != seen.end()) {
        out[it->second].plan.notes.push_back("also proposed by " + info.name + " as " + c.plan.name);
        continue;
      }
      c.memory = check_memory(c.plan, cfg, fig, topo.machine(), mem);
      seen[key] = out.size();
      out.push_back(std::move(c));
    }
  }
  if (!failed.empty() && failed.size() == files.size()) throw failed.front().second;
  for (const auto& [file, e] : failed) {
    if (failures_out) failures_out->push_back({file, e.what()});
    else
      std::cerr << fmt::format("peerplan: warning: strategy {} failed; its plans are left out:\n{}\n", file, e.what());
  }
  // Names must be unique for reports and --plan selection: suffix repeats.
  std::map<std::string, int> names;
  for (auto& c : out)
    if (int k = names[c.plan.name]++; k > 0) c.plan.name += fmt::format("#{}", k + 1);
  return out;
}

}  // namespace peerplan
