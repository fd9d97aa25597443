#pragma once
// Shared experts on a second stream (issue 14): vLLM runs a MoE layer's shared experts on an
// auxiliary CUDA stream, forked after the router GEMM and joined before the routed output is combined,
// at up to VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD tokens, so at decode the shared branch's weight
// streaming overlaps the routing and the routed experts'. The compiler decides which ops run there
// (Op::stream; planner/compile/compiler.cpp, CompileOptions::shared_stream); this is the executor's
// launch plan for a stage's ops, host only (tested on CPU): which stream each op goes to, and where
// the auxiliary stream forks from the main one and joins it.
#include <cstdint>
#include <vector>

#include "planner/compile/op_graph.hpp"

namespace peerplan::exec {

struct StreamStep {
  int op = 0;          // op id
  bool aux = false;    // launched on the GPU's auxiliary stream
  bool fork = false;   // before it: the auxiliary stream waits for everything on the main one
  bool join = false;   // before it: the main stream waits for everything on the auxiliary one
};

// `ids` (a stage's ops in graph order) in that order: an op with stream 1 goes to its GPU's
// auxiliary stream, forking it from the main one when the GPU has no open branch (the compiler puts
// a branch's ops after the op they depend on); a main-stream op that depends on an op of an open
// branch of its GPU joins it first. A branch left open at the end is the caller's to join.
std::vector<StreamStep> stream_steps(const OpGraph& g, const std::vector<int>& ids);

// PEERPLAN_SHARED_STREAM: unset or empty -1 (as the machine's profile says), 0 never, 1 always;
// anything else is an error naming the variable.
int shared_stream_from_env(const char* value);

}  // namespace peerplan::exec
