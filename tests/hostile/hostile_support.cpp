#include "tests/hostile/hostile_support.hpp"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace peerplan::hostile {

ScratchDir::ScratchDir() {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = fs::temp_directory_path() / ("peerplan-hostile-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
    if (fs::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a scratch directory under " + fs::temp_directory_path().string());
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ScratchDir::write(const std::string& name, const std::string& content) const {
  fs::path p = path_ / name;
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out.write(content.data(), std::streamsize(content.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
  return p.string();
}

std::vector<std::string> ScratchDir::listing() const {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(path_)) names.push_back(fs::relative(e.path(), path_).string());
  return names;
}

std::string CliResult::describe() const {
  std::ostringstream s;
  s << "exit=" << exit_code;
  if (signal) s << " signal=" << signal;
  if (timed_out) s << " (killed: deadline passed)";
  s << " wall=" << wall_s << "s max_rss=" << max_rss_kib / 1024 << "MiB";
  s << "\n--- stderr ---\n" << err.substr(0, 4000) << "\n--- stdout ---\n" << out.substr(0, 2000);
  return s.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliResult run_peerplan(const std::vector<std::string>& args, const std::string& cwd, std::chrono::seconds deadline) {
  RunOptions o;
  o.cwd = cwd;
  o.deadline = deadline;
  return run_peerplan(args, o);
}

CliResult run_peerplan(const std::vector<std::string>& args, const RunOptions& opt) {
  // Output goes to files, not pipes, so a chatty child can never block on a full pipe.
  ScratchDir io;
  const std::string out_path = (io / "stdout").string(), err_path = (io / "stderr").string();
  const char* other = std::getenv("PEERPLAN_HOSTILE_BINARY");
  std::vector<std::string> argv_s{other && *other ? other : PEERPLAN_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string child_out = opt.stdout_path.empty() ? out_path : opt.stdout_path;

  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int o = open(child_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(127);
    dup2(o, 1);
    dup2(e, 2);
    if (!opt.cwd.empty() && chdir(opt.cwd.c_str()) != 0) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  CliResult r;
  int status = 0;
  struct rusage ru {};
  auto until = start + opt.deadline;
  for (;;) {
    pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      r.timed_out = true;
      break;
    }
    if (opt.while_running) opt.while_running(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.max_rss_kib = ru.ru_maxrss;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = opt.stdout_path.empty() ? read_file(out_path) : "";
  r.err = read_file(err_path);
  return r;
}

std::string deep_array(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

std::string deep_object(int depth) {
  std::string s;
  s.reserve(size_t(depth) * 6 + 2);
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(size_t(depth), '}');
  return s;
}

}  // namespace peerplan::hostile
