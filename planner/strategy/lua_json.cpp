#include "planner/strategy/lua_json.hpp"

#include <cmath>
#include <map>

#include <lua.hpp>

#include "planner/core/error.hpp"

namespace peerplan {

void push_json(lua_State* L, const nlohmann::json& j) {
  luaL_checkstack(L, 4, "push_json");
  switch (j.type()) {
    case nlohmann::json::value_t::null: lua_pushnil(L); break;
    case nlohmann::json::value_t::boolean: lua_pushboolean(L, j.get<bool>()); break;
    case nlohmann::json::value_t::number_integer: lua_pushinteger(L, j.get<int64_t>()); break;
    case nlohmann::json::value_t::number_unsigned: lua_pushinteger(L, lua_Integer(j.get<uint64_t>())); break;
    case nlohmann::json::value_t::number_float: lua_pushnumber(L, j.get<double>()); break;
    case nlohmann::json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      break;
    }
    case nlohmann::json::value_t::array: {
      lua_createtable(L, int(j.size()), 0);
      lua_Integer i = 1;
      for (const auto& v : j) {
        push_json(L, v);
        lua_rawseti(L, -2, i++);
      }
      break;
    }
    case nlohmann::json::value_t::object: {
      lua_createtable(L, 0, int(j.size()));
      for (auto it = j.begin(); it != j.end(); ++it) {
        push_json(L, it.value());
        lua_setfield(L, -2, it.key().c_str());
      }
      break;
    }
    default: lua_pushnil(L); break;
  }
}

namespace {

// Field names in errors are written as the script reads the value: "stages[2].gpus" (Lua's
// 1-based positions), no leading slash.
std::string field_of(const std::string& path) { return path.empty() ? "" : (path[0] == '/' ? path.substr(1) : path); }

using Budget = LuaJsonBudget;

void spend(Budget& b, int64_t bytes, const std::string& origin, const std::string& path) {
  b.left -= bytes;
  if (b.left < 0)
    throw InputError(origin, field_of(path),
                     "a result under the script's memory cap of " + std::to_string(b.total >> 20) +
                         " MiB once converted (shared subtables are copied per reference; return plain data)");
}

nlohmann::json convert(lua_State* L, int index, const std::string& origin, const std::string& path, int depth,
                       Budget& budget) {
  index = lua_absindex(L, index);
  spend(budget, 32, origin, path);
  if (depth > 32) throw InputError(origin, field_of(path), "tables nested at most 32 deep (a cycle?)");
  switch (lua_type(L, index)) {
    case LUA_TNIL: return nullptr;
    case LUA_TBOOLEAN: return bool(lua_toboolean(L, index));
    case LUA_TNUMBER: {
      if (lua_isinteger(L, index)) return int64_t(lua_tointeger(L, index));
      double d = lua_tonumber(L, index);
      if (!std::isfinite(d)) throw InputError(origin, field_of(path), "a finite number, got " + std::to_string(d));
      if (d == std::floor(d) && std::fabs(d) < 9.0e15) return int64_t(d);  // 2.0 from arithmetic is an integer
      return d;
    }
    case LUA_TSTRING: {
      size_t len = 0;
      const char* s = lua_tolstring(L, index, &len);
      spend(budget, int64_t(len), origin, path);
      return std::string(s, len);
    }
    case LUA_TTABLE: break;
    default:
      throw InputError(origin, field_of(path),
                       std::string("a number, string, boolean or table, got a ") + luaL_typename(L, index));
  }
  luaL_checkstack(L, 4, "lua_to_json");
  // Collect keys first: integer keys decide between array and object.
  std::map<std::string, nlohmann::json> fields;
  std::map<lua_Integer, nlohmann::json> items;
  bool other_keys = false;
  lua_pushnil(L);
  while (lua_next(L, index) != 0) {
    // Key at -2, value at -1. Never lua_tostring the key in place (it would confuse lua_next).
    std::string key;
    if (lua_type(L, -2) == LUA_TNUMBER && lua_isinteger(L, -2)) {
      lua_Integer k = lua_tointeger(L, -2);
      key = std::to_string(k);
      items[k] = convert(L, -1, origin, path + "[" + key + "]", depth + 1, budget);  // as the script indexes it
    } else if (lua_type(L, -2) == LUA_TSTRING) {
      size_t len = 0;
      const char* s = lua_tolstring(L, -2, &len);
      key.assign(s, len);
      fields[key] = convert(L, -1, origin, path + (path.empty() ? "" : ".") + key, depth + 1, budget);
      other_keys = true;
    } else {
      lua_pop(L, 2);
      throw InputError(origin, field_of(path), "table keys that are strings or integers");
    }
    lua_pop(L, 1);
  }
  bool sequence = !other_keys;
  if (sequence) {
    lua_Integer expect = 1;
    for (const auto& [k, v] : items) {
      if (k != expect++) { sequence = false; break; }
    }
  }
  if (sequence) {
    nlohmann::json a = nlohmann::json::array();
    for (auto& [k, v] : items) a.push_back(std::move(v));
    return a;
  }
  nlohmann::json o = nlohmann::json::object();
  for (auto& [k, v] : items) o[std::to_string(k)] = std::move(v);
  for (auto& [k, v] : fields) o[k] = std::move(v);
  return o;
}

}  // namespace

nlohmann::json lua_to_json(lua_State* L, int index, const std::string& origin, const std::string& path,
                           int64_t budget_bytes) {
  Budget b{budget_bytes, budget_bytes};
  return convert(L, index, origin, path, 0, b);
}

std::string lua_field_name(const std::string& pointer_field, const nlohmann::json& doc) {
  std::string out;
  const nlohmann::json* node = &doc;
  size_t start = 0;
  while (start <= pointer_field.size() && !pointer_field.empty()) {
    size_t slash = pointer_field.find('/', start);
    std::string seg = pointer_field.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    bool index = node && node->is_array() && !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos &&
                 seg.size() < 10;
    if (index) {
      size_t i = std::stoul(seg);
      out += "[" + std::to_string(i + 1) + "]";
      node = i < node->size() ? &(*node)[i] : nullptr;
    } else {
      out += (out.empty() ? "" : ".") + seg;
      node = node && node->is_object() && node->contains(seg) ? &(*node)[seg] : nullptr;
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

nlohmann::json lua_to_json(lua_State* L, int index, const std::string& origin, const std::string& path,
                           LuaJsonBudget& budget) {
  return convert(L, index, origin, path, 0, budget);
}

}  // namespace peerplan
