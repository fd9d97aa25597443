#include "profiler/common/elementwise_plan.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "profiler/common/attention_support.hpp"

namespace peerplan::profiler {

std::vector<ElementwiseShapeKey> elementwise_timing_keys(const std::set<ElementwiseShapeKey>& keys) {
  std::set<std::pair<std::string, int64_t>> seen;
  std::vector<ElementwiseShapeKey> out;
  for (const ElementwiseShapeKey& k : keys) {
    if (std::find(kElementwiseKinds.begin(), kElementwiseKinds.end(), k.kind) == kElementwiseKinds.end()) continue;
    if (k.cols <= 0 || !seen.insert({k.kind, k.cols}).second) continue;
    out.push_back(k);
  }
  return out;
}

ElementwiseCall elementwise_call(const ElementwiseShapeKey& k, int64_t rows) {
  ElementwiseCall c;
  c.rows = rows;
  c.cols = k.cols;
  const double r = double(rows), n = double(k.cols);
  if (k.kind == "rms_norm") {
    c.bytes = (2 * r * n + n) * 2;  // read x, write out, the weight
  } else if (k.kind == "add_rms_norm") {
    c.bytes = (4 * r * n + n) * 2;  // read x and the residual, write both, the weight
  } else if (k.kind == "residual") {
    c.bytes = 3 * r * n * 2;  // read a and b, write a
  } else if (k.kind == "qk_norm") {
    c.row_stride = (k.heads + 2 * k.kv_heads) * k.head_dim;
    c.bytes = (2 * r * n + 2 * double(k.head_dim)) * 2;  // q and k heads in place, two weights
  } else if (k.kind == "rotary") {
    c.row_stride = (k.heads + 2 * k.kv_heads) * k.head_dim;
    // q and k read and written in place, k and v written into the cache.
    c.bytes = r * (2 * double((k.heads + k.kv_heads) * k.head_dim) + 2 * double(k.kv_heads * k.head_dim)) * 2;
  } else if (k.kind == "mla_rotary") {
    // engine_mla.cpp run_mla_rotary: q rows of the q projection ([heads][nope + rope]); per token
    // the kv_a row (latent + k_pe) read, the cache row written, each head's q_pe read and written.
    const double row = kernels::kMlaSupportedLatent + kernels::kMlaSupportedRope;
    c.row_stride = k.heads * (kernels::kMlaSupportedNope + kernels::kMlaSupportedRope);
    c.bytes = (r * (2 * row + 2 * double(k.heads * k.head_dim)) + kernels::kMlaSupportedLatent) * 2;
  } else if (k.kind == "act") {
    // engine_ops.cpp: rows at least 1, cols in whole 8-element vectors (the kernel's).
    c.rows = std::max<int64_t>(1, rows);
    c.cols = std::max<int64_t>(8, k.cols) / 8 * 8;
    c.bytes = 3 * double(c.rows) * double(c.cols) * 2;  // gate and up read, out written
  } else if (k.kind == "moe_route") {
    c.bytes = r * n * 2 + r * double(k.topk) * 16;  // logits; weights, rows, sorted tokens
  } else if (k.kind == "moe_combine") {
    c.bytes = r * double(k.topk + 1) * n * 2;  // k routed rows read per token, one written
  }
  return c;
}

int elementwise_reps(const ElementwiseCall& c) {
  const double expect_s = c.bytes / 3e12 + 3e-6;
  return std::clamp(int(200e-6 / expect_s), 1, 64);
}

RotaryLayout rotary_layout(int64_t max_rows) {
  RotaryLayout l;
  l.slots = kEwDecodeRows;
  l.ctx = std::max<int64_t>(256, (max_rows + l.slots - 1) / l.slots);
  return l;
}

RotaryPlace rotary_place(int64_t t, int64_t rows, const RotaryLayout& l) {
  if (rows <= kEwDecodeRows) return {int(t), int(l.ctx - 1)};
  return {int(t / l.ctx), int(t % l.ctx)};
}

ElementwiseBuffers elementwise_buffers(const std::vector<ElementwiseShapeKey>& keys, const std::vector<int64_t>& rows) {
  ElementwiseBuffers b;
  for (int64_t r : rows) b.max_rows = std::max(b.max_rows, r);
  b.max_rows = std::max<int64_t>(1, b.max_rows);
  b.layout = rotary_layout(b.max_rows);
  const int64_t R = b.max_rows;
  for (const ElementwiseShapeKey& k : keys) {
    const ElementwiseCall c = elementwise_call(k, R);
    if (k.kind == "rms_norm" || k.kind == "residual" || k.kind == "add_rms_norm") {
      b.hidden = std::max(b.hidden, R * k.cols);
      b.z = std::max(b.z, R * k.cols);
      b.norm_w = std::max(b.norm_w, k.cols);
    } else if (k.kind == "qk_norm" || k.kind == "rotary") {
      b.qkv = std::max(b.qkv, R * c.row_stride);
      b.norm_w = std::max(b.norm_w, 2 * k.head_dim);
      if (k.kind == "rotary") b.cache = std::max(b.cache, b.layout.slots * k.kv_heads * b.layout.ctx * k.head_dim);
    } else if (k.kind == "mla_rotary") {
      const int64_t row = kernels::kMlaSupportedLatent + kernels::kMlaSupportedRope;
      b.y = std::max(b.y, R * row);  // the kv_a output, read from Y as the executor does
      b.qkv = std::max(b.qkv, R * c.row_stride);
      b.norm_w = std::max<int64_t>(b.norm_w, kernels::kMlaSupportedLatent);
      b.mla_q = std::max(b.mla_q, std::min(R, kEwDecodeRows) * k.heads * row);
      b.latent_cache = std::max(b.latent_cache, b.layout.slots * b.layout.ctx * row);
    } else if (k.kind == "act") {
      b.y = std::max(b.y, c.rows * 2 * c.cols);
      b.z = std::max(b.z, c.rows * c.cols);
    } else if (k.kind == "moe_route" || k.kind == "moe_combine") {
      b.max_topk = std::max(b.max_topk, int(k.topk));
      b.max_local_experts = std::max(b.max_local_experts, int(k.local_experts));
      b.logits = std::max(b.logits, R * k.experts);
      if (k.kind == "moe_combine") b.y = std::max(b.y, R * k.topk * k.cols), b.z = std::max(b.z, R * k.cols);
    }
  }
  return b;
}

double elementwise_est_seconds(size_t keys, size_t rows) { return 0.01 * double(keys * rows); }

}  // namespace peerplan::profiler
