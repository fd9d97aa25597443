#pragma once
// The executor's decode GEMV (profiler/kernels/dense_gemv.cu: bf16, 1-2 tokens) is launched with programmatic
// dependent launch and issues its first batch of weight loads (16 KB a block) before griddepcontrol.wait: those
// loads need nothing the kernel before it writes. So a small kernel before it (a norm, the rotary, the MoE route:
// a few blocks, leaving the SMs free for the GEMV's) runs while the GEMV's first loads are in flight, and the pair
// costs less than the two prices timed apart (each elementwise row is a chain of that kernel alone). A kernel that
// fills the SMs itself (attention) leaves the GEMV's blocks nowhere to start early.
// How much hides: about one load round trip, fitted on the one-stream decode steps of four H100 leases (session 37,
// `validate --reprice`; Qwen1.5-MoE and DeepSeek-V2-Lite at 1-2 tokens ran 0.956-0.982x their price, 0.970-1.006x
// with 1 us hidden; 0.8 and 1.2 us fit about as well, 4 us over-hides Qwen1.5-MoE's route). Never below the
// GPU's per-kernel floor (its PDL launch gap), which a kernel costs however short.
#include <algorithm>

#include "planner/compile/op_graph.hpp"

namespace peerplan {

inline constexpr double kGemvPrefetchHideS = 1.0e-6;

// The executor's own dense GEMV at 1-2 tokens, on a profile whose executor launches with PDL (executor_launch.hpp):
// it prefetches before its wait (above) and its blocks fill every SM (sm_slots.hpp).
inline bool is_pdl_dense_gemv(const Op& op, bool pdl) {
  return pdl && op.kind == OpKind::Gemm && op.wdtype == DType::BF16 && op.m >= 1 && op.m <= 2 && op.batch_count == 1;
}

// The time an elementwise kernel priced `seconds` takes when a PDL dense GEMV follows it on the same stream.
inline double before_prefetching_gemv_s(double seconds, double floor_s) {
  return std::max(std::min(floor_s, seconds), seconds - kGemvPrefetchHideS);
}

}  // namespace peerplan
