#pragma once
// Attention kernels of the executor, callable from host code (the profiler times these very
// kernels, so the cost model prices what the executor runs).
//
// Layouts (bf16 everywhere, fp32 accumulation inside the kernels):
//   q        [tokens][q_row_stride]   token t's head h starts at q + t*q_row_stride + h*head_dim
//                                     (so q can point into the fused QKV GEMM output directly)
//   KV cache [slots][kv_heads][max_ctx][head_dim] for K and for V separately: one contiguous region
//            per sequence slot, a head's context contiguous (what decode reads).
//   out      [tokens][heads*head_dim]
// Sequence lengths live in device memory, so a captured CUDA graph stays valid while contexts grow.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/common/attention_support.hpp"

namespace peerplan::kernels {

// Decode: one new token per sequence, attending to its whole cached context (incl. itself).
// Flash-decoding: the context is split into chunks (split-K) so a small batch still fills the GPU;
// the chunks' partial softmaxes are merged by a second kernel through the workspace or, on Hopper
// with 16..64 (sequence, kv head) pairs, inside one thread-block cluster (workspace unused).
struct DecodeAttention {
  const __nv_bfloat16* q = nullptr;   // [batch][q_row_stride]
  int64_t q_row_stride = 0;           // elements
  const __nv_bfloat16* k_cache = nullptr;
  const __nv_bfloat16* v_cache = nullptr;
  // FP8 e4m3 KV cache (issue 15): when set, read instead of k_cache / v_cache (same layout, one
  // byte per element); element = code * k_scale (v_scale), per-tensor scales.
  const uint8_t* k_cache_fp8 = nullptr;
  const uint8_t* v_cache_fp8 = nullptr;
  float k_scale = 1.f, v_scale = 1.f;
  const int* slots = nullptr;         // device [batch]: cache slot of each sequence (nullptr: slot = index)
  const int* seq_lens = nullptr;      // device [batch]: context length incl. the new token (>= 1)
  __nv_bfloat16* out = nullptr;       // [batch][heads*head_dim]
  float* workspace = nullptr;         // decode_attention_workspace_bytes()
  int batch = 0, heads = 0, kv_heads = 0, head_dim = 128, max_ctx = 0;
  float scale = 0;                    // 0: 1/sqrt(head_dim)
  // Sliding window (issue 18; 0: the whole context): the new token at position len - 1 attends to
  // the last `window` tokens, keys (len - 1 - window, len - 1]; split-K is cut over that span, so
  // only the window's K/V bytes are read.
  int window = 0;
};
// Chunk length (tokens) the kernel will use for this shape; fixed per (batch, max_ctx, window) so
// a graph captured for a batch size stays valid. head_dim and group (query heads per kv head)
// choose the plan: the dim tile 256 (head_dim 136..256) plans for its 2 resident blocks per SM.
int decode_attention_chunk(int batch, int kv_heads, int max_ctx, int sm_count, int window = 0, int head_dim = 128,
                           int group = 1);
size_t decode_attention_workspace_bytes(int batch, int heads, int head_dim, int max_ctx, int kv_heads,
                                        int sm_count);
// The launch a decode call of this shape makes: split-K splits, whether they run as one cluster,
// the longest chunk (tokens) and the waves of split blocks over the SMs at the plan's blocks-per-SM
// target. Time steps where these change with the batch (the profiler adds grid rows there).
struct DecodeLaunch {
  int splits = 1;
  bool cluster = false;
  int chunk = 0;
  int waves = 1;
};
DecodeLaunch decode_attention_launch(int batch, int heads, int head_dim, int max_ctx, int kv_heads, int sm_count);
void decode_attention(const DecodeAttention& a, int sm_count, cudaStream_t stream);

// Prefill (or a chunk of it): each sequence's q_len new tokens attend causally to the first
// seq_len tokens of its cache (the new tokens are the last q_len of those; the caller has already
// written their K and V into the cache). Sequences are packed along the token axis.
struct PrefillAttention {
  const __nv_bfloat16* q = nullptr;   // [total_q][q_row_stride]
  int64_t q_row_stride = 0;
  const __nv_bfloat16* k_cache = nullptr;
  const __nv_bfloat16* v_cache = nullptr;
  const uint8_t* k_cache_fp8 = nullptr;  // FP8 e4m3 KV cache, as DecodeAttention's
  const uint8_t* v_cache_fp8 = nullptr;
  float k_scale = 1.f, v_scale = 1.f;
  const int* slots = nullptr;         // device [num_seqs] (nullptr: slot = index)
  const int* q_start = nullptr;       // device [num_seqs + 1]: prefix sums of q_len over sequences
  const int* seq_lens = nullptr;      // device [num_seqs]: context incl. the new tokens
  __nv_bfloat16* out = nullptr;       // [total_q][heads*head_dim]
  int num_seqs = 0, max_q_len = 0;    // max_q_len sizes the grid
  int heads = 0, kv_heads = 0, head_dim = 128, max_ctx = 0;
  float scale = 0;
  int num_slots = 0;  // slots in the KV cache (0: num_seqs); cuDNN's paged path needs the whole cache's extent
  // Sliding window (issue 18; 0: full causal): the token at position p attends to keys
  // (p - window, p]. Both paths run it as a band: cuDNN through its sliding-window mask, the own
  // kernel skipping the K/V tiles outside the band.
  int window = 0;
};
void prefill_attention(const PrefillAttention& a, cudaStream_t stream);
// cuDNN's fused attention for this call where it runs it (prefill_dispatch.cpp; the environment's
// PEERPLAN_PREFILL_ATTENTION = auto | cudnn | own chooses); false: the own kernel runs it.
bool prefill_attention_cudnn(const PrefillAttention& a, cudaStream_t stream);
// "cudnn 9.x.y (path)" or "own kernel (why cuDNN did not run it)" for the last prefill call.
std::string prefill_attention_last_path();
// The prefill path of this process for attention_shape_refusal / check_attention_executable:
// cuDNN usable (PEERPLAN_PREFILL_ATTENTION not "own", libcudnn loads), and kv_fp8 as given.
AttentionPath prefill_attention_path(bool kv_fp8 = false);

// Which shapes run (head_dim, query heads per kv head) and how: profiler/common/attention_support.hpp.

}  // namespace peerplan::kernels
