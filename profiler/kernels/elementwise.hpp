#pragma once
// Memory-bound kernels of a decoder layer (bf16 in and out, fp32 arithmetic), as an inference
// engine runs them between GEMMs. Host-callable; every launch is checked.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace peerplan::kernels {

// Largest hidden size the norms run (a row is held in registers by one 256-thread block).
constexpr int64_t kMaxNormHidden = 16384;

// out[t] = x[t] / rms(x[t]) * w   (x, out: [tokens][hidden]; out may alias x)
void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int64_t tokens,
             int64_t hidden, float eps, cudaStream_t stream);
// residual += x; out = rmsnorm(residual) * w   (vLLM's fused_add_rms_norm)
void add_rmsnorm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* w, __nv_bfloat16* out,
                 int64_t tokens, int64_t hidden, float eps, cudaStream_t stream);
// a += b over n elements
void residual_add(__nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, cudaStream_t stream);
// out[t][i] = silu(in[t][i]) * in[t][inter + i]   (in: [tokens][2*inter], gate then up)
void silu_mul(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t tokens, int64_t inter, cudaStream_t stream);
// out[t] = table[ids[t]]   (table: [vocab][hidden]); ids outside [0, vocab) give zeros. `zero`, when
// given, is a second [tokens][hidden] buffer set to 0 in the same pass: the residual stream that the
// first layer's add_rmsnorm then adds the embeddings into.
void embedding_gather(const int* ids, const __nv_bfloat16* table, __nv_bfloat16* out, int64_t tokens,
                      int64_t vocab, int64_t hidden, cudaStream_t stream, __nv_bfloat16* zero = nullptr);

// Rotary embedding (rotate-half, as Llama) applied in place to the q and k heads of a fused QKV row
// [heads q | kv_heads k | kv_heads v] x head_dim, then K and V written into the KV cache
// [slot][kv_heads][max_ctx][head_dim] at each token's position (vLLM's rotary + reshape_and_cache).
struct RotaryCache {
  __nv_bfloat16* qkv = nullptr;     // [tokens][(heads + 2*kv_heads) * head_dim]
  const int* positions = nullptr;   // device [tokens]
  const int* token_slot = nullptr;  // device [tokens]: cache slot of the token's sequence
  __nv_bfloat16* k_cache = nullptr;
  __nv_bfloat16* v_cache = nullptr;
  // FP8 e4m3 KV cache (issue 15): when set, K and V are written here instead, code =
  // e4m3(value / k_scale) (v_scale), saturating.
  uint8_t* k_cache_fp8 = nullptr;
  uint8_t* v_cache_fp8 = nullptr;
  float k_scale = 1.f, v_scale = 1.f;
  int64_t tokens = 0;
  int heads = 0, kv_heads = 0, head_dim = 128, max_ctx = 0;
  float theta = 500000.f;
};
void rotary_and_cache(const RotaryCache& a, cudaStream_t stream);

// Fills n bf16 values with a deterministic hash of (seed, index), uniform in [-scale, scale].
// Synthetic weights: same shapes and bytes as real ones, never zeros (which can run faster).
void fill_random(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale, cudaStream_t stream);
void fill_value(__nv_bfloat16* p, int64_t n, float v, cudaStream_t stream);

}  // namespace peerplan::kernels
