#pragma once
// A sandboxed Lua 5.4 state for strategy scripts. Only base, string, table, math and utf8 are
// opened; dofile/loadfile/collectgarbage/string.dump are removed; load() accepts text chunks only
// (never bytecode) and binds them to the sandbox's globals; print() goes to stderr so it never
// mixes with --json output. Every call runs under an instruction budget (count hook), a wall-clock
// deadline (checked in the same hook) and a memory cap (custom allocator); errors carry the
// script's file:line and a traceback and are thrown as InputError naming the script.
#include <cstdint>
#include <memory>
#include <string>

#include "planner/strategy/lua_limits.hpp"

struct lua_State;

namespace peerplan {

class LuaHost {
 public:
  // `script` names the file in every error message.
  LuaHost(std::string script, const LuaLimits& limits);
  ~LuaHost();
  LuaHost(const LuaHost&) = delete;
  LuaHost& operator=(const LuaHost&) = delete;

  lua_State* state() const;
  const std::string& script() const;
  const LuaLimits& limits() const;

  // Loads a Lua source file as a text chunk (bytecode is refused) and runs it under the limits,
  // leaving `nresults` results on the stack. `what` describes the step in errors.
  void run_file(const std::string& path, int nresults, const std::string& what);
  // Calls the function below `nargs` arguments on the stack top, protected, under fresh limits.
  void call(int nargs, int nresults, const std::string& what);

  int64_t memory_in_use() const;
  int64_t instructions_used() const;  // by the last call, rounded up to the hook interval

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Installs the sandbox's replacement globals (load, print) and the guarded string functions
// (find/match/gmatch/gsub pattern limit, rep against the memory cap) from lua_bindings.cpp.
void open_sandbox_bindings(lua_State* L, int64_t memory_cap);

}  // namespace peerplan
