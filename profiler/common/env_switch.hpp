#pragma once
// The executor's three-way switches read from the environment (PEERPLAN_SHARED_STREAM,
// PEERPLAN_FUSED_ACT): unset or empty -1 (as the machine's profile says its executor ran), "0" never,
// "1" always; anything else is an error naming the variable and what each value means.

#include <string>
#include <vector>

namespace peerplan::exec {

// `meaning`: what 1 and 0 do, for the error ("1: ..., 0: ...").
int env_tristate(const char* var, const char* value, const char* meaning);

// PEERPLAN_FUSED_ACT: a gated MLP's activation in the gate_up GEMV's epilogue at decode
// (planner/compile/act_fusion.hpp); CompileOptions::fused_act of every compile, and the profile's
// executor_act_epilogue when profiling (on unless 0). Unset -1, "0" 0, "1" 1 (where it pays), "all" 2 (every
// kernel that can, the int8 GEMV and routed experts too: measured slower, for A/B runs: kActEverywhere).
int fused_act_from_env(const char* value);

// PEERPLAN_SKIP_OPS (A/B experiments only, never a plan's timing): comma-separated pieces of op names
// ("shared.,shared_gate" drops a MoE layer's shared experts); the executor launches no op whose name
// contains one, so a decode step can be timed without a branch (how much of the shared experts' second
// stream the GPU hides: docs/moe_executor.md). Unset or empty: none; an empty piece is an error.
std::vector<std::string> skip_ops_from_env(const char* value);
bool op_skipped(const std::string& name, const std::vector<std::string>& pieces);

}  // namespace peerplan::exec
