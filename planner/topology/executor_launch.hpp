#pragma once
// How the executor that timed a profile launched its decode kernels: "pdl" (programmatic dependent
// launch, each kernel starting under the previous one's tail: the executor's default on sm_90+ since
// session 19, profiler/kernels/pdl.cuh) or "serial". A profile without the key was timed serially (every
// profile before then); a machine without measurements says "" (it prices no launches). Validate warns
// when this host's executor launches the other way: at batch 1-2 the two differ by up to ~15 % of a
// decode step (docs/moe_executor.md, "Programmatic dependent launch").
#include <string>

#include "planner/topology/machine.hpp"

namespace peerplan {

inline constexpr const char* kExecutorLaunchKey = "executor_launch";

inline std::string executor_launch(const Machine& m) {
  if (!m.measurements) return "";
  const auto it = m.meta.find(kExecutorLaunchKey);
  return it != m.meta.end() && it->is_string() ? it->get<std::string>() : "serial";
}

// Whether that executor ran a MoE layer's shared experts on a second stream at decode
// (PEERPLAN_SHARED_STREAM=1 when profiling; profiler/common/shared_stream.hpp): the compiler then
// puts them on the auxiliary stream (compiler.hpp CompileOptions::shared_stream). Absent: one stream.
inline constexpr const char* kSharedStreamKey = "executor_shared_stream";

inline bool shared_expert_stream(const Machine& m) {
  if (!m.measurements) return false;
  const auto it = m.meta.find(kSharedStreamKey);
  return it != m.meta.end() && it->is_boolean() && it->get<bool>();
}

// The word order of the packed int4 (W4A16) weights that executor read (profiler/common/w4_layout.hpp):
// "tiled" since session 22, "gptq" before (a profile without the key); "" for a machine without
// measurements. The tiled order runs W4A16 decode 5-6 % faster at batch 1-2 (docs/quantization.md).
inline constexpr const char* kW4LayoutKey = "executor_w4_layout";

inline std::string w4_layout_timed(const Machine& m) {
  if (!m.measurements) return "";
  const auto it = m.meta.find(kW4LayoutKey);
  return it != m.meta.end() && it->is_string() ? it->get<std::string>() : "gptq";
}

// Whether that executor multiplied FP8 / int8 experts' prefill-sized groups (the tiled grouped kernel) on
// 8-bit tensor cores, the tokens quantized per (row, 64 k) (profiler/kernels/moe_gemm_w8mma.cu, since
// session 27, opt-in: PEERPLAN_MOE_W8_MMA=1), or converted the codes to bf16 (the default, and every profile
// before, which lacks the key): 1, 0, or -1 for a machine without measurements.
inline constexpr const char* kMoeW8MmaKey = "executor_moe_w8_mma";

inline int moe_w8_mma_timed(const Machine& m) {
  if (!m.measurements) return -1;
  const auto it = m.meta.find(kMoeW8MmaKey);
  return it != m.meta.end() && it->is_boolean() && it->get<bool>() ? 1 : 0;
}

// Whether that executor ran small matrices (<= 1024 rows, <= 4 Mi weights: MoE routers, gates, MLA's kv_a) at 3-8
// tokens on its bf16 GEMV rather than cuBLASLt (profiler/common/gemv_rule.hpp, since session 32; PEERPLAN_SMALL_GEMV=0
// off): 1, 0, or -1 where the profile does not say (every earlier one: such rows, where it has them, were cuBLASLt's).
inline constexpr const char* kSmallGemvKey = "executor_small_gemv";

inline int small_gemv_timed(const Machine& m) {
  const auto it = m.meta.find(kSmallGemvKey);
  if (!m.measurements || it == m.meta.end() || !it->is_boolean()) return -1;
  return it->get<bool>() ? 1 : 0;
}

// Whether that executor ran a gated MLP's activation inside the gate_up GEMV's epilogue at decode
// (planner/compile/act_fusion.hpp; since session 30, PEERPLAN_FUSED_ACT=0 when profiling turns it off):
// the compiler then emits no activation op where the rule says the kernel fuses. False for a profile
// without the key (every earlier one: its plans keep the activation kernel they were validated with) and
// for a machine without measurements.
inline constexpr const char* kFusedActKey = "executor_act_epilogue";

inline bool fused_gate_up_act(const Machine& m) {
  if (!m.measurements) return false;
  const auto it = m.meta.find(kFusedActKey);
  return it != m.meta.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace peerplan
