#pragma once
// Work the profiler runs in a child process: this same binary re-executed with an internal flag.
// Two reasons: NCCL reads NCCL_P2P_DISABLE once per process (measure/nccl_nop2p.cpp), and timing
// in the process that then serves leaves that process slower. validate measured a plan's missing
// shapes in-process before serving, and Qwen1.5-MoE's served decode steps then ran 5.6 % slower than
// the same binary's in a fresh process on the same GPU (3.158 vs 2.990 ms GPU time per step; every
// op class's eager time up, cuBLASLt calls most; H200, 2026-12-04, session 12 A). No CUDA here.
#include <string>
#include <vector>

namespace peerplan::profiler {

// This binary's path (/proc/self/exe); RuntimeError naming `purpose` when it cannot be read.
std::string self_exe(const std::string& purpose);

// Starts args[0] with args, this process's environment with `env` ("NAME=VALUE") replacing any
// variable of the same name, and waits for it. RuntimeError when it cannot start or does not exit
// 0: "<what>: the child ... failed with exit status N; <rerun_hint>".
void run_child(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& what,
               const std::string& rerun_hint);

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when this goes.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace peerplan::profiler
