#pragma once
// Two streams' kernels share a GPU's SMs, not only its HBM (session 36, docs/simulator.md "shared experts").
// A MoE layer's shared branch and its routed experts overlap at decode; where both run on the executor's own
// GEMV kernels (the bf16 dense GEMV at 1-2 tokens with programmatic dependent launch, and the grouped expert gemv
// at 1-4 rows an expert), each launches enough blocks to fill every SM and streams at a latency-bound 60-90 % of
// the HBM rate, so two of them at once mostly take turns on the SMs instead of adding their rates: the GPU hid
// 8-12 us of Qwen1.5-MoE's 28-30 us shared branch a layer at 1-2 tokens (five H100 leases), where sharing HBM
// alone hid 14-19. From 3 tokens the shared GEMMs run on cuBLASLt, whose few blocks leave SMs free, and HBM
// sharing alone priced the steps within 2-3 %. So each such kernel also crosses its GPU's SM-slot pseudo-edge,
// using 1 / (its solo rate) of it per byte/s (all of it at its solo speed); the edge's capacity is how much two
// of them progress together against one alone.
#include <cstdint>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/gemv_prefetch.hpp"
#include "planner/model/moe_kernel_class.hpp"

namespace peerplan {

// Combined progress of two SM-filling GEMVs on two streams when the profile has no measurement: fitted on the
// two-stream decode steps of five H100 leases (Qwen1.5-MoE and DeepSeek-V2-Lite at 1-2 tokens, sessions 21, 34,
// 35, 36). 1.2 until session 37, when the small kernels before a GEMV stopped being over-priced (gemv_prefetch.hpp,
// which had made the one-stream steps 2-3 % long and so the overlap look larger): refitted to 1.15 (two-stream steps at
// one token 0.995-1.004x their price on Qwen1.5-MoE's three leases, 0.978 / 0.993 on DeepSeek-V2-Lite's two).
inline constexpr double kGemvPairProgress = 1.15;

// Whether `op` runs on a kernel that fills every SM (above), given the profile's executor launches with PDL.
inline bool fills_sms(const Op& op, bool pdl) {
  if (op.wdtype != DType::BF16) return false;
  if (op.kind == OpKind::Gemm) return is_pdl_dense_gemv(op, pdl);
  if (op.kind == OpKind::GroupedGemm) return moe_gemv_class(op.group_max_rows);
  return false;
}

}  // namespace peerplan
