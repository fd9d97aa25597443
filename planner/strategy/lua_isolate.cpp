#include "planner/strategy/lua_isolate.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "planner/core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define PEERPLAN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEERPLAN_ASAN 1
#endif
#endif

namespace peerplan {

namespace {

using Clock = std::chrono::steady_clock;

// Memory the parent reads after killing a child: the script's last position.
struct Shared {
  char where[512];
};

struct Child {
  int fd = -1;
  Shared* shared = nullptr;
};
Child g_child;  // set only in a child, between fork and _exit

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone or stopped reading: nothing left to tell
    done += size_t(n);
  }
}

std::string error_doc(const std::string& file, const std::string& field, const std::string& expected) {
  nlohmann::json j = {{"error", {{"file", file}, {"field", field}, {"expected", expected}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t address_space_bytes() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return int64_t(pages) * int64_t(sysconf(_SC_PAGESIZE));
}

// The child's own limits: CPU seconds a little above the wall-clock limit (the parent's kill
// normally comes first; this holds even if the parent is stopped), and the address space it has
// now plus room for the Lua cap (1.5x, hard), the JSON of the result and the C library.
int64_t limit_child(const LuaLimits& limits) {
  rlimit cpu{};
  cpu.rlim_cur = rlim_t(std::ceil(limits.seconds + kIsolationGraceSeconds)) + 1;
  cpu.rlim_max = cpu.rlim_cur + 1;
  setrlimit(RLIMIT_CPU, &cpu);
  int64_t as = address_space_bytes() + 4 * limits.memory_bytes + (1LL << 30);
#ifndef PEERPLAN_ASAN  // ASan reserves terabytes of shadow address space: no RLIMIT_AS under it
  rlimit cur{};
  if (getrlimit(RLIMIT_AS, &cur) == 0 && (cur.rlim_max == RLIM_INFINITY || rlim_t(as) < cur.rlim_max)) {
    rlimit r{rlim_t(as), cur.rlim_max};
    setrlimit(RLIMIT_AS, &r);
  }
#endif
  return as;
}

[[noreturn]] void child_main(int fd, Shared* shared, const std::string& script, const LuaLimits& limits,
                             const std::function<nlohmann::json()>& job) {
  g_child = {fd, shared};
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the parent
  int64_t as = limit_child(limits);
  std::string out;
  try {
    nlohmann::json result = job();
    // Lua strings are bytes: replace invalid UTF-8 rather than fail the transfer.
    out = nlohmann::json{{"ok", std::move(result)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const InputError& e) {
    out = error_doc(e.file(), e.field(), e.expected());
  } catch (const RuntimeError& e) {
    out = nlohmann::json{{"runtime", e.what()}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::bad_alloc&) {
    out = error_doc(script, "", fmt::format("strategy script failed: its process ran out of its address space "
                                            "({:.0f} MiB; the Lua memory cap is {:.0f} MiB)",
                                            double(as) / (1 << 20), double(limits.memory_bytes) / (1 << 20)));
  } catch (const std::exception& e) {
    out = nlohmann::json{{"runtime", std::string("internal error in the strategy process: ") + e.what()}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  write_all(fd, out);
  _exit(0);
}

std::string last_position(const Shared* s) {
  std::string w(s->where, strnlen(s->where, sizeof s->where));
  return w.empty() ? "" : "; last position " + w;
}

}  // namespace

namespace isolation {

bool in_child() { return g_child.fd >= 0; }

void note_position(const char* where) {
  if (!g_child.shared) return;
  std::strncpy(g_child.shared->where, where, sizeof g_child.shared->where - 1);
}

void fail(const std::string& script, const std::string& message) {
  write_all(g_child.fd, error_doc(script, "", message));
  _exit(0);
}

}  // namespace isolation

nlohmann::json run_isolated(const std::string& script, const LuaLimits& limits,
                            const std::function<nlohmann::json()>& job) {
  if (!limits.isolate || isolation::in_child()) return job();
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) throw RuntimeError(std::string("cannot map memory for a strategy process: ") + std::strerror(errno));
  std::memset(shared, 0, sizeof(Shared));
  struct Unmap {
    Shared* s;
    ~Unmap() { munmap(s, sizeof(Shared)); }
  } unmap{shared};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw RuntimeError(std::string("cannot create a pipe for a strategy process: ") + std::strerror(errno));
  std::fflush(nullptr);  // buffered output must not be written twice (once by the child)
  std::cout.flush();
  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw RuntimeError(std::string("cannot start a process for a strategy: ") + std::strerror(err));
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], shared, script, limits, job);
  }
  close(fds[1]);
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(limits.seconds + kIsolationGraceSeconds));
  std::string data;
  enum class End { Eof, Timeout, TooBig } end = End::Eof;
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) { end = End::Timeout; break; }
    pollfd p{fds[0], POLLIN, 0};
    int rc = poll(&p, 1, int(std::min<long long>(left, 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, size_t(n));
    if (data.size() > kIsolatedResultCap) { end = End::TooBig; break; }
  }
  close(fds[0]);
  int status = 0;
  if (end != End::Eof) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else {
    // The result is complete; the child is exiting. Wait for it, but not past the deadline.
    for (;;) {
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid || (w < 0 && errno != EINTR)) break;
      if (Clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(1000);
    }
  }
  const std::string where = last_position(shared);
  auto fail = [&](const std::string& what) {
    return InputError(script, "", "strategy script failed: " + what + where);
  };
  if (end == End::Timeout)
    throw fail(fmt::format("time limit of {:g} s exceeded: the process was stopped {:g} s later, inside a call the "
                           "instruction hook cannot see (a C library function such as a string pattern search; "
                           "raise the limit with --lua-seconds if the script is legitimately slow)",
                           limits.seconds, kIsolationGraceSeconds));
  if (end == End::TooBig)
    throw fail(fmt::format("its result is larger than {} MiB (return fewer or smaller plans)", kIsolatedResultCap >> 20));
  nlohmann::json doc;
  try {
    if (!data.empty()) doc = nlohmann::json::parse(data);
  } catch (const std::exception&) {
    doc = nullptr;
  }
  if (doc.is_object()) {
    if (doc.contains("ok")) return std::move(doc["ok"]);
    if (doc.contains("error")) {
      const auto& e = doc["error"];
      throw InputError(e.value("file", script), e.value("field", ""), e.value("expected", ""));
    }
    if (doc.contains("runtime")) throw RuntimeError(doc["runtime"].get<std::string>());
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGXCPU)
      throw fail(fmt::format("CPU-time limit of {} s exceeded", long(std::ceil(limits.seconds + kIsolationGraceSeconds)) + 1));
    throw fail(fmt::format("its process was ended by signal {} ({}) (an address-space limit of {:.0f} MiB above the "
                           "Lua memory cap applies to it)",
                           sig, strsignal(sig), double(4 * limits.memory_bytes + (1LL << 30)) / (1 << 20)));
  }
  throw fail(fmt::format("its process ended without a result (exit status {})", WIFEXITED(status) ? WEXITSTATUS(status) : -1));
}

}  // namespace peerplan
