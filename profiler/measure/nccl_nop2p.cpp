// NCCL with P2P disabled. NCCL reads NCCL_P2P_DISABLE once per process, so the sweep runs in a
// child: this same binary re-executed with an internal flag and NCCL_P2P_DISABLE=1 (and, as
// always, NCCL_NVLS_ENABLE=0). The child writes its collectives as JSON; the parent merges them.
#include <cstdio>
#include <string>
#include <vector>

#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/common/child_process.hpp"
#include "profiler/measure/curve.hpp"

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
  ctx.progress.update(0, "child process with NCCL_P2P_DISABLE=1");
  // NCCL_NVLS_ENABLE=0: never NVLink multicast, in children too.
  run_child(args, {"NCCL_P2P_DISABLE=1", "NCCL_NVLS_ENABLE=0"}, "nccl_nop2p (NCCL_P2P_DISABLE=1)",
            "rerun `peerplan profile --only nccl_nop2p` to see its error");
  auto j = load_json_file(out);
  Measurements child = parse_measurements(JsonIn(j, out));
  for (auto& c : child.collectives) {
    c.p2p = false;
    ctx.ms.collectives.push_back(std::move(c));
  }
  std::remove(out.c_str());
}

}  // namespace peerplan::profiler
