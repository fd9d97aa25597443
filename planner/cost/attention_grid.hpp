#pragma once
// Attention priced from a measured 2-D grid (issue 18): prefill chunks over (q_len, context) at a
// batch of sequences, decode over (batch, context). What is interpolated is the kernel's time per
// unit of work, log(seconds / work), bilinearly in (log x, log context), x = q_len (prefill) or
// batch (decode): efficiency varies smoothly where time does not (causal work is q (c - (q-1)/2)).
// Each grid row (one x) is interpolated along its own measured contexts, then the two rows around
// x are blended. Outside the measured range the edge efficiency is used and the price is marked
// Extrapolated (the profiler measures up to the model's maximum context, so that is beyond it).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "planner/cost/compute_cost.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

struct AttentionShape {
  bool prefill = false;
  int64_t batch = 1, q_len = 1, context = 1, heads = 0, kv_heads = 0, head_dim = 0;
  std::string kv_dtype = "bf16";
  int64_t v_dim = 0;  // 0: head_dim (attention_v_dim); MLA's rows are matched by it too
  // SMs of the GPU (its machine spec). > 0: prefill between grid points follows prefill_wave_model
  // instead of the attended pairs; 0 (unknown): the pairs, as before.
  int sms = 0;
};

// Attended (query, key) pairs: batch x q_len new tokens, token i of a chunk seeing context - q_len + i + 1.
double attention_work(const AttentionShape& s);

// cuDNN's fused prefill attention as waves of CTAs (docs/attention.md "A wave model between grid
// points"): a CTA per (sequence, head, 128-row query tile), tile i of a chunk of q new tokens over c
// keys (causal, bottom-right) visiting ceil((c - q + min((i + 1) 128, q)) / 128) KV blocks, the CTAs
// listed sequence by sequence, head by head, tile by tile and each given to the SM that frees first
// (list scheduling, one CTA per SM); returns the makespan in KV blocks plus a fixed 8 (launch, Q load,
// epilogue; fitted on the session 13 fine prefill study). Not a price: the pricer interpolates
// log(time / model) between measured points, so only its ratios between neighbours matter.
double prefill_wave_model(int64_t batch, int64_t q_len, int64_t context, int64_t heads, int sms);

// nullopt when the table holds no point of this phase and head shape (the caller then falls back).
// Points of the same batch are used for prefill; without them, batch-1 points priced per sequence.
std::optional<ComputePrice> attention_from_grid(const std::vector<AttentionTime>& table, int gpu,
                                                const AttentionShape& s);

// Held-back check: the listed points priced from the table without any of them; relative errors
// (priced / measured - 1), in the order given. Points that cannot be priced are NaN.
// sms > 0: prefill priced with the wave model (AttentionShape::sms).
std::vector<double> attention_grid_holdout(const std::vector<AttentionTime>& table, const std::vector<size_t>& held,
                                           int sms = 0);

// The grid the profiler times for each head configuration (profiler/measure/attention.cpp), here
// beside the rule that interpolates it so that both are one design, checked on a CPU
// (tests/cost/attention_grid_test.cpp) and offline against the study grid
// (scripts/attention_grid_design.py; docs/attention.md "Choosing the grid"):
//   decode:  rows = batches, points (batch, context) with batch x context <= max_tokens;
//   prefill: rows = q_lens at batch 1, points (q_len, q_len) and (q_len, context > q_len).
// Held-back points are geometric middles of grid cells, not grid points: timed with the grid and
// priced without any of them (attention_grid_holdout), the printed check of the interpolation error.
struct AttentionGridPlan {
  std::vector<int> batches, contexts, q_lens;
  std::vector<std::pair<int, int>> held_prefill, held_decode;  // (q_len, ctx) and (batch, ctx)
  int64_t max_tokens = int64_t(1) << 21;  // decode batch x context cap: bounds the KV cache
  bool quick = false;                     // --quick: a few points, no wave or launch-step rows
};

// Which grid: the default (held-back points included), or one of the studies the default is chosen from
// (PEERPLAN_ATTENTION_GRID=study / fine-prefill; nothing held back):
//   Study:       quarter-octave q_lens and contexts, every decode batch to 16 then multiples of 8;
//   FinePrefill: prefill q_lens every 8 tokens to 1024 and every 32 to 2048 over a few short and
//                medium contexts (cuDNN's time steps with its 128-token tiles, and between the steps
//                it is not smooth either: docs/attention.md "The grid on the GPU"), decode at batch 1.
//   FinePrefillLong: past the tile rows (16 to 64 tiles, q 2049..8192: where the default grid's held-back
//                points still miss 3 %, docs/attention.md "Rows at every tile boundary"), three q_lens a
//                tile, just past its start, its middle and its end, over contexts 8192 and 16384.
enum class AttentionGridMode { Default, Study, FinePrefill, FinePrefillLong };
// The mode PEERPLAN_ATTENTION_GRID names ("study", "fine-prefill", "fine-prefill-long"; unset or "": the default);
// InputError for another value.
AttentionGridMode attention_grid_mode(const char* env_value);
// quick: 2 x 2 points per phase (whatever the mode).
AttentionGridPlan attention_grid_plan(bool quick, int max_context, AttentionGridMode mode = AttentionGridMode::Default);

// Prefill rows on both sides of every 128-row query-tile boundary to `tiles` tiles: 128, 129, 256,
// 257, ..., tiles x 128, tiles x 128 + 1. The default grid has them to kTileRowsTo tiles (2048 tokens),
// for every head count: within a wave count cuDNN's time still moves with the tiles (the fill of its last
// wave; docs/attention.md "Rows at every tile boundary"), so a prefill to 2048 tokens is priced between
// rows of its own tile count.
inline constexpr int kTileRowsTo = 16;
std::vector<int> attention_tile_rows(int tiles);

// Prefill rows on both sides of the first eight wave boundaries of `heads` (cuDNN runs a CTA per
// (128-row query tile, head); a chunk's time steps where its tiles spill into one more wave of sms).
std::vector<int> attention_wave_rows(int heads, int sms, int max_q);

// Decode rows on both sides of each batch where a kernel's launch steps at some grid context
// (batch x context <= max_tokens): `span(batch, context)` is what the call's time follows (waves x
// the longest chunk) and a regime (cluster, split-K or not); rows where span grows by more than
// 10 % from one batch to the next or the regime changes. Rows already in plan.batches are left out.
struct LaunchSpan {
  double span = 0;
  int regime = 0;
};
std::vector<int> attention_launch_step_rows(const AttentionGridPlan& plan,
                                            const std::function<LaunchSpan(int batch, int context)>& span);

// mla_decode's launch (profiler/kernels/mla_decode.cu; its split count is planner/compile/
// mla_memory.hpp's mla_decode_split_count): chunks of whole 32-row tiles, one wave of resident CTAs.
LaunchSpan mla_decode_launch_span(int batch, int heads, int context, int sms);

// The points of a plan with `extra_batches` and `extra_q_lens` added as rows, each (batch or q_len,
// context, held back), sorted so that held-back points are timed among their neighbours. A held-back
// point that became a grid point moves to the next batch or q_len that is no row.
struct AttentionGridPoints {
  std::vector<std::tuple<int, int, bool>> decode, prefill;
};
AttentionGridPoints attention_grid_points(const AttentionGridPlan& plan, const std::vector<int>& extra_batches,
                                          const std::vector<int>& extra_q_lens);

}  // namespace peerplan
