// NCCL with P2P disabled. NCCL reads NCCL_P2P_DISABLE once per process, so the sweep runs in a
// child: this same binary re-executed with an internal flag and NCCL_P2P_DISABLE=1 (and, as
// always, NCCL_NVLS_ENABLE=0). The child writes its collectives as JSON; the parent merges them.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/measure/curve.hpp"

extern char** environ;

namespace peerplan::profiler {

void measure_nccl_nop2p(Context& ctx) {
  if (ctx.gpus() < 2) {
    ctx.not_applicable("nccl_nop2p", "one GPU: collectives need at least two");
    return;
  }
  std::string out = ctx.opts.out + ".nccl_nop2p.tmp.json";
  std::vector<std::string> args = {ctx.self_exe, "profile", "--internal-nccl-child", out,
                                   "--samples", std::to_string(ctx.opts.samples), "--warmup", std::to_string(ctx.opts.warmup),
                                   "--min-size", std::to_string(ctx.opts.min_bytes),
                                   "--nop2p-coll-max-size", std::to_string(ctx.opts.nop2p_coll_max_bytes), "--no-progress"};
  if (ctx.opts.quick) args.push_back("--quick");
  if (ctx.opts.all_groups) args.push_back("--all-groups");
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (!std::strncmp(*e, "NCCL_P2P_DISABLE=", 17) || !std::strncmp(*e, "NCCL_NVLS_ENABLE=", 17)) continue;
    env.push_back(*e);
  }
  env.push_back("NCCL_P2P_DISABLE=1");
  env.push_back("NCCL_NVLS_ENABLE=0");  // never NVLink multicast, in children too
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  ctx.progress.update(0, "child process with NCCL_P2P_DISABLE=1");
  pid_t pid = 0;
  int rc = posix_spawn(&pid, ctx.self_exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) throw RuntimeError("nccl_nop2p: could not start " + ctx.self_exe + ": " + std::strerror(rc));
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) throw RuntimeError(std::string("nccl_nop2p: waitpid failed: ") + std::strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RuntimeError("nccl_nop2p: the child (NCCL_P2P_DISABLE=1) failed with " +
                       (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status))) +
                       "; rerun `peerplan profile --only nccl_nop2p` to see its error");
  auto j = load_json_file(out);
  Measurements child = parse_measurements(JsonIn(j, out));
  for (auto& c : child.collectives) {
    c.p2p = false;
    ctx.ms.collectives.push_back(std::move(c));
  }
  std::remove(out.c_str());
}

}  // namespace peerplan::profiler
