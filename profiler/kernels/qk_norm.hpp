#pragma once
// Qwen3's per-head QK-norm (issue 23): RMSNorm of every q head and k head of a fused QKV row over
// its head_dim, in place, before rotary (transformers' Qwen3Attention q_norm / k_norm, vLLM's
// Qwen3 attention): x[d] / rms(x[0..head_dim)) * w[d], one weight vector of head_dim for all q
// heads and one for all k heads. bf16 in and out, fp32 arithmetic. No allocation and no host
// synchronisation: it runs inside CUDA-graph capture. Every launch is checked.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace peerplan::kernels {

struct QkNormArgs {
  __nv_bfloat16* qkv = nullptr;  // [tokens][row_stride]: heads q, then kv_heads k (then v, untouched)
  int64_t row_stride = 0;        // elements per token row, >= (heads + kv_heads) * head_dim
  const __nv_bfloat16* q_weight = nullptr;  // [head_dim]
  const __nv_bfloat16* k_weight = nullptr;  // [head_dim]
  int64_t tokens = 0;
  int heads = 0, kv_heads = 0, head_dim = 128;
  float eps = 1e-6f;  // Qwen3's rms_norm_eps
};

// Largest head_dim the kernel holds in registers (2 values per lane per step of a warp).
inline constexpr int kQkNormMaxHeadDim = 256;

// A warp normalises a few (token, head) pairs, each whole head in registers. Throws RuntimeError
// for an odd head_dim or one above kQkNormMaxHeadDim, an odd row stride, or missing pointers;
// tokens == 0 launches nothing.
void qk_norm(const QkNormArgs& a, cudaStream_t stream);

}  // namespace peerplan::kernels
