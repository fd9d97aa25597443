#pragma once
// The CPU half of the `elementwise` measurement (profiler/measure/elementwise.cpp): which keys it
// times (one per (kind, cols): the table's curve), the arguments the executor derives for each call
// (profiler/exec/engine_ops.cpp run_elementwise, engine_moe.cpp run_moe_route / run_moe_combine),
// the buffers one pass allocates, where rotary writes each token into the KV cache, and how many
// calls one CUDA graph holds. No CUDA here: tested in CI (tests/profiler/elementwise_plan_test.cpp).
#include <cstdint>
#include <set>
#include <vector>

#include "planner/topology/shape_set.hpp"

namespace peerplan::profiler {

// One key per (kind, cols), the first of each in the set's order: the table holds one curve per
// (gpu, kind, cols) (elementwise_from_table), so a second key of the same (kind, cols) would only
// repeat its rows. Keys with an unknown kind are dropped.
std::vector<ElementwiseShapeKey> elementwise_timing_keys(const std::set<ElementwiseShapeKey>& keys);

// Rows up to this are decode steps (one token per sequence, each in its own cache slot); more rows
// are prefill chunks (consecutive positions). 256: the largest decode batch the grid reaches.
inline constexpr int64_t kEwDecodeRows = 256;

// One executor call over `rows` tokens of `key`, as the engine issues it.
struct ElementwiseCall {
  int64_t rows = 0;       // tokens (act: its rows, at least 1)
  int64_t cols = 0;       // as the kernel takes it: act's in whole 8-element vectors (max(8, cols) / 8 * 8)
  int64_t row_stride = 0; // qk_norm, rotary: the fused qkv row, (heads + 2 kv_heads) * head_dim;
                          // mla_rotary: the q projection's row, heads * (nope + rope)
  double bytes = 0;       // HBM bytes read and written (bf16), for the reps and the GB/s note
};
ElementwiseCall elementwise_call(const ElementwiseShapeKey& key, int64_t rows);

// Calls per CUDA graph: enough for about 200 us of kernels at 3 TB/s plus 3 us each, 1..64.
int elementwise_reps(const ElementwiseCall& c);

// The KV cache rotary writes into: [slots][kv_heads][ctx][head_dim] each for K and V (mla_rotary:
// the latent cache [slots][ctx][576]).
struct RotaryLayout {
  int64_t slots = kEwDecodeRows, ctx = 256;
};
// Large enough for `max_rows` tokens: kEwDecodeRows slots, ctx at least 256.
RotaryLayout rotary_layout(int64_t max_rows);
// Token t of a call over `rows` tokens: a decode step (rows <= kEwDecodeRows) puts token t in slot t
// at position ctx - 1; a prefill chunk fills slot t / ctx at position t % ctx.
struct RotaryPlace {
  int slot = 0, position = 0;
};
RotaryPlace rotary_place(int64_t t, int64_t rows, const RotaryLayout& l);

// bf16 elements (ints for the positions) of the buffers one pass allocates once, at the largest
// key and rows of all it times.
struct ElementwiseBuffers {
  int64_t max_rows = 0;
  int64_t hidden = 0;   // X: rms_norm's input, residual's and add_rms_norm's accumulator [rows][H]
  int64_t z = 0;        // Z: rms_norm's, act's and moe_combine's output, residual's addend, add_rms_norm's both
  int64_t y = 0;        // Y: act's input [rows][2 cols], moe_combine's routed rows [rows*k][H]
  int64_t logits = 0;   // moe_route's router logits [rows][E] (moe_combine's routing too)
  int64_t qkv = 0;      // qk_norm's and rotary's fused rows [rows][(heads + 2 kv) head_dim]
  int64_t norm_w = 0;   // rms_norm's weight [H]; qk_norm's q and k weights [2 head_dim]
  int64_t cache = 0;    // each of K and V: slots * kv_heads * ctx * head_dim
  // mla_rotary (engine_mla.cpp): Y holds the kv_a rows [rows][576] and qkv the q rows; a decode
  // step writes each head's rotated q_pe into the absorbed rows [rows <= kEwDecodeRows][heads][576],
  // and every token's latent row into the cache [slots][ctx][576] (the rotary layout's places).
  int64_t mla_q = 0;
  int64_t latent_cache = 0;
  RotaryLayout layout;
  int max_topk = 0, max_local_experts = 0;  // the routing buffer's shape
};
ElementwiseBuffers elementwise_buffers(const std::vector<ElementwiseShapeKey>& keys, const std::vector<int64_t>& rows);

// Rough seconds on an H200 (for the progress bar's ETA): ~10 ms per (key, rows) point.
double elementwise_est_seconds(size_t keys, size_t rows);

}  // namespace peerplan::profiler
