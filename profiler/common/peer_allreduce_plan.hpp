#pragma once
// CPU side of the peer-memory all-reduce measurement (issue 17; the kernels are
// profiler/kernels/peer_allreduce.cu): which groups and sizes are measured, the launch geometry,
// the values each rank starts with and the sum every rank must end with, and the curves recorded
// ("peer_allreduce" in the profile, read by planner/cost/peer_allreduce_cost.*). Built without
// CUDA so tests/profiler checks it on CPU.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/plan/allreduce_rule.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan::profiler {

inline constexpr int kPeerArMaxRanks = 8;    // signal slots per block (engines stop at 8 too)
inline constexpr int kPeerArMaxBlocks = 36;  // blocks per launch (as vLLM's default block limit)
inline constexpr int kPeerArThreads = 512;
inline constexpr int64_t kPeerArMinBytes = 4 * 1024, kPeerArMaxBytes = 64ll * 1024 * 1024;

// Sizes from 4 KiB to 64 MiB (factor 2), clipped to [min_bytes, max_bytes] of the sweep, each a
// multiple of 16 bytes times the group size (whole 16-byte vectors in every two-shot share).
std::vector<int64_t> peer_allreduce_sizes(int64_t min_bytes, int64_t max_bytes, int ranks);

// The groups measured: of `candidates` (the NCCL groups), those of 2..8 GPUs in which every
// ordered pair passes `usable` (peer access capable and verified).
std::vector<std::vector<int>> peer_allreduce_groups(const std::vector<std::vector<int>>& candidates,
                                                    const std::function<bool(int, int)>& usable);

// Blocks for `bytes` of bf16 with 16-byte vectors per thread, at most kPeerArMaxBlocks.
int peer_allreduce_blocks(int64_t bytes);

// Progress of the measurement, 0..1: group `index` of `count`, one-shot then two-shot, size `i` of
// `n` (the single-process and the MPI measurement report alike).
double peer_allreduce_progress(int index, int count, ArImpl impl, size_t i, size_t n);

// bf16 <-> float as the GPU converts (round to nearest even; NaN kept quiet).
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

// The start value of element i on `rank`: a small integer, so every partial sum is exact in bf16
// whatever order a kernel adds in (|sum| <= 8 x 8 = 64 < 256).
float peer_allreduce_input(int rank, int64_t i);
// What every rank must hold at element i after summing `ranks` inputs.
float peer_allreduce_expected(int ranks, int64_t i);
// Elements of `out` (bf16, count elements) that differ from the expected sum.
int64_t peer_allreduce_mismatches(const std::vector<uint16_t>& out, int ranks);

// A measured curve in the profile's format, the points ascending by size.
PeerAllReduceCurve peer_allreduce_curve(ArImpl impl, const std::vector<int>& gpus, std::vector<CurvePoint> points);

}  // namespace peerplan::profiler
