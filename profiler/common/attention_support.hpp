#pragma once
// Which attention shapes the executor's kernels (profiler/kernels) run, as CPU code: one rule for
// the kernels' dispatch, the executor's refusal before any GPU work (validate, plan --validate,
// through GpuBackend::check_executable), the profiler's list of shapes to time and the CPU tests.
//
// Decode runs every q-heads-per-kv-head ratio G of 1..16 and every head_dim of 8..256 that is a
// multiple of 8: the specialised kernels (G in 1, 2, 4, 8, 16 and head_dim 64, 128 or 256) run;
// any other (G, head_dim) runs the same kernel code in its general form on the next group tile
// (2, 4, 8, 16: the extra query rows are zeros and never stored) and the next head-dim tile (64,
// 128, 256: the extra dims are never loaded, their zeros add nothing to Q.K, and never stored).
// The 256 tile keeps a 16-token step's loads and accumulators in up to 255 registers, so 2 blocks
// share an SM (4 at 64 and 128; the bytes in flight per SM are the same), and takes at most 8
// query heads per block: 9..16 run as two blocks per kv head (group_split 2).
// Prefill's own kernel is written for any ratio (each block is one query head) and instantiated
// for head_dim 64, 80, 96, 128 and 192 (192 with 64-row blocks only: at 128 rows it spills 872
// bytes; ptxas -v, sm_90). Head_dim 256 spills in both (76 and 2316 bytes), so 256 prefills only
// on cuDNN's fused attention (the default path; cuDNN takes head_dim up to 256 on Hopper): not
// with an FP8 KV cache (the cuDNN graph reads bf16), nor with PEERPLAN_PREFILL_ATTENTION=own, nor
// on a host where libcudnn does not load. AttentionPath says which of those hold.
// Nor more than 16 query heads per kv head (MQA with 32+ heads: the decode S tile holds 16 rows).
#include <string>

namespace peerplan {
struct ModelConfig;  // planner/model/model_config.hpp (not included: nvcc compiles this header too)
}

namespace peerplan::kernels {

constexpr int kMaxAttentionGroup = 16;  // query heads per kv head, per GPU

// head_dim that decode and the own prefill kernel both run, so every path does (64, 80, 96, 128, 192).
bool attention_head_dim_supported(int head_dim);
// head_dim whose prefill runs only on cuDNN (256).
bool attention_head_dim_needs_cudnn(int head_dim);
// head_dim the decode kernel alone runs (a multiple of 8 up to 256).
bool decode_head_dim_supported(int head_dim);

// How prefill attention runs on this host, as far as the shape rule needs it: an FP8 KV cache
// (the own kernel only), and whether cuDNN may run it (PEERPLAN_PREFILL_ATTENTION is not "own"
// and libcudnn loads; kernels::prefill_attention_path() in attention.hpp asks the GPU side). The
// default is a bf16 cache with cuDNN, the executor's default path: what a CPU-only build assumes.
struct AttentionPath {
  bool kv_fp8 = false;
  bool cudnn = true;
  std::string no_cudnn_why;  // why cuDNN is not used (cudnn false): "PEERPLAN_PREFILL_ATTENTION=own", ...
};

// The decode kernel chosen for a shape: group_tile query rows (1, 2, 4, 8, 16) and dim_tile head
// dims (64, 128) per block; general: the runtime-bounded form (group < group_tile or head_dim <
// dim_tile), else the specialised kernel of exactly that shape. group_tile 0: not supported.
struct DecodeVariant {
  int group_tile = 0, dim_tile = 0;
  bool general = false;
  int group_split = 1;  // blocks per kv head: 2 for 9..16 query heads at dim tile 256 (8 heads each)
};
DecodeVariant decode_variant(int group, int head_dim);

// Multi-head latent attention (DeepSeek-V2/V3, docs/attention.md "MLA"): the executor's MLA kernels
// (profiler/kernels/mla.hpp, whose constants engine_mla.cpp checks against these) take a 512-wide
// latent, a 64-wide rope key, 128-wide q_nope and v heads, 1 to 128 heads per GPU and a bf16 cache.
constexpr int kMlaSupportedLatent = 512, kMlaSupportedRope = 64, kMlaSupportedNope = 128, kMlaSupportedVDim = 128;
constexpr int kMlaSupportedMaxHeads = 128;
// "" if the MLA kernels run this shape; otherwise why, naming the value, and *field (when given)
// the config field at fault.
std::string mla_shape_refusal(int kv_lora_rank, int qk_rope_head_dim, int qk_nope_head_dim, int v_head_dim,
                              int heads_per_gpu, bool kv_fp8, const char** field = nullptr);

// "" if the executor's attention runs this per-GPU shape on `path`; otherwise why, naming the value
// and what would run ("head_dim 112: the executor's attention runs 64, 80, 96, 128, 192 and 256").
std::string attention_shape_refusal(int heads, int kv_heads, int head_dim, const AttentionPath& path = {});

// The model's attention as the executor would run it at any TP degree (a TP shard never has more
// query heads per kv head than the whole model: heads/tp over kv_heads/tp, or over 1 replicated
// kv head when tp > kv_heads), on `path` with the KV-cache format of cfg.kv_dtype. Throws
// InputError naming cfg.source_file and the config field (head_dim, num_attention_heads; MLA:
// kv_lora_rank, qk_rope_head_dim, ...) when it cannot run.
void check_attention_executable(const ModelConfig& cfg, const AttentionPath& path = {});

}  // namespace peerplan::kernels
