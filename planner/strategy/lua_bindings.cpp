// The one file of C functions a strategy script can call (as lua.c's own libraries do it):
// luaL_Reg tables, luaL_check* on every argument, and no C++ exception ever crossing into Lua.
// Pattern in every function: read and check the arguments first (luaL_check* may longjmp, so no
// C++ object is alive yet), do the C++ work inside try/catch into plain results, then push; on a
// caught exception the message is copied into a fixed buffer and raised with luaL_error after the
// C++ scope has ended.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <exception>

#include <lua.hpp>

#include "planner/core/text.hpp"
#include "planner/strategy/lua_bindings.hpp"
#include "planner/strategy/lua_host.hpp"
#include "planner/strategy/lua_isolate.hpp"
#include "planner/strategy/lua_json.hpp"
#include "planner/strategy/strategy_api.hpp"

namespace peerplan {

namespace {

constexpr size_t kErrLen = 512;

// ---- sandbox replacements -------------------------------------------------------------------

// load(chunk [, chunkname [, mode [, env]]]): text chunks only, bound to the sandbox globals (or
// the given env). A bytecode string is refused with "attempt to load a binary chunk".
int sandbox_load(lua_State* L) {
  size_t len = 0;
  const char* chunk = luaL_checklstring(L, 1, &len);  // functions as chunk readers are not supported
  const char* name = luaL_optstring(L, 2, "=(load)");
  const char* mode = luaL_optstring(L, 3, "t");
  luaL_argcheck(L, std::strcmp(mode, "t") == 0, 3, "the sandbox loads text chunks only (mode \"t\")");
  int env = lua_isnoneornil(L, 4) ? 0 : 4;
  if (env) luaL_checktype(L, 4, LUA_TTABLE);
  if (luaL_loadbufferx(L, chunk, len, name, "t") != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);  // nil, message (as the standard load)
    return 2;
  }
  if (env) {
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

// print(...) writes to stderr, prefixed, so a script's debugging output never corrupts --json.
int sandbox_print(lua_State* L) {
  int n = lua_gettop(L);
  std::fputs("[lua] ", stderr);
  for (int i = 1; i <= n; ++i) {
    size_t len = 0;
    const char* s = luaL_tolstring(L, i, &len);
    if (i > 1) std::fputc('\t', stderr);
    const std::string shown = escape_control(std::string_view(s, len), true);  // no raw terminal escapes
    std::fwrite(shown.data(), 1, shown.size(), stderr);
    lua_pop(L, 1);
  }
  std::fputc('\n', stderr);
  return 0;
}

// string.find/match/gmatch/gsub run their matcher in C, where the count hook never fires: a
// pattern with many repetition items ('a-a-a-...b') backtracks for minutes on a long subject.
// Guard: a pattern with q repetition items over an n-byte subject may cost up to n^(q+1) steps;
// refuse above 1e10 (no limit for q = 0; n <= 1e5 for q = 1; n <= 2154 for q = 2; ...).
int count_repetitions(const char* p, size_t len) {
  int q = 0;
  for (size_t i = 0; i < len; ++i) {
    if (p[i] == '%') {
      // %bxy scans to the balancing y from every start: quadratic like one repetition item
      // (a '%b()' search over 300 000 '(' ran for minutes).
      if (i + 1 < len && p[i + 1] == 'b') {
        ++q;
        i += 3;
      } else {
        ++i;
      }
      continue;
    }
    if (p[i] == '*' || p[i] == '+' || p[i] == '-' || p[i] == '?') ++q;
  }
  return q;
}

// Before a C call that may run long, the script's position goes where the parent reads it if it
// has to kill the strategy's process (the count hook may not have fired since the last line).
void note_caller(lua_State* L) {
  if (!isolation::in_child()) return;
  lua_Debug ar;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
    char where[400];
    std::snprintf(where, sizeof where, "%s:%d", ar.source[0] == '@' ? ar.source + 1 : ar.short_src, ar.currentline);
    isolation::note_position(where);
  }
}

int guarded_pattern(lua_State* L) {
  size_t n = 0, plen = 0;
  luaL_checklstring(L, 1, &n);
  const char* pat = luaL_checklstring(L, 2, &plen);
  bool plain = lua_toboolean(L, lua_upvalueindex(2)) && lua_toboolean(L, 4);  // string.find(s, p, init, plain)
  if (!plain) {
    int q = count_repetitions(pat, plen);
    double cost = 1;
    for (int i = 0; i <= q && cost <= 1e10; ++i) cost *= double(n) + 1;
    if (cost > 1e10)
      return luaL_error(L, "pattern limit: %d repetition items over a %d-byte string could backtrack for minutes "
                           "(the sandbox refuses above (n+1)^(q+1) = 1e10 steps; use plain find or shorter strings)",
                        q, int(n));
  }
  note_caller(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

void guard_string_patterns(lua_State* L) {
  lua_getglobal(L, "string");
  for (const char* name : {"find", "match", "gmatch", "gsub"}) {
    lua_getfield(L, -1, name);
    lua_pushboolean(L, std::strcmp(name, "find") == 0);
    lua_pushcclosure(L, guarded_pattern, 2);
    lua_setfield(L, -2, name);
  }
  lua_pop(L, 1);
}

// string.rep(s, n [, sep]) refused up front when the result alone would pass the memory cap (Lua
// itself would say "resulting string too large" or fail the allocation without naming the cap).
int guarded_rep(lua_State* L) {
  size_t len = 0, seplen = 0;
  luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &seplen);
  double total = n > 0 ? double(n) * double(len) + double(n - 1) * double(seplen) : 0;
  double cap = double(lua_tointeger(L, lua_upvalueindex(2)));
  if (total > cap)
    return luaL_error(L, "memory cap of %d MiB exceeded: string.rep would build %d MiB", int(cap / (1 << 20)),
                      int(std::min(total / (1 << 20), 2e9)));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

// setmetatable refuses a metatable with __gc: Lua runs finalizers with debug hooks off (and in
// lua_close), so a looping finalizer could never be stopped by the limits. (A __gc added to a
// metatable later does not mark the object: Lua checks only when the metatable is set.)
int guarded_setmetatable(lua_State* L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "the sandbox does not run __gc finalizers (they would run outside the time and "
                           "instruction limits); remove __gc from the metatable");
    lua_pop(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

const luaL_Reg kSandboxFunctions[] = {{"load", sandbox_load}, {"print", sandbox_print}, {nullptr, nullptr}};

// ---- machine ---------------------------------------------------------------------------------

const CostModel& cost_of(lua_State* L) {
  return *static_cast<const CostModel*>(lua_touserdata(L, lua_upvalueindex(1)));
}

int check_gpu(lua_State* L, int arg, int gpus) {
  lua_Integer g = luaL_checkinteger(L, arg);
  if (g < 0 || g >= gpus)
    luaL_argerror(L, arg, lua_pushfstring(L, "GPU id %I out of range 0..%d", g, gpus - 1));
  return int(g);
}

const char* const kModeNames[] = {"peer", "peer_kernel", "nop2p", "host_staged", nullptr};

// machine.transfer_time(src, dst, bytes [, mode="peer"]) -> seconds, source; or nil, why when the
// mode cannot be used between the two GPUs (e.g. peer without P2P).
int machine_transfer_time(lua_State* L) {
  const CostModel& cost = cost_of(L);
  int n = cost.topology().gpu_count();
  int src = check_gpu(L, 1, n);
  int dst = check_gpu(L, 2, n);
  luaL_argcheck(L, src != dst, 2, "dst must differ from src");
  lua_Number bytes = luaL_checknumber(L, 3);
  luaL_argcheck(L, bytes >= 0 && bytes < 1e18, 3, "bytes must be >= 0 and finite");
  int mode = luaL_checkoption(L, 4, "peer", kModeNames);
  char err[kErrLen] = {0};
  char why[kErrLen] = {0};
  bool valid = false;
  double seconds = 0;
  try {
    TransferEstimate e = estimate_transfer(cost, src, dst, bytes, kModeNames[mode]);
    valid = e.valid;
    seconds = e.seconds;
    std::snprintf(why, sizeof why, "%s", e.valid ? e.source.c_str() : e.why_invalid.c_str());
  } catch (const std::exception& ex) {
    std::snprintf(err, sizeof err, "transfer_time: %s", ex.what());
  }
  if (err[0]) return luaL_error(L, "%s", err);
  if (!valid) {
    luaL_pushfail(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_pushnumber(L, seconds);
  lua_pushstring(L, why);  // where the figure came from: "measured", "interpolated", "nominal", ...
  return 2;
}

// machine.link(a, b) -> the table of machine.links for the ordered pair (0-based GPU ids).
int machine_link(lua_State* L) {
  int n = int(lua_tointeger(L, lua_upvalueindex(2)));
  int a = check_gpu(L, 1, n);
  int b = check_gpu(L, 2, n);
  luaL_argcheck(L, a != b, 2, "b must differ from a");
  lua_geti(L, lua_upvalueindex(3), a + 1);  // through the lazy proxy (links_index)
  lua_geti(L, -1, b + 1);
  return 1;
}

// machine.links is filled on first access: a 1024-GPU machine has a million ordered pairs, each a
// table of four routes, while a strategy reads a few thousand. links[a] (1-based) is a row, made
// on first access; row[b] is link_api_json(a-1, b-1), made on first access; both are then kept
// (rawset), so a pair is built once. `#links` and `#row` are the GPU count, so ipairs works.
int links_len(lua_State* L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  return 1;
}

int links_row_index(lua_State* L) {  // upvalues: cost model, GPU count, row's GPU (0-based)
  const CostModel& cost = cost_of(L);
  int n = int(lua_tointeger(L, lua_upvalueindex(2)));
  int a = int(lua_tointeger(L, lua_upvalueindex(3)));
  int isnum = 0;
  lua_Integer b = lua_tointegerx(L, 2, &isnum);
  if (!isnum || b < 1 || b > n) return 0;  // nil, as a plain table would give
  char err[kErrLen] = {0};
  {
    nlohmann::json j;
    try {
      j = link_api_json(cost.topology(), a, int(b - 1));
    } catch (const std::exception& ex) {
      std::snprintf(err, sizeof err, "machine.links: %s", ex.what());
    }
    if (!err[0]) push_json(L, j);  // a memory error here ends the strategy (the cap is passed)
  }
  if (err[0]) return luaL_error(L, "%s", err);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

int links_index(lua_State* L) {  // upvalues: cost model, GPU count
  int n = int(lua_tointeger(L, lua_upvalueindex(2)));
  int isnum = 0;
  lua_Integer a = lua_tointegerx(L, 2, &isnum);
  if (!isnum || a < 1 || a > n) return 0;
  lua_createtable(L, 0, 0);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushinteger(L, a - 1);
  lua_pushcclosure(L, links_row_index, 3);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushcclosure(L, links_len, 1);
  lua_setfield(L, -2, "__len");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

// Replaces machine.links (at `machine_index`) with the lazy proxy.
void push_lazy_links(lua_State* L, int machine_index, const CostModel* cost) {
  lua_createtable(L, 0, 0);
  lua_createtable(L, 0, 2);
  lua_pushlightuserdata(L, const_cast<CostModel*>(cost));
  lua_pushinteger(L, cost->topology().gpu_count());
  lua_pushcclosure(L, links_index, 2);
  lua_setfield(L, -2, "__index");
  lua_pushinteger(L, cost->topology().gpu_count());
  lua_pushcclosure(L, links_len, 1);
  lua_setfield(L, -2, "__len");
  lua_setmetatable(L, -2);
  lua_setfield(L, machine_index, "links");
}

// machine.p2p(a, b) -> whether a can use b's memory as a peer: what machine.link(a, b).p2p says,
// without building the pair's table (placement asks it for hundreds of thousands of pairs on
// large machines).
int machine_p2p(lua_State* L) {
  const CostModel& cost = cost_of(L);
  int n = cost.topology().gpu_count();
  int a = check_gpu(L, 1, n);
  int b = check_gpu(L, 2, n);
  lua_pushboolean(L, cost.topology().p2p_usable(a, b));
  return 1;
}

const luaL_Reg kMachineFunctions[] = {
    {"transfer_time", machine_transfer_time}, {"link", machine_link}, {"p2p", machine_p2p}, {nullptr, nullptr}};

}  // namespace

void open_sandbox_bindings(lua_State* L, int64_t memory_cap) {
  lua_pushglobaltable(L);
  luaL_setfuncs(L, kSandboxFunctions, 0);
  lua_pop(L, 1);
  guard_string_patterns(L);
  lua_getglobal(L, "setmetatable");
  lua_pushcclosure(L, guarded_setmetatable, 1);
  lua_setglobal(L, "setmetatable");
  lua_getglobal(L, "string");
  lua_getfield(L, -1, "rep");
  lua_pushinteger(L, memory_cap);
  lua_pushcclosure(L, guarded_rep, 2);
  lua_setfield(L, -2, "rep");
  lua_pop(L, 1);
}

void open_machine_bindings(lua_State* L, int machine_index, const CostModel* cost) {
  machine_index = lua_absindex(L, machine_index);
  push_lazy_links(L, machine_index, cost);
  lua_pushvalue(L, machine_index);  // luaL_setfuncs wants the target table just below the upvalues
  // Upvalues: the simulator's cost model, the GPU count, and the 1-based links table the script also sees.
  lua_pushlightuserdata(L, const_cast<CostModel*>(cost));
  lua_pushinteger(L, cost->topology().gpu_count());
  lua_getfield(L, machine_index, "links");
  luaL_setfuncs(L, kMachineFunctions, 3);  // pops the upvalues
  lua_pop(L, 1);
}

}  // namespace peerplan
