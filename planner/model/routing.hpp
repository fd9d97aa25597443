#pragma once
// MoE routing as one model shared by the compiler, the cost model and the executor (issue 14).
//
// Which k experts a token goes to is drawn from a counter-based hash of (seed, layer, token index in
// the iteration, draw): uniformly, or from a popularity distribution (Zipf exponent or a per-expert
// list) for hot experts. The same function runs on the host (compiler, simulator) and on the GPU
// (the executor's routing kernel: profiler/ compiles this header with nvcc), so simulator and
// executor route every iteration identically. The executor still runs the router GEMM and the
// softmax over its logits, as engines do; only the choice of experts comes from here, because a
// model with random weights has no meaningful routing of its own.
//
// This header includes nothing from CUDA: PEERPLAN_HD expands to __host__ __device__ under nvcc only.
#include <cstdint>

#include "planner/core/host_device.hpp"

namespace peerplan::routing {

PEERPLAN_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The draw-th random word of `token` in `layer`.
PEERPLAN_HD inline uint64_t draw_word(uint64_t seed, int layer, int64_t token, int draw) {
  return mix64(mix64(seed ^ (uint64_t(uint32_t(layer)) << 40)) ^ mix64(uint64_t(token) * 64u + uint64_t(draw)));
}

// Experts of one token: k distinct ids in [0, experts), written to out[0..k) in the order drawn.
// cdf == nullptr: uniform. Otherwise cdf[e] = P(expert <= e) as float (cdf[experts-1] == 1): each
// draw picks the first e with u < cdf[e], duplicates are redrawn. The arithmetic is integer or
// exact float (u has 24 bits), so host and device agree bit for bit.
PEERPLAN_HD inline void route_token(uint64_t seed, int layer, int64_t token, int experts, int k, const float* cdf,
                                    int* out) {
  int have = 0;
  for (int draw = 0; have < k && draw < 64 * k; ++draw) {
    const uint64_t w = draw_word(seed, layer, token, draw);
    int e;
    if (cdf == nullptr) {
      e = int((w >> 32) % uint64_t(experts));
    } else {
      const float u = float(w >> 40) * (1.0f / 16777216.0f);
      int lo = 0, hi = experts - 1;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (u < cdf[mid]) hi = mid;
        else lo = mid + 1;
      }
      e = lo;
    }
    bool dup = false;
    for (int i = 0; i < have; ++i) dup = dup || out[i] == e;
    if (!dup) out[have++] = e;
  }
  // A popularity with (near-)zero entries can starve the redraws: fill with the lowest unused ids.
  for (int e = 0; have < k && e < experts; ++e) {
    bool dup = false;
    for (int i = 0; i < have; ++i) dup = dup || out[i] == e;
    if (!dup) out[have++] = e;
  }
}

}  // namespace peerplan::routing
