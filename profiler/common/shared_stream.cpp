#include "profiler/common/shared_stream.hpp"

#include <map>
#include <string>
#include <string_view>

#include "planner/core/error.hpp"

namespace peerplan::exec {

namespace {
bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

bool is_shared_expert_op(const Op& op) {
  if (op.layer < 0 || (op.kind != OpKind::Gemm && op.kind != OpKind::Elementwise)) return false;
  const std::string_view n = op.name;
  return ends_with(n, ".shared.gate_up") || ends_with(n, ".shared.act") || ends_with(n, ".shared.down") ||
         ends_with(n, ".shared_gate");
}

std::vector<StreamStep> shared_stream_order(const OpGraph& g, const std::vector<int>& ids, int64_t max_tokens) {
  std::vector<StreamStep> out;
  out.reserve(ids.size());
  std::vector<char> moved(g.ops.size(), 0);
  std::map<int, bool> open;  // gpu -> an auxiliary branch not yet joined
  for (size_t i = 0; i < ids.size(); ++i) {
    const int id = ids[i];
    if (moved[size_t(id)]) continue;
    const Op& op = g.ops[size_t(id)];
    const int gpu = op.gpus.empty() ? -1 : op.gpus[0];
    if (op.kind == OpKind::Elementwise && op.ew == EwKind::MoeCombine && open[gpu]) {
      out.push_back({id, false, false, true});
      open[gpu] = false;
      continue;
    }
    if (op.kind == OpKind::Elementwise && op.ew == EwKind::MoeRoute && op.ew_rows <= max_tokens && !open[gpu]) {
      // The layer's shared ops on this GPU, up to its combine. All of them or none: a quantized
      // shared expert (its runner keeps one workspace per GPU) stays on the main stream.
      std::vector<int> branch;
      bool all_bf16 = true;
      for (size_t j = i + 1; j < ids.size(); ++j) {
        const Op& o = g.ops[size_t(ids[j])];
        if (o.layer != op.layer) break;
        if (o.gpus.empty() || o.gpus[0] != gpu) continue;
        if (o.kind == OpKind::Elementwise && o.ew == EwKind::MoeCombine) break;
        if (!is_shared_expert_op(o)) continue;
        branch.push_back(ids[j]);
        all_bf16 = all_bf16 && (o.kind != OpKind::Gemm || o.wdtype == DType::BF16);
      }
      if (!branch.empty() && all_bf16) {
        for (size_t b = 0; b < branch.size(); ++b) {
          out.push_back({branch[b], true, b == 0, false});
          moved[size_t(branch[b])] = 1;
        }
        open[gpu] = true;
      }
    }
    out.push_back({id, false, false, false});
  }
  return out;
}

bool shared_stream_from_env(const char* v) {
  if (!v || !*v || std::string(v) == "0") return false;
  if (std::string(v) == "1") return true;
  throw RuntimeError("PEERPLAN_SHARED_STREAM=" + std::string(v) +
                     ": expected 0 or 1 (1: a MoE layer's shared experts on a second stream at <= 256 tokens)");
}

}  // namespace peerplan::exec
