#pragma once
// Where the executor computes a gated MLP's SiLU(gate) * up inside the gate_up GEMM's epilogue, as
// TensorRT-LLM's fused gated activation does, instead of a separate activation kernel: at decode the
// activation is one more dependent kernel per layer on the critical path (1.86 us a layer at batch 1 on
// H200, session 26 P's profile), not bytes. The kernels that do it (profiler/kernels/silu_mul.cuh):
//   bf16 gate_up at M <= 2 on the PDL GEMV (kernels::dense_gemv, taken only with PDL on),
//   int8 gate_up at M <= 2 on the W8A16 GEMV (kernels::dense_gemv_int8),
//   int4 gate_up at M <= 2 on W4A16 v7 (kernels::w4a16_gemm, n a multiple of 32),
//   bf16 routed experts on the grouped gemv (busiest expert 1..4 rows: moe_gemv_class).
// The compiler marks such a gate_up op (Op::act_epilogue) and emits no activation op after it; the
// executor runs the fused kernel, or the GEMM and the activation kernel where an override (PEERPLAN_PDL=0,
// PEERPLAN_W4A16, PEERPLAN_MOE_GEMV=0) took that kernel away. The fused result is bit-equal to the two
// (W4A16 v7: up to the order its split-K atomics add partials in, which varies between runs anyway).
// Prices: the gate_up's profile row (the epilogue adds a few instructions to a weight-bound GEMV), and
// no activation op. A profile says whether its executor fused (executor_launch.hpp fused_gate_up_act).
// Where it pays (one H100, session 31 A, decode steps fused / unfused, docs/validation/runs/2026-12-07-session31):
// bf16 GEMV -0.9 to -1.1 % (8B at batch 1-2), W4A16 v7 -0.8 to -2.6 %; the int8 GEMV +3.2 % at batch 1 (its
// block reads two gate and two up rows n / 2 apart where the plain one reads four adjacent rows), and Qwen1.5-MoE
// with its routed experts fused +0.7 % at batch 1 and +3 % at 8. So by default only the first two fuse; `all`
// (kActEverywhere, PEERPLAN_FUSED_ACT=all) fuses the others too, for A/B runs, which no profile prices.
#include <cstdint>

#include "planner/core/dtype.hpp"
#include "planner/model/moe_kernel_class.hpp"

namespace peerplan {

inline constexpr int64_t kActEpilogueMaxM = 2;  // the decode GEMVs' M (dense_gemv, the int8 GEMV, v7)
inline constexpr int kActEverywhere = 2;       // CompileOptions::fused_act: also where it was measured slower

// A dense gate_up op of m rows, n = 2 x inter outputs, k inputs, weights stored as `w`; `pdl`: the
// executor launches its decode kernels with programmatic dependent launch (bf16 takes the GEMV only then);
// `all`: also the int8 GEMV, which the fusion slows.
constexpr bool gate_up_act_fuses(DType w, int64_t m, int64_t n, int64_t k, bool pdl, bool all = false) {
  if (m < 1 || m > kActEpilogueMaxM || n <= 0 || n % 2 != 0 || k <= 0) return false;
  switch (w) {
    case DType::BF16: return pdl && k % 8 == 0;
    case DType::INT8: return all && k % 16 == 0;
    case DType::INT4: return n % 32 == 0 && k % 128 == 0;
    default: return false;
  }
}

// The routed experts' gate_up, a grouped GEMM whose busiest expert has max_rows rows: only with `all` (slower).
constexpr bool grouped_gate_up_act_fuses(DType w, int64_t max_rows, int64_t n, bool all = false) {
  return all && w == DType::BF16 && moe_gemv_class(max_rows) && n > 0 && n % 2 == 0;
}

}  // namespace peerplan
