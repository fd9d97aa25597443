#include "profiler/common/shared_stream.hpp"

#include <string>

#include "profiler/common/env_switch.hpp"

namespace peerplan::exec {

std::vector<StreamStep> stream_steps(const OpGraph& g, const std::vector<int>& ids) {
  std::vector<StreamStep> out;
  out.reserve(ids.size());
  std::vector<char> open;  // by GPU: a branch forked and not yet joined
  auto is_open = [&](int gpu) { return gpu >= 0 && size_t(gpu) < open.size() && open[size_t(gpu)]; };
  for (int id : ids) {
    const Op& op = g.ops[size_t(id)];
    StreamStep st{id, false, false, false};
    if (is_compute(op.kind) && op.stream == 1 && !op.gpus.empty()) {
      const int gpu = op.gpus[0];
      st.aux = true;
      st.fork = !is_open(gpu);
      if (size_t(gpu) >= open.size()) open.resize(size_t(gpu) + 1, 0);
      open[size_t(gpu)] = 1;
    } else {
      for (int gpu : op.gpus) {
        if (!is_open(gpu)) continue;
        bool waits = false;
        for (int d : op.deps) {
          const Op& dep = g.ops[size_t(d)];
          waits = waits || (dep.stream == 1 && !dep.gpus.empty() && dep.gpus[0] == gpu);
        }
        if (waits) {
          st.join = true;
          open[size_t(gpu)] = 0;
        }
      }
    }
    out.push_back(st);
  }
  return out;
}

int shared_stream_from_env(const char* v) {
  return env_tristate("PEERPLAN_SHARED_STREAM", v,
                      "1: a MoE layer's shared experts on a second stream at up to 8 tokens, 0: never");
}

}  // namespace peerplan::exec
