#pragma once
// Runs strategy work in a child process, so that a script's limits hold by construction: whatever
// the script does (catch the limit error with pcall, sit in one C library call, allocate outside
// the Lua allocator), the child has a CPU-time limit (RLIMIT_CPU), an address-space limit
// (RLIMIT_AS) and a wall-clock kill by the parent. The child is a fork of this process (it shares
// the already-built model and topology) and returns its result as JSON over a pipe; the in-process
// count hook (lua_host.cpp) stays for the friendly messages (file:line, traceback) and, in a child,
// ends the process at the first limit instead of raising an error the script could catch.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/strategy/lua_limits.hpp"

namespace peerplan {

// Bytes a child may send back: far above any real strategy's plans (a plan is a few KB), small
// enough that parsing it cannot take the parent's memory.
inline constexpr size_t kIsolatedResultCap = 32u << 20;
// Time the parent waits past the script's wall-clock limit before killing the child: the hook
// in the child normally ends it first; this catches time spent inside one C call.
inline constexpr double kIsolationGraceSeconds = 0.5;

// Runs job() in a forked child under `limits` and returns what it returned. An InputError or
// RuntimeError thrown in the child is thrown again here with the same file, field and text. A
// child killed for its time or memory, or ending without a result, is an InputError naming
// `script`, the limit and the script's last known position. With limits.isolate false, job()
// runs in this process (the fuzz target: libFuzzer must see the coverage).
nlohmann::json run_isolated(const std::string& script, const LuaLimits& limits,
                            const std::function<nlohmann::json()>& job);

namespace isolation {
// True inside a child started by run_isolated.
bool in_child();
// Child only: the script's current position ("file:line"), kept where the parent can read it
// when it has to kill the child.
void note_position(const char* where);
// Child only: reports InputError(script, "", message) to the parent and ends the child now. For
// the limit hook and the allocator: nothing the script does afterwards can run.
[[noreturn]] void fail(const std::string& script, const std::string& message);
}  // namespace isolation

}  // namespace peerplan
