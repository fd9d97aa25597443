#pragma once
// How the executor's decode attention kernel (profiler/kernels/decode_attention.cu) cuts a step into
// blocks, as plain constexpr / inline C++ both sides include: the kernel launches with it and the
// pricer (planner/compile/compiler.cpp) prices a batch of unequal contexts from it. Here, not in
// profiler/, because planner/ may not include profiler/ (DESIGN.md); one definition for both.
//
// The split-K plan: each of the batch's (sequence, kv head) pairs gets `splits` blocks, as many as
// fill one wave of resident blocks (blocks_per_sm x SMs), at most one per `quantum` tokens of the
// context the plan is made for; a sequence of c tokens is cut into chunks of chunk_len(c, splits),
// so its blocks follow its own length. Details and measurements: the kernel's comments.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner/core/host_device.hpp"

// Macros only so a benchmark build can try other values (-D...): every other build uses these.
#ifndef PEERPLAN_DECODE_BLOCKS_PER_SM
#define PEERPLAN_DECODE_BLOCKS_PER_SM 4
#endif
#ifndef PEERPLAN_DECODE_WIDE_BLOCKS_PER_SM
#define PEERPLAN_DECODE_WIDE_BLOCKS_PER_SM 2
#endif
#ifndef PEERPLAN_DECODE_WIDE_QUANTUM
#define PEERPLAN_DECODE_WIDE_QUANTUM 32
#endif
#ifndef PEERPLAN_DECODE_CLUSTER_MAX_PAIRS
#define PEERPLAN_DECODE_CLUSTER_MAX_PAIRS 64
#endif

namespace peerplan::decode_split {

constexpr int kQuantum = 64;  // tokens: the kernel's 4 warps x 16-token steps
constexpr int kBlocksPerSm = PEERPLAN_DECODE_BLOCKS_PER_SM;
constexpr int kWideBlocksPerSm = PEERPLAN_DECODE_WIDE_BLOCKS_PER_SM;
constexpr int kWideQuantum = PEERPLAN_DECODE_WIDE_QUANTUM;
constexpr int kMaxClusterSplits = 8;  // portable cluster size
constexpr int kClusterMaxPairs = PEERPLAN_DECODE_CLUSTER_MAX_PAIRS;

// The kernel's tiles for a shape (group <= 16 query heads per kv head, head_dim a multiple of 8 up
// to 256; support is checked elsewhere): group_tile rows and dim_tile head dims per block, and at
// dim tile 256 a group of 9..16 runs as two blocks per kv head (group_split).
struct Tiles {
  int group_tile = 1, dim_tile = 64, group_split = 1;
};
constexpr Tiles tiles(int group, int head_dim) {
  Tiles t;
  while (t.group_tile < group) t.group_tile *= 2;
  t.dim_tile = head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
  if (t.dim_tile == 256 && t.group_tile > 8) t.group_tile = 8, t.group_split = 2;
  return t;
}

struct Shape {
  int blocks_per_sm = kBlocksPerSm;
  int blocks_per_kv_head = 1;  // group_split
  int quantum = kQuantum;
  bool wide = false;  // dim tile 256: 2 blocks per SM, a 32-token quantum
};
constexpr Shape shape(int group, int head_dim) {
  const Tiles t = tiles(group, head_dim);
  Shape s;
  if (t.dim_tile == 256) s.blocks_per_sm = kWideBlocksPerSm, s.blocks_per_kv_head = t.group_split, s.quantum = kWideQuantum, s.wide = true;
  return s;
}

PEERPLAN_HD inline int chunk_len(int len, int splits, int quantum = kQuantum) {
  const int c = (len + splits - 1) / splits;
  return (c + quantum - 1) / quantum * quantum;
}

inline int splits(int batch, int kv_heads, int max_ctx, int sm_count, const Shape& sh) {
  const int per_seq = std::max(1, batch * kv_heads * sh.blocks_per_kv_head);
  const int target = std::max(1, sh.blocks_per_sm * std::max(sm_count, 1) / per_seq);
  const int hi = std::max(1, (max_ctx + sh.quantum - 1) / sh.quantum);
  return std::min(target, hi);
}

// The full-wave trim (the kernel's comment has the measurements): Auto takes one split fewer when
// the blocks fill over 95 % of one wave, there are >= 3 splits and the chunks are >= 8192 tokens.
enum class FullWave { Auto, Keep, Trim };
inline int trim_full_wave(int t, int batch, int kv_heads, int max_ctx, int sm_count, const Shape& sh,
                          FullWave mode = FullWave::Auto) {
  if (mode == FullWave::Keep || t <= 1) return t;
  const int64_t blocks = int64_t(batch) * kv_heads * sh.blocks_per_kv_head * t;
  const int64_t per_wave = int64_t(std::max(sm_count, 1)) * sh.blocks_per_sm;
  if (blocks > per_wave || blocks * 100 <= per_wave * 95) return t;
  if (mode == FullWave::Trim) return chunk_len(max_ctx, t, sh.quantum) >= 1024 ? t - 1 : t;
  return t >= 3 && chunk_len(max_ctx, t, sh.quantum) >= 8192 ? t - 1 : t;
}

struct Plan {
  int splits;
  bool cluster;
};
// Splits per (sequence, kv head) pair and whether they form one thread-block cluster (16..64
// pairs, a power of two <= 8 splits; the kernel's comment says why and when not).
inline Plan plan(int batch, int kv_heads, int max_ctx, int sm_count, bool clusters, const Shape& sh,
                 FullWave mode = FullWave::Auto) {
  const int t = trim_full_wave(splits(batch, kv_heads, max_ctx, sm_count, sh), batch, kv_heads, max_ctx, sm_count, sh, mode);
  const int pairs = batch * kv_heads * sh.blocks_per_kv_head;
  if (!clusters || pairs < 16 || pairs > kClusterMaxPairs || t == 1 || t > 2 * kMaxClusterSplits) return {t, false};
  if (sh.wide && t > kMaxClusterSplits && max_ctx > 1024) return {t, false};
  const int hi = std::max(1, (max_ctx + sh.quantum - 1) / sh.quantum);
  int s = 1;
  while (s < kMaxClusterSplits && 2 * s <= t) s *= 2;
  if (s < kMaxClusterSplits && t * t > 2 * s * s && 2 * s <= hi) s *= 2;
  if (int64_t(pairs) * s * kBlocksPerSm > 3 * int64_t(sm_count) * sh.blocks_per_sm) return {t, false};
  return {s, s > 1};
}

// The context at which a batch of unequal contexts costs what the profile's decode grid (every
// sequence at one context) says. The kernel plans its splits for the padded batch, cuts each
// sequence into its own chunks, and a step lasts as long as its longest block, streaming at a
// rate set by how many blocks are still running; the grid's rows at one context cannot see that.
// A batch of 3 padded to a graph of 4 (the padding rows one token each) ran 9-15 % over the price
// of the mean context (Llama-3.1-8B, one H200, session 10 E: 8k-32k prompts batch 3 1.114, 5 1.119,
// 6 1.089, 7 1.092; 64k-100k batch 3 1.145, 5 1.120). Model (fitted by a helper on those runs and
// checked on session 10 / 11 runs of 8B, Llama-3.2-1B, Qwen1.5-MoE, Mixtral): the blocks' lengths
// sorted, each length step costs its tokens times tau(n) = max(n + S/2, 2S) for n blocks still
// running (S SMs: the per-block rate falls as more blocks share HBM, and stops rising below ~2S
// blocks); the batch is priced at c_max * T(real) / T(all at c_max). A uniform batch gives its own
// context back. Contexts known as (min, max, mean of `real` sequences): the rest sit at the mean
// of what min and max leave. Padding rows (padded - real) hold one token; `mean` is over all
// `padded` rows (the padding's one token each included), as BatchShape::decode_context.
inline int64_t effective_context(int64_t real, int64_t padded, int64_t mean, int64_t cmin, int64_t cmax, int kv_heads,
                                 int group, int head_dim, int sm_count) {
  if (real <= 0 || padded < real || cmax <= 0 || mean <= 0 || kv_heads <= 0) return mean;
  if (real == padded && cmin == cmax) return mean;
  if (cmin <= 0 || cmin > cmax) cmin = cmax;
  mean = std::clamp((mean * padded - (padded - real)) / real, cmin, cmax);  // the real sequences' mean
  std::vector<int64_t> ctx;
  ctx.reserve(size_t(padded));
  if (real == 1) ctx.push_back(mean);
  else {
    ctx.push_back(cmin), ctx.push_back(cmax);
    const int64_t rest = real > 2 ? std::clamp((mean * real - cmin - cmax) / (real - 2), cmin, cmax) : 0;
    for (int64_t i = 2; i < real; ++i) ctx.push_back(rest);
  }
  while (int64_t(ctx.size()) < padded) ctx.push_back(1);
  const Shape sh = shape(group, head_dim);
  const int S = std::max(sm_count, 1);
  const int64_t c_top = *std::max_element(ctx.begin(), ctx.end());
  const int t = plan(int(padded), kv_heads, int(c_top), S, true, sh).splits;
  const int per_pair = kv_heads * sh.blocks_per_kv_head;
  auto fluid = [&](const std::vector<int64_t>& cs) {
    std::vector<int64_t> len;
    for (int64_t c : cs) {
      const int64_t ch = chunk_len(int(c), t, sh.quantum), a = (c + ch - 1) / ch;
      for (int p = 0; p < per_pair; ++p) {
        for (int64_t j = 0; j + 1 < a; ++j) len.push_back(ch);
        len.push_back(c - (a - 1) * ch);
      }
    }
    std::sort(len.begin(), len.end());
    double time = 0;
    int64_t done = 0;
    const int64_t n = int64_t(len.size());
    for (int64_t i = 0; i < n; ++i) {
      if (len[size_t(i)] <= done) continue;
      const double running = double(n - i);
      time += double(len[size_t(i)] - done) * std::max(running + S / 2.0, 2.0 * S);
      done = len[size_t(i)];
    }
    return time;
  };
  const double uniform = fluid(std::vector<int64_t>(size_t(padded), c_top));
  if (uniform <= 0) return mean;
  return std::max<int64_t>(1, int64_t(double(c_top) * fluid(ctx) / uniform + 0.5));
}

}  // namespace peerplan::decode_split

