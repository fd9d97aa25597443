#include "profiler/common/peer_allreduce_plan.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace peerplan::profiler {

std::vector<int64_t> peer_allreduce_sizes(int64_t min_bytes, int64_t max_bytes, int ranks) {
  std::vector<int64_t> v;
  const int64_t unit = 16 * int64_t(std::max(ranks, 1));
  const int64_t lo = std::max(min_bytes, kPeerArMinBytes), hi = std::min(max_bytes, kPeerArMaxBytes);
  for (int64_t b = kPeerArMinBytes; b <= kPeerArMaxBytes; b *= 2) {
    if (b < lo || b > hi) continue;
    const int64_t r = (b + unit - 1) / unit * unit;  // up to whole vectors per share
    if (v.empty() || r > v.back()) v.push_back(r);
  }
  return v;
}

std::vector<std::vector<int>> peer_allreduce_groups(const std::vector<std::vector<int>>& candidates,
                                                    const std::function<bool(int, int)>& usable) {
  std::vector<std::vector<int>> out;
  for (const auto& g : candidates) {
    if (g.size() < 2 || g.size() > size_t(kPeerArMaxRanks)) continue;
    bool ok = true;
    for (int a : g)
      for (int b : g) ok = ok && (a == b || usable(a, b));
    if (ok) out.push_back(g);
  }
  return out;
}

double peer_allreduce_progress(int index, int count, ArImpl impl, size_t i, size_t n) {
  return (double(index) + (impl == ArImpl::TwoShot ? 0.5 : 0.0) + 0.5 * double(i) / double(n)) / double(count);
}

int peer_allreduce_blocks(int64_t bytes) {
  const int64_t vectors = (bytes + 15) / 16;
  return int(std::clamp<int64_t>((vectors + kPeerArThreads - 1) / kPeerArThreads, 1, kPeerArMaxBlocks));
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float peer_allreduce_input(int rank, int64_t i) { return float(int((i * 7 + rank * 3) % 17) - 8); }

float peer_allreduce_expected(int ranks, int64_t i) {
  float s = 0;
  for (int r = 0; r < ranks; ++r) s += peer_allreduce_input(r, i);
  return s;
}

int64_t peer_allreduce_mismatches(const std::vector<uint16_t>& out, int ranks) {
  int64_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (bf16_to_float(out[i]) != peer_allreduce_expected(ranks, int64_t(i))) ++bad;
  return bad;
}

PeerAllReduceCurve peer_allreduce_curve(ArImpl impl, const std::vector<int>& gpus, std::vector<CurvePoint> points) {
  if (impl == ArImpl::Nccl) throw std::invalid_argument("peer_allreduce_curve: one_shot or two_shot");
  std::sort(points.begin(), points.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.bytes < b.bytes; });
  return {to_string(impl), gpus, std::move(points)};
}

}  // namespace peerplan::profiler
