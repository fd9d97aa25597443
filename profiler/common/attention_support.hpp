#pragma once
// Which attention shapes the executor's kernels (profiler/kernels) run, as CPU code: one rule for
// the kernels' dispatch, the executor's refusal before any GPU work (validate, plan --validate,
// through GpuBackend::check_executable), the profiler's list of shapes to time and the CPU tests.
//
// Decode runs every q-heads-per-kv-head ratio G of 1..16 and every head_dim of 8..128 that is a
// multiple of 8: the specialised kernels (G in 1, 2, 4, 8, 16 and head_dim 64 or 128) run as
// before; any other (G, head_dim) runs the same kernel code in its general form on the next group
// tile (2, 4, 8, 16: the extra query rows are zeros and never stored) and the next head-dim tile
// (64, 128: the extra dims are never loaded, their zeros add nothing to Q.K, and never stored).
// Prefill is written for any ratio (each block is one query head) and instantiated for head_dim
// 64, 80, 96, 128. The executor needs both, so it runs head_dim 64, 80, 96, 128.
// Not run: head_dim 192 and 256. Decode keeps a 16-token step's K and V loads and its O^T
// accumulators in registers: 144 per thread at 192, 192 at 256, over the 128 that its 4 resident
// blocks per SM allow (the bytes in flight it needs for HBM speed; at 128 it already sits at the
// cap), and at 256 with 16 heads its per-warp merge buffer (66 KiB) exceeds the 48 KiB of static
// shared memory. Prefill (ptxas -v, sm_90, 2026-12-02): 192 fits the 64-row kernel in 255
// registers but its 128-row kernel spills 872 bytes; 256 spills in both (76 and 2316 bytes).
// Nor more than 16 query heads per kv head (MQA with 32+ heads: the S tile holds 16 query rows).
#include <string>

namespace peerplan {
struct ModelConfig;  // planner/model/model_config.hpp (not included: nvcc compiles this header too)
}

namespace peerplan::kernels {

constexpr int kMaxAttentionGroup = 16;  // query heads per kv head, per GPU

// head_dim both attention kernels run (64, 80, 96, 128).
bool attention_head_dim_supported(int head_dim);
// head_dim the decode kernel alone runs (a multiple of 8 up to 128).
bool decode_head_dim_supported(int head_dim);

// The decode kernel chosen for a shape: group_tile query rows (1, 2, 4, 8, 16) and dim_tile head
// dims (64, 128) per block; general: the runtime-bounded form (group < group_tile or head_dim <
// dim_tile), else the specialised kernel of exactly that shape. group_tile 0: not supported.
struct DecodeVariant {
  int group_tile = 0, dim_tile = 0;
  bool general = false;
};
DecodeVariant decode_variant(int group, int head_dim);

// "" if the executor's attention runs this per-GPU shape; otherwise why, naming the value and what
// would run ("head_dim 192: the executor's attention kernels run 64, 80, 96, 128").
std::string attention_shape_refusal(int heads, int kv_heads, int head_dim);

// The model's attention as the executor would run it at any TP degree (a TP shard never has more
// query heads per kv head than the whole model: heads/tp over kv_heads/tp, or over 1 replicated
// kv head when tp > kv_heads). Throws InputError naming cfg.source_file and the config field
// (head_dim, num_attention_heads) when it cannot run. MLA models are not checked here.
void check_attention_executable(const ModelConfig& cfg);

}  // namespace peerplan::kernels
