#pragma once
// THE routed-expert GEMM call (issue 14): the executor runs it (engine_moe.cpp) and the profiler times
// it (measure/grouped_gemm.cpp), so a grouped GEMM's price is of the path the executor takes. Two
// paths, same output (the routed rows sorted by expert, in y, which MoeCombine reads):
//   grouped: moe_grouped_gemm over the device-side tile lists, no host synchronisation (decode
//            graphs; small groups);
//   cuBLAS:  the routing's per-expert offsets copied to the host (one cudaMemcpyAsync and a stream
//            synchronisation), gate_up's routed tokens gathered into contiguous rows
//            (embedding_gather over token_of_row), then one cuBLASLt GEMM per non-empty expert
//            (gpu::GemmRunner, y[m,n] = x[m,k] W_e^T) on pointer offsets into x, W and y; FP8 and int8
//            experts through gpu::QuantGemmRunner (x quantized per token, 8-bit tensor cores, as vLLM's W8A8).
// Which one: moe_use_cublas (profiler/common/moe_cublas_rule.hpp) on the host figures, made before
// the copy; never while `stream` is being captured into a CUDA graph (checked here).
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/common/moe_cublas_rule.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/moe_route.hpp"

namespace peerplan::gpu {
class GemmRunner;
class QuantGemmRunner;
}

namespace peerplan::kernels {

struct MoeExpertGemmArgs {
  // As moe_grouped_gemm takes it; gemm.max_rows and gemm.touched are the host figures the rule reads.
  MoeGemmArgs gemm;
  int64_t rows = 0;    // host figure of the routed rows (the compiler's op.m), for the rule
  int64_t x_rows = 0;  // gather: rows of gemm.x (the routed tokens); 0 = not bounded
  bool allow_cublas = true;  // false: the grouped kernel whatever the rule (graph-timed profile rows)
  double min_gflop = -1;     // the rule's threshold; < 0: moe_cublas_min_gflop() (the environment)
  gpu::GemmRunner* cublas = nullptr;  // the stream's device's runner; nullptr: grouped
  // FP8 experts (gemm.w_fp8): the device's quantized runner, per expert W8A8 per-channel
  // (QuantGemmRunner::run_fp8_channel_groups: the tokens quantized per row once), int8 experts the same
  // in int8 (run_int8_channel_groups); int4 experts
  // (gemm.w_int4): its dequantize-then-bf16 path (run_4bit_expert_groups); nullptr: grouped.
  gpu::QuantGemmRunner* qcublas = nullptr;
  // gate_up (gemm.gather set): room for the gathered rows, 256-byte aligned, `gathered_cap` elements;
  // with less than entries x k of it the call stays grouped.
  __nv_bfloat16* gathered = nullptr;
  int64_t gathered_cap = 0;
};

enum class MoeExpertPath { Grouped = 0, CublasPerExpert = 1 };
const char* moe_expert_path_name(MoeExpertPath p);  // "grouped", "cublas_per_expert"

// The path a call would take (host only, plus cudaStreamIsCapturing on `stream`).
MoeExpertPath moe_expert_gemm_path(const MoeExpertGemmArgs& a, const MoeRouting& r, cudaStream_t stream);

// Enqueues the call on `stream` and returns the path taken. The cuBLAS path blocks the host until
// the stream has run everything before it (the offsets' copy). Throws as moe_grouped_gemm, GpuError
// on a failed CUDA / cuBLAS call, RuntimeError on offsets the routing cannot have produced.
MoeExpertPath moe_expert_gemm(const MoeExpertGemmArgs& a, const MoeRouting& r, cudaStream_t stream);

}  // namespace peerplan::kernels
