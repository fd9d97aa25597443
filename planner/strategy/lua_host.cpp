#include "planner/strategy/lua_host.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <lua.hpp>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/strategy/lua_isolate.hpp"

namespace peerplan {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kHookInterval = 1000;  // instructions between limit checks (~5 us of Lua)
}  // namespace

struct LuaHost::Impl {
  std::string script;
  LuaLimits limits;
  lua_State* L = nullptr;
  // Memory accounting. The cap is enforced softly in the hook (so the error carries a traceback)
  // and hard in the allocator at 1.5x (so a single huge request cannot get through).
  int64_t used = 0;
  bool armed = false;       // allocator cap on: only inside protected calls (a refusal outside one would panic)
  bool hook_armed = false;  // instruction/time checks: on from the first call to the end, so finalizers
                            // that run between calls or in lua_close are stopped too
  bool refused = false;
  int64_t refused_request = 0;
  // Instruction budget of the current call; the wall clock runs from the host's creation (one
  // budget for loading the script and calling it).
  int64_t executed = 0;
  Clock::time_point deadline{};
  std::string last_where;  // position seen by the last hook, for errors raised without a handler
  std::string what;        // the step being run, for messages
  // The first limit hit, kept: in this process the hook raises it again at every instruction, so
  // a script that catches it (pcall, xpcall) is stopped at the next instruction outside the catch.
  std::string tripped;

  int64_t hard_cap() const { return limits.memory_bytes + limits.memory_bytes / 2; }
};

namespace {

LuaHost::Impl* impl_of(lua_State* L) { return *static_cast<LuaHost::Impl**>(lua_getextraspace(L)); }

void limit_hook(lua_State* L, lua_Debug* ar);

void* limited_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* h = static_cast<LuaHost::Impl*>(ud);
  size_t old = ptr ? osize : 0;  // with ptr == NULL, osize encodes the object type, not a size
  if (nsize == 0) {
    std::free(ptr);
    h->used -= int64_t(old);
    return nullptr;
  }
  if (h->armed && h->used - int64_t(old) + int64_t(nsize) > h->hard_cap()) {
    h->refused = true;
    h->refused_request = int64_t(nsize);
    if (isolation::in_child())  // Lua's memory error can be caught by pcall: end the strategy instead
      isolation::fail(h->script, fmt::format("strategy script failed in {}:\nmemory cap of {:.0f} MiB exceeded (a request "
                                             "for {:.0f} MiB was refused){}", h->what, double(h->limits.memory_bytes) / (1 << 20),
                                             double(nsize) / (1 << 20), h->last_where.empty() ? "" : "; last position " + h->last_where));
    // In this process: the limit stays tripped, so catching the memory error does not go on.
    if (h->tripped.empty() && h->L) {
      h->tripped = fmt::format("memory cap of {:.0f} MiB exceeded (a request for {:.0f} MiB was refused)",
                               double(h->limits.memory_bytes) / (1 << 20), double(nsize) / (1 << 20));
      lua_sethook(h->L, limit_hook, LUA_MASKCOUNT, 1);
    }
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (p) h->used += int64_t(nsize) - int64_t(old);
  return p;
}

std::string mib(int64_t b) { return fmt::format("{:.0f} MiB", double(b) / (1 << 20)); }

// In a child process: the limit ends the strategy now, with the position and a traceback.
[[noreturn]] void end_child(lua_State* L, LuaHost::Impl* h, const char* msg) {
  luaL_traceback(L, L, nullptr, 0);
  std::string text = fmt::format("strategy script failed in {}:\n{}{}\n{}", h->what,
                                 h->last_where.empty() ? "" : h->last_where + ": ", msg, lua_tostring(L, -1));
  isolation::fail(h->script, text);
}

// Raised from the count hook: luaL_error prefixes the running Lua function's file:line.
void limit_hook(lua_State* L, lua_Debug* ar) {
  auto* h = impl_of(L);
  if (!h->hook_armed) return;
  if (!h->tripped.empty()) {
    // Re-raised at every instruction (the hook count is 1 now): a pcall that caught it returns
    // into code that raises it again, until no catch is left. Copied out: luaL_error longjmps.
    char again[480];
    std::snprintf(again, sizeof again, "%s", h->tripped.c_str());
    luaL_error(L, "%s", again);
  }
  h->executed += kHookInterval;
  if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0) {
    h->last_where = fmt::format("{}:{}", ar->source[0] == '@' ? ar->source + 1 : ar->short_src, ar->currentline);
    isolation::note_position(h->last_where.c_str());
  }
  // The limits stay armed after firing: an error inside a __gc finalizer is swallowed by Lua, so
  // the script must hit the limit again at its next check. luaL_error longjmps: no C++ object may be
  // alive at these calls, so messages are formatted into plain buffers.
  char buf[240];
  buf[0] = 0;
  if (h->executed > h->limits.instructions) {
    std::snprintf(buf, sizeof buf, "instruction limit of %lld exceeded (stopped after %lld instructions; raise it "
                  "with --lua-instructions if the script is legitimately long)",
                  (long long)h->limits.instructions, (long long)h->executed);
  } else if (Clock::now() > h->deadline) {
    std::snprintf(buf, sizeof buf, "time limit of %g s exceeded (an endless loop? raise it with --lua-seconds)",
                  h->limits.seconds);
  } else if (h->armed && h->used > h->limits.memory_bytes) {
    std::snprintf(buf, sizeof buf, "memory cap of %.0f MiB exceeded (the script holds %.0f MiB; raise it with "
                  "--lua-memory-mib)", double(h->limits.memory_bytes) / (1 << 20), double(h->used) / (1 << 20));
  }
  if (!buf[0]) return;
  if (isolation::in_child()) end_child(L, h, buf);
  h->tripped = buf;
  lua_sethook(L, limit_hook, LUA_MASKCOUNT, 1);
  luaL_error(L, "%s", buf);
}

// Message handler: names the first Lua frame's file:line (errors raised in C functions such as a
// bad argument to machine.transfer_time otherwise have none) and appends a traceback.
int traceback_handler(lua_State* L) {
  auto* h = impl_of(L);
  h->armed = false;  // building the message must not trip the limits
  // Only strings (and numbers) are shown; an error object's __tostring is not called: it would
  // run script code here, outside the limits' reach.
  const char* msg = lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER ? lua_tostring(L, 1) : nullptr;
  if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  {
    // C++ strings live only inside this block; the Lua calls below may not return normally.
    std::string text = msg;
    if (h->refused && text.find("not enough memory") != std::string::npos)
      text = fmt::format("memory cap of {} exceeded (a request for {} was refused)", mib(h->limits.memory_bytes),
                         mib(h->refused_request));
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); ++level) {
      if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
      std::string src = ar.source[0] == '@' ? ar.source + 1 : ar.short_src;
      if (text.rfind(src + ":", 0) != 0 && text.rfind(std::string(ar.short_src) + ":", 0) != 0)
        text = fmt::format("{}:{}: {}", src, ar.currentline, text);
      break;
    }
    lua_pushlstring(L, text.data(), text.size());
  }
  msg = lua_tostring(L, -1);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

}  // namespace

LuaHost::LuaHost(std::string script, const LuaLimits& limits) : impl_(std::make_unique<Impl>()) {
  impl_->script = std::move(script);
  impl_->limits = limits;
  lua_State* L = lua_newstate(limited_alloc, impl_.get());
  if (!L) throw RuntimeError("cannot create a Lua state (out of memory)");
  impl_->L = L;
  *static_cast<Impl**>(lua_getextraspace(L)) = impl_.get();
  // The sandbox: only these libraries; nothing that reaches files, processes or bytecode.
  static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base}, {LUA_STRLIBNAME, luaopen_string},
                                  {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
                                  {LUA_UTF8LIBNAME, luaopen_utf8}};
  for (const auto& lib : libs) {
    luaL_requiref(L, lib.name, lib.func, 1);
    lua_pop(L, 1);
  }
  for (const char* name : {"dofile", "loadfile", "load", "collectgarbage", "print"}) {
    lua_pushnil(L);
    lua_setglobal(L, name);
  }
  lua_getglobal(L, "string");
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");  // bytecode out is useless without bytecode in; remove both
  lua_pop(L, 1);
  open_sandbox_bindings(L, limits.memory_bytes);
  // Reproducible math.random across runs (Lua 5.4 seeds it randomly).
  lua_getglobal(L, "math");
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, 42);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  lua_sethook(L, limit_hook, LUA_MASKCOUNT, kHookInterval);
  auto secs = std::chrono::duration<double>(limits.seconds);
  impl_->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(secs);
}

LuaHost::~LuaHost() {
  if (!impl_ || !impl_->L) return;
  // lua_close runs pending __gc finalizers: give them a short fresh budget so a looping one ends.
  impl_->armed = false;
  impl_->hook_armed = true;
  impl_->executed = 0;
  impl_->tripped.clear();
  lua_sethook(impl_->L, limit_hook, LUA_MASKCOUNT, kHookInterval);
  auto secs = std::chrono::duration<double>(std::min(impl_->limits.seconds, 1.0));
  impl_->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(secs);
  lua_close(impl_->L);
}

lua_State* LuaHost::state() const { return impl_->L; }
const std::string& LuaHost::script() const { return impl_->script; }
const LuaLimits& LuaHost::limits() const { return impl_->limits; }
int64_t LuaHost::memory_in_use() const { return impl_->used; }
int64_t LuaHost::instructions_used() const { return impl_->executed; }

void LuaHost::call(int nargs, int nresults, const std::string& what) {
  lua_State* L = impl_->L;
  int func = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, func);
  impl_->executed = 0;
  impl_->refused = false;
  impl_->last_where.clear();
  impl_->what = what;
  impl_->armed = true;
  impl_->hook_armed = true;
  int rc = lua_pcall(L, nargs, nresults, func);
  impl_->armed = false;
  lua_remove(L, func);  // the handler
  if (rc == LUA_OK && !impl_->tripped.empty()) {
    // A limit fired and the script caught every re-raise up to its return (only possible when
    // the last instructions were inside catches): the strategy still failed.
    lua_pop(L, nresults == LUA_MULTRET ? 0 : nresults);
    lua_pushstring(L, impl_->tripped.c_str());
    rc = LUA_ERRRUN;
  }
  if (rc == LUA_OK) return;
  std::string msg;
  if (rc == LUA_ERRMEM) {
    // Raised by the VM without the message handler: no traceback exists; name the last position.
    msg = fmt::format("memory cap of {} exceeded (a request for {} was refused){}", mib(impl_->limits.memory_bytes),
                      mib(impl_->refused_request),
                      impl_->last_where.empty() ? "" : "; last position " + impl_->last_where);
  } else {
    const char* m = lua_tostring(L, -1);
    msg = m ? m : "(error object is not a string)";
  }
  lua_pop(L, 1);
  throw InputError(impl_->script, "", "strategy script failed in " + what + ":\n" + msg);
}

void LuaHost::run_file(const std::string& path, int nresults, const std::string& what) {
  std::string text = read_input_file(path, file_kind::kStrategy);
  if (!text.empty() && text[0] == LUA_SIGNATURE[0])
    throw InputError(path, "", "a Lua source file; precompiled bytecode is refused by the sandbox");
  lua_State* L = impl_->L;
  std::string chunkname = "@" + path;
  impl_->armed = true;  // compiling a huge file counts against the memory cap too
  int rc = luaL_loadbufferx(L, text.data(), text.size(), chunkname.c_str(), "t");
  impl_->armed = false;
  if (rc != LUA_OK) {
    const char* m = lua_tostring(L, -1);
    std::string msg = m ? m : "cannot load";
    lua_pop(L, 1);
    throw InputError(path, "", "Lua syntax error: " + msg);
  }
  call(0, nresults, what);
}

}  // namespace peerplan
