#pragma once
// Helpers for the hostile-input suite: a scratch directory per test, file writers, and a runner
// for the built `peerplan` binary that captures exit code, stdout and stderr and kills it after a
// deadline (a hang is a failure, not a stuck CI job).
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace peerplan::hostile {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  // Writes `content` to <dir>/<name> and returns the full path.
  std::string write(const std::string& name, const std::string& content) const;
  // Every file name in the directory (to prove no partial or temporary file was left behind).
  std::vector<std::string> listing() const;

 private:
  fs::path path_;
};

struct CliResult {
  int exit_code = -1;      // -1 if killed by a signal or the deadline
  int signal = 0;          // the signal that ended it, if any
  bool timed_out = false;
  std::string out, err;
  long max_rss_kib = 0;    // peak resident memory of the child
  double wall_s = 0;
  std::string describe() const;  // for failure messages
};

struct RunOptions {
  std::string cwd;                                         // "" = the current directory
  std::chrono::milliseconds deadline = std::chrono::seconds(60);
  std::string stdout_path;                                 // the child's stdout, e.g. /dev/full ("" = captured)
  std::function<void(int pid)> while_running;              // called every few ms until the child ends
};

// Runs PEERPLAN_BINARY (or $PEERPLAN_HOSTILE_BINARY, to show that a new test fails on an older
// build) with `args` (no shell), cwd = `cwd` (or the current one when empty).
CliResult run_peerplan(const std::vector<std::string>& args, const std::string& cwd = "",
                       std::chrono::seconds deadline = std::chrono::seconds(60));
CliResult run_peerplan(const std::vector<std::string>& args, const RunOptions& options);

std::string read_file(const std::string& path);

// A JSON document nested `depth` levels deep: [[[...]]] or {"a":{"a":...}}.
std::string deep_array(int depth);
std::string deep_object(int depth);

}  // namespace peerplan::hostile
