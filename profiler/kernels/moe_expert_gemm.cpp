#include "profiler/kernels/moe_expert_gemm.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/core/error.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/kernels/elementwise.hpp"

namespace peerplan::kernels {

const char* moe_expert_path_name(MoeExpertPath p) {
  return p == MoeExpertPath::CublasPerExpert ? "cublas_per_expert" : "grouped";
}

MoeExpertPath moe_expert_gemm_path(const MoeExpertGemmArgs& a, const MoeRouting& r, cudaStream_t stream) {
  const MoeGemmArgs& g = a.gemm;
  // FP8 / int8: cuBLASLt's 8-bit matmuls want n, k multiples of 16 (16-byte aligned rows, scale vectors and
  // outputs per expert). int4 / MXFP4: each touched expert dequantized to bf16 in slabs, then cuBLASLt (the
  // quantized runner's).
  const bool quantized = g.w_int4 || g.w_mxfp4 || g.w_fp8 || g.w_int8;
  const bool runner = quantized ? a.qcublas != nullptr && g.n % 16 == 0 && g.k % 16 == 0 : a.cublas != nullptr;
  if (!a.allow_cublas || !runner || g.entries <= 0 || g.entries > r.cap_entries) return MoeExpertPath::Grouped;
  if (g.gather && (!a.gathered || a.gathered_cap < g.entries * g.k || reinterpret_cast<uintptr_t>(a.gathered) % 256))
    return MoeExpertPath::Grouped;
  const MoeExpertLoad load{a.rows, g.touched, g.max_rows, g.n, g.k};
  if (!moe_use_cublas(load, true, a.min_gflop)) return MoeExpertPath::Grouped;
  // Last, and only when the rule says cuBLAS, so a decode graph's calls make no extra CUDA call: the
  // offsets' copy and synchronisation cannot be captured (the capture would be invalidated).
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
  return cs == cudaStreamCaptureStatusNone ? MoeExpertPath::CublasPerExpert : MoeExpertPath::Grouped;
}

MoeExpertPath moe_expert_gemm(const MoeExpertGemmArgs& a, const MoeRouting& r, cudaStream_t stream) {
  const MoeExpertPath path = moe_expert_gemm_path(a, r, stream);
  const MoeGemmArgs& g = a.gemm;
  if (path == MoeExpertPath::Grouped) {
    moe_grouped_gemm(g, r, stream);
    return path;
  }
  if (!g.x || !(g.w || ((g.w_fp8 || g.w_int8) && g.w_scale) || (g.w_int4 && g.w_int4_scale) ||
                (g.w_mxfp4 && g.w_mxfp4_scale)) || !g.y || g.n <= 0 ||
      g.k <= 0)
    throw std::invalid_argument("moe_expert_gemm: operands and a positive n, k are required");
  // Per-expert row offsets of this routing (moe_route.hpp: offsets[local experts + 1]). The host
  // copy is pageable: a copy of a few hundred bytes, which the synchronisation waits for anyway.
  const int experts = r.local_experts;
  std::vector<int> off(size_t(experts) + 1, 0);
  CUDA_CHECK(cudaMemcpyAsync(off.data(), r.offsets, off.size() * sizeof(int), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  bool ok = off[0] == 0 && off[size_t(experts)] <= g.entries;
  for (int e = 0; ok && e < experts; ++e) ok = off[size_t(e) + 1] >= off[size_t(e)];
  if (!ok)
    throw RuntimeError("moe_expert_gemm: the routing's offsets are not a prefix sum of at most " +
                       std::to_string(g.entries) + " routed rows (offsets[0] " + std::to_string(off[0]) + ", offsets[" +
                       std::to_string(experts) + "] " + std::to_string(off[size_t(experts)]) + ")");
  const int64_t rows = off[size_t(experts)];
  if (rows == 0) return path;
  const __nv_bfloat16* x = g.x;
  if (g.gather) {
    // gate_up: row r of the GEMM is token token_of_row[r]; gathered in sorted order so each expert's
    // rows are contiguous (ids past x_rows would read zeros; the routing never produces them).
    embedding_gather(g.gather, g.x, a.gathered, rows, a.x_rows > 0 ? a.x_rows : INT64_MAX, g.k, stream);
    x = a.gathered;
  }
  if (g.w_int4 || g.w_mxfp4) {  // each touched expert dequantized in slabs, one bf16 matmul per slab
    a.qcublas->run_4bit_expert_groups(x, off.data(), experts, g, g.y, stream);
    return path;
  }
  if (g.w_int8) {  // the rows quantized once, then one int8 matmul per touched expert
    a.qcublas->run_int8_channel_groups(x, off.data(), experts, g.n, g.k, g.w_int8, g.w_scale, g.y, stream);
    return path;
  }
  if (g.w_fp8) {  // the rows quantized once, then one FP8 matmul per touched expert
    a.qcublas->run_fp8_channel_groups(x, off.data(), r.offsets, experts, g.n, g.k, g.w_fp8, g.w_scale, g.y, stream);
    return path;
  }
  for (int e = 0; e < experts; ++e) {
    const int64_t m = off[size_t(e) + 1] - off[size_t(e)];
    if (m == 0) continue;
    const int64_t r0 = off[size_t(e)];
    a.cublas->run_any_m(x + r0 * g.k, g.w + int64_t(e) * g.n * g.k, g.y + r0 * g.n, m, g.n, g.k, stream);
  }
  return path;
}

}  // namespace peerplan::kernels
