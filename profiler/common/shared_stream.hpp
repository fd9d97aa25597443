#pragma once
// Shared experts on a second stream (issue 14): vLLM runs a MoE layer's shared experts on an
// auxiliary CUDA stream, forked after the router GEMM and joined before the routed output is combined,
// whenever the batch has at most VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD tokens (256), so at
// decode the shared branch's weight streaming overlaps the routing and the routed experts'. This is
// the executor's launch order for that, host only (tested on CPU): which ops of a stage go to the
// auxiliary stream, and where the stream forks and joins. PEERPLAN_SHARED_STREAM=1 turns it on
// (a measured experiment: the simulator still prices the branches one after the other).
#include <cstdint>
#include <vector>

#include "planner/compile/op_graph.hpp"

namespace peerplan::exec {

inline constexpr int64_t kSharedStreamMaxTokens = 256;  // vLLM's default threshold

struct StreamStep {
  int op = 0;          // op id
  bool aux = false;    // launched on the GPU's auxiliary stream
  bool fork = false;   // before it: the auxiliary stream waits for everything on the main one
  bool join = false;   // before it: the main stream waits for everything on the auxiliary one
};

// A shared-expert op of a MoE layer ("L3.shared.gate_up", "L3.shared.act", "L3.shared.down",
// "L3.shared_gate").
bool is_shared_expert_op(const Op& op);

// The launch order of `ids` (a stage's ops in graph order): where a GPU's MoeRoute of at most
// `max_tokens` tokens is followed in the same layer by its bf16 shared-expert ops, those ops move
// before the route onto the auxiliary stream (the first one forking it) and the GPU's next
// MoeCombine joins it; everything else keeps its order on the main stream. A branch left open at
// the end (no combine) is the caller's to join.
std::vector<StreamStep> shared_stream_order(const OpGraph& g, const std::vector<int>& ids,
                                            int64_t max_tokens = kSharedStreamMaxTokens);

// PEERPLAN_SHARED_STREAM: unset, empty or 0 off, 1 on; anything else is an error naming the variable.
bool shared_stream_from_env(const char* value);

}  // namespace peerplan::exec
