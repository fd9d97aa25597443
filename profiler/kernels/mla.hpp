#pragma once
// Multi-head latent attention (MLA: DeepSeek-V2 / V2-Lite / V3, Kimi K2) kernels of the executor,
// in the form the serving engines run at decode (vLLM's and SGLang's "absorbed" MLA):
//
//   cache    one latent row of kMlaRow = 576 bf16 per token, shared by all heads:
//            [0, 512)   the compressed KV (kv_a_proj output's first kv_lora_rank values) after
//                       kv_a_layernorm (RMSNorm)
//            [512, 576) k_pe, rotated (DeepSeek's rope on interleaved pairs)
//            per layer [num_slots][max_ctx][576], a sequence's rows contiguous in its slot.
//   query    per head a 576-wide row [q_latent | rotated q_pe]: q_latent[h] = q_nope[h] W_UK[h]
//            (512 wide, the caller's batched GEMM), q_pe the head's 64 rope dims.
//   scores   query . cache_row (576-dim dot product) x scale (1/sqrt(qk_nope + qk_rope) times YaRN's
//            mscale^2: mla_softmax_scale below).
//   output   o_latent[h] = softmax . cache_row[0, 512): 512 wide per head, later multiplied by W_UV
//            (the caller's GEMM).
// So decode attention is MQA: all heads of the rank share one 576-wide K whose first 512 columns
// are also V. bf16 everywhere, fp32 accumulation. No allocation and no host synchronisation in
// any call: they run inside CUDA-graph capture. Every launch is checked (throws RuntimeError).
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace peerplan::kernels {

inline constexpr int kMlaLatent = 512;  // kv_lora_rank of every MLA model shipped so far
inline constexpr int kMlaRope = 64;     // qk_rope_head_dim
inline constexpr int kMlaRow = kMlaLatent + kMlaRope;  // 576: a cache row, a query row
inline constexpr int kMlaMaxHeads = 128;               // DeepSeek-V3 / Kimi K2 on one GPU

// Decode: one new token per row of q, attending to the first seq_lens[i] rows of its slot's cache
// (the new token's row included: mla_rope_and_cache has written it). Flash-decoding split-K: the
// context is cut into chunks over CTAs when batch x head groups does not fill the GPU; the chunks'
// partial softmaxes are merged by a second kernel through the workspace.
// Rows of q need not be distinct sequences: several rows may name the same slot with different
// lengths, so a prefill chunk can run here in the absorbed form (row i = token i of the chunk,
// seq_lens[i] = its position + 1): correct, but it reads the context once per token (from L2)
// and spends 576 + 512 multiply-adds per head and key, where the engines' prefill expands K/V
// per head (192 + 128).
struct MlaDecode {
  const __nv_bfloat16* q = nullptr;  // [batch][q_row_stride]: head h's 576 values at h * 576
  int64_t q_row_stride = 0;          // elements, a multiple of 8, >= heads * 576
  const __nv_bfloat16* cache = nullptr;  // this layer's [num_slots][max_ctx][576]
  const int* slots = nullptr;        // device [batch]: cache slot of each row (nullptr: slot = row)
  const int* seq_lens = nullptr;     // device [batch]: rows attended, incl. the new token (>= 1)
  __nv_bfloat16* out = nullptr;      // [batch][heads][512]
  float* workspace = nullptr;        // mla_decode_workspace_bytes() (split-K partials)
  int batch = 0, heads = 0, max_ctx = 0;  // heads: 1 to kMlaMaxHeads (fastest a multiple of 16)
  float scale = 0;                   // softmax scale, > 0 (mla_softmax_scale)
  // Heads per CTA: 16, or 32 / 64 dividing heads (0: the default, the largest that divides). All of
  // them give the same result; the self-test checks each, a benchmark may compare them.
  int head_tile = 0;
};
// Workspace the call needs for this shape on a GPU of sm_count SMs (0 when it never splits).
size_t mla_decode_workspace_bytes(int batch, int heads, int max_ctx, int sm_count);
// Context chunks (CTAs per (row, head group)) the call will use: fixed per (batch, heads, max_ctx,
// sm_count, head_tile), so a graph captured for a batch stays valid while contexts grow up to max_ctx.
int mla_decode_splits(int batch, int heads, int max_ctx, int sm_count, int head_tile = 0);
void mla_decode(const MlaDecode& a, int sm_count, cudaStream_t stream);

// Cache write + rope, one launch (vLLM's DeepSeek MLA: kv_a_layernorm, rotary_emb, and
// concat_and_cache_mla): for each token t
//   cache[slot][pos][0, 512)   = RMSNorm(kv[t][0, 512)) * norm_weight     (fp32, one rounding)
//   cache[slot][pos][512, 576) = rope(kv[t][512, 576), pos)
//   q_pe of every head h of token t = rope(q_pe, pos)              in place or into q_out
// rope: DeepSeek's on interleaved pairs (vLLM is_neox_style=False): pair i = dims (2i, 2i+1)
// rotated by pos * inv_freq[i], i < 32, cos and sin times rope_mscale. inv_freq from the device
// table when given (YaRN: mla_yarn_rope below computes it exactly as DeepSeek's
// DeepseekYarnRotaryEmbedding), else theta^(-2i/64).
struct MlaRopeCache {
  const __nv_bfloat16* kv = nullptr;  // [tokens][kv_row_stride]: the kv_a projection (512 latent, 64 k_pe)
  int64_t kv_row_stride = kMlaRow;
  __nv_bfloat16* q = nullptr;         // [tokens][q_row_stride]: head h's q_pe at h * q_head_stride + q_pe_offset
  int64_t q_row_stride = 0;           // (nullptr q or heads 0: no query rope)
  // Decode (absorbed): 576-wide heads, q_pe after the 512 latent values. Prefill (expanded, q_b
  // projection output as is): 192-wide heads [q_nope 128 | q_pe 64], q_pe at 128.
  int q_head_stride = kMlaRow, q_pe_offset = kMlaLatent;
  // Where the rotated q_pe goes (nullptr: in place). Decode can read q_pe from the q_b projection
  // output (192-wide heads, offset 128) and write it into the absorbed rows mla_decode reads
  // (576-wide heads, offset 512; the caller's W_UK GEMM writes the 512 latent values beside it).
  __nv_bfloat16* q_out = nullptr;
  int64_t q_out_row_stride = 0;
  int q_out_head_stride = kMlaRow, q_out_pe_offset = kMlaLatent;
  const __nv_bfloat16* norm_weight = nullptr;  // [512] kv_a_layernorm
  const int* positions = nullptr;     // device [tokens]
  const int* token_slot = nullptr;    // device [tokens]: cache slot of the token's sequence
  __nv_bfloat16* cache = nullptr;     // [num_slots][max_ctx][576]
  const float* inv_freq = nullptr;    // device [32] or nullptr (theta)
  int64_t tokens = 0;
  int heads = 0, max_ctx = 0;
  float eps = 1e-6f;                  // rms_norm_eps
  float theta = 10000.f;              // rope_theta (without inv_freq)
  float rope_mscale = 1.f;            // YaRN's cos/sin factor (1 for DeepSeek-V2/V3: mscale == mscale_all_dim)
};
void mla_rope_and_cache(const MlaRopeCache& a, cudaStream_t stream);

// Prefill, as vLLM runs MLA prefill (not absorbed): K and V are expanded per head from the latent by
// the caller's kv_b GEMM (output per head [k_nope 128 | v 128]), K = [k_nope | the shared rotated
// k_pe] (192), and causal MHA runs with qk_dim 192 and v_dim 128. This call writes the expanded K and
// V, V zero-padded to 192, into a scratch cache [num_seqs][heads][max_ctx][192] that
// prefill_attention (profiler/kernels/attention.hpp) reads as it is: head_dim 192, kv_heads = heads,
// slots nullptr (slot = sequence), the same q_start / seq_lens, scale = the MLA softmax scale,
// q = the q_b projection output ([total_q][heads][192]: q_nope 128 | q_pe 64, q_pe rotated by
// mla_rope_and_cache with q_head_stride 192, q_pe_offset 128). Each head's output is then its first
// 128 of 192 values (the padded V columns give exact zeros). The padding is what vLLM does for
// attention backends without v_dim != qk_dim: 1.5x the P.V work and V bytes of an exact kernel.
// Rows of the scratch past a sequence's context must hold finite values (zero it once when it is
// allocated): an attention kernel may multiply a masked weight 0 by them.
inline constexpr int kMlaQkNope = 128, kMlaVDim = 128;        // DeepSeek-V2/V3, Kimi K2
inline constexpr int kMlaQkDim = kMlaQkNope + kMlaRope;       // 192
inline constexpr int kMlaKvB = kMlaQkNope + kMlaVDim;         // 256: a head's kv_b output
struct MlaPrefillExpand {
  const __nv_bfloat16* kv_b = nullptr;  // [total_ctx][kv_b_row_stride]: head h's [k_nope | v] at h * 256
  int64_t kv_b_row_stride = 0;          // >= heads * 256, even
  const __nv_bfloat16* cache = nullptr; // latent cache [num_slots][cache_max_ctx][576]: k_pe at 512
  const int* slots = nullptr;           // device [num_seqs]: the sequence's latent cache slot (nullptr: index)
  const int* ctx_start = nullptr;       // device [num_seqs + 1]: prefix sums of seq_lens (rows of kv_b)
  __nv_bfloat16* k_out = nullptr;       // [num_seqs][heads][max_ctx][192]
  __nv_bfloat16* v_out = nullptr;       // [num_seqs][heads][max_ctx][192] (dims 128.. zero)
  int64_t total_ctx = 0;                // rows of kv_b (sizes the grid)
  int num_seqs = 0, heads = 0, max_ctx = 0, cache_max_ctx = 0;
};
void mla_prefill_expand(const MlaPrefillExpand& a, cudaStream_t stream);

// DeepSeek's YaRN (rope_scaling type "yarn"), computed on the host as DeepseekYarnRotaryEmbedding /
// vLLM's DeepseekScalingRotaryEmbedding do: the 32 inverse frequencies (to upload for
// MlaRopeCache::inv_freq) and the cos/sin factor. factor <= 1: plain rope (theta^(-2i/64)), factor 1.
struct MlaRope {
  std::vector<float> inv_freq;  // [32]
  float mscale = 1.f;           // MlaRopeCache::rope_mscale
};
MlaRope mla_yarn_rope(double theta, double factor, int original_max_position, double beta_fast, double beta_slow,
                      double mscale, double mscale_all_dim);
// The softmax scale of the absorbed attention: (qk_nope + qk_rope)^-0.5, times yarn_mscale(factor,
// mscale_all_dim)^2 under YaRN (vLLM's DeepseekV2MLAAttention.scaling; factor <= 1: no YaRN).
float mla_softmax_scale(int qk_nope_head_dim, int qk_rope_head_dim, double yarn_factor, double mscale_all_dim);

}  // namespace peerplan::kernels
