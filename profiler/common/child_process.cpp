#include "profiler/common/child_process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "planner/core/error.hpp"

extern char** environ;

namespace peerplan::profiler {

std::string self_exe(const std::string& purpose) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw RuntimeError("cannot read /proc/self/exe (needed to start " + purpose + ")");
  buf[n] = 0;
  return buf;
}

void run_child(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& what,
               const std::string& rerun_hint) {
  if (args.empty()) throw std::invalid_argument("run_child: no program");
  std::vector<std::string> vars;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    const size_t name_len = eq ? size_t(eq - *e) + 1 : std::strlen(*e);
    bool replaced = false;
    for (const std::string& v : env) replaced = replaced || v.compare(0, name_len, *e, name_len) == 0;
    if (!replaced) vars.push_back(*e);
  }
  vars.insert(vars.end(), env.begin(), env.end());
  std::vector<std::string> a = args;
  std::vector<char*> argv, envp;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : vars) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, a[0].c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) throw RuntimeError(what + ": could not start " + a[0] + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw RuntimeError(what + ": waitpid failed: " + std::strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RuntimeError(what + ": the child failed with " +
                       (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status))) +
                       "; " + rerun_hint);
}

TempDir::TempDir(const std::string& prefix) {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/" + prefix + ".XXXXXX";
  if (!mkdtemp(tmpl.data())) throw RuntimeError("cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: a destructor does not throw
}

}  // namespace peerplan::profiler
