// GPU self-test of the MLA kernels (profiler/kernels/mla.hpp) against fp64 CPU references.
//
// Decode: the reference is the absorbed attention itself, per (row, head): scores = scale x q . c_t
// over the 576 dims of each cache row c_t, t < seq_len, softmax, out = sum_t p_t c_t[0, 512). Cache
// rows past every row's length are bf16 NaNs, so a kernel that reads or weighs a row it must not
// fails the case; outputs are poisoned first, so an unwritten one fails too.
// Cache write + rope: the reference normalises the latent (RMSNorm, eps 1e-6, weight in [0.5, 1.5])
// and rotates k_pe and every q_pe on interleaved pairs at the angle position x inv_freq rounded to
// fp32, as the engines' fp32 cos/sin caches take it. The written cache rows are read back (the rest
// of the cache is NaN, so a row written to the wrong place leaves its own row NaN) and the whole q
// buffer is compared (the latent part of q must be untouched).
#include "profiler/exec/self_test_mla.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/mla.hpp"

namespace peerplan::exec::selftest {

namespace {

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;
constexpr int R = kn::kMlaRow, L = kn::kMlaLatent;
constexpr double kTol = 1e-2;

bf16 nan_bf16() {
  __nv_bfloat16_raw raw;
  raw.x = 0xffff;  // what poisoned() writes
  return bf16(raw);
}

// ||got - ref|| / ||ref|| on host vectors (a NaN in got: not all written).
SelfTestResult compare_host(const std::string& kernel, const std::string& shape, const std::vector<bf16>& got,
                            const std::vector<double>& ref) {
  SelfTestResult r;
  r.kernel = kernel;
  r.shape = shape;
  r.tolerance = kTol;
  r.all_written = true;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = bf16_value(got[i]);
    if (std::isnan(g)) r.all_written = false;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  r.rel_error = r.all_written ? (den > 0 ? std::sqrt(num / den) : std::sqrt(num)) : INFINITY;
  return r;
}

// DeepSeek-V2-Lite's YaRN (config.json rope_scaling) and its softmax scale.
kn::MlaRope v2_lite_rope() { return kn::mla_yarn_rope(10000, 40, 4096, 32, 1, 0.707, 0.707); }
float v2_lite_scale() { return kn::mla_softmax_scale(128, 64, 40, 0.707); }

// ---- decode ----

struct DecodeShape {
  int heads;
  std::vector<int> lens, slot_of;  // slot_of empty: slot = row
  int max_ctx;
  int head_tile = 0;
  std::string what;
};

struct DecodeData {
  std::vector<bf16> q, cache;
  int64_t q_stride = 0;
  int slots = 0;
};

int slot_of_row(const DecodeShape& s, int b) { return s.slot_of.empty() ? b : s.slot_of[size_t(b)]; }

DecodeData make_decode(const DecodeShape& s, std::mt19937_64& rng) {
  DecodeData d;
  const int batch = int(s.lens.size());
  d.slots = 0;
  for (int b = 0; b < batch; ++b) d.slots = std::max(d.slots, slot_of_row(s, b) + 1);
  std::vector<int> used(size_t(d.slots), 0);  // rows of each slot some row attends to
  for (int b = 0; b < batch; ++b) used[size_t(slot_of_row(s, b))] = std::max(used[size_t(slot_of_row(s, b))], s.lens[size_t(b)]);
  d.cache.assign(size_t(d.slots) * s.max_ctx * R, nan_bf16());
  for (int sl = 0; sl < d.slots; ++sl) {
    const auto v = random_bf16(size_t(used[size_t(sl)]) * R, rng, -1.0, 1.0);
    std::copy(v.begin(), v.end(), d.cache.begin() + int64_t(sl) * s.max_ctx * R);
  }
  d.q_stride = int64_t(s.heads) * R + 64;  // q rows with a gap after the heads: the stride is honoured
  d.q = random_bf16(size_t(batch) * d.q_stride, rng, -1.0, 1.0);
  return d;
}

std::vector<double> decode_reference(const DecodeShape& s, const DecodeData& d, const std::vector<int>& lens, double scale) {
  const int batch = int(lens.size());
  std::vector<double> ref(size_t(batch) * s.heads * L, 0.0);
  std::vector<double> q(R), p;
  for (int b = 0; b < batch; ++b) {
    const int n = lens[size_t(b)];
    const bf16* rows = d.cache.data() + int64_t(slot_of_row(s, b)) * s.max_ctx * R;
    std::vector<double> c(size_t(n) * R);
    for (size_t i = 0; i < c.size(); ++i) c[i] = bf16_value(rows[i]);
    p.assign(size_t(n), 0.0);
    for (int h = 0; h < s.heads; ++h) {
      for (int j = 0; j < R; ++j) q[size_t(j)] = bf16_value(d.q[size_t(b * d.q_stride + int64_t(h) * R + j)]);
      double m = -INFINITY;
      for (int t = 0; t < n; ++t) {
        double acc = 0;
        const double* ct = &c[size_t(t) * R];
        for (int j = 0; j < R; ++j) acc += q[size_t(j)] * ct[j];
        p[size_t(t)] = acc * scale;
        m = std::max(m, p[size_t(t)]);
      }
      double sum = 0;
      for (auto& x : p) sum += (x = std::exp(x - m));
      double* o = &ref[(size_t(b) * s.heads + size_t(h)) * L];
      for (int t = 0; t < n; ++t) {
        const double w = p[size_t(t)] / sum;
        const double* ct = &c[size_t(t) * R];
        for (int j = 0; j < L; ++j) o[j] += w * ct[j];
      }
    }
  }
  return ref;
}

std::string decode_text(const DecodeShape& s, int sms, const std::vector<int>& lens) {
  const int batch = int(lens.size());
  std::string ls;
  if (batch <= 8) {
    for (int l : lens) ls += (ls.empty() ? "" : ",") + std::to_string(l);
  } else {
    ls = fmt::format("{}..{}", *std::min_element(lens.begin(), lens.end()), *std::max_element(lens.begin(), lens.end()));
  }
  return fmt::format("b={} heads={} tile={} cap={} splits={} lens={}{} ({})", batch, s.heads,
                     s.head_tile ? std::to_string(s.head_tile) : "auto", s.max_ctx,
                     kn::mla_decode_splits(batch, s.heads, s.max_ctx, sms, s.head_tile), ls, s.slot_of.empty() ? " no-slots" : "",
                     s.what);
}

kn::MlaDecode decode_args(const DecodeShape& s, const DecodeData& d, const gpu::DeviceBuffer& q,
                          const gpu::DeviceBuffer& cache, const gpu::DeviceBuffer& slots, const gpu::DeviceBuffer& lens,
                          gpu::DeviceBuffer& out, gpu::DeviceBuffer& ws) {
  kn::MlaDecode a;
  a.q = q.as<bf16>();
  a.q_row_stride = d.q_stride;
  a.cache = cache.as<bf16>();
  a.slots = s.slot_of.empty() ? nullptr : slots.as<int>();
  a.seq_lens = lens.as<int>();
  a.out = out.as<bf16>();
  a.workspace = ws.as<float>();
  a.batch = int(s.lens.size());
  a.heads = s.heads;
  a.max_ctx = s.max_ctx;
  a.scale = v2_lite_scale();
  a.head_tile = s.head_tile;
  return a;
}

void decode_case(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng, const DecodeShape& s) {
  const DecodeData d = make_decode(s, rng);
  const int batch = int(s.lens.size());
  auto dq = upload(dev, d.q), dc = upload(dev, d.cache), ds = upload_int(dev, s.slot_of), dl = upload_int(dev, s.lens);
  auto dout = poisoned(dev, size_t(batch) * s.heads * L);
  gpu::DeviceBuffer ws(dev, std::max<size_t>(256, kn::mla_decode_workspace_bytes(batch, s.heads, s.max_ctx, sms)));
  kn::mla_decode(decode_args(s, d, dq, dc, ds, dl, dout, ws), sms, nullptr);
  out.push_back(compare("mla_decode", decode_text(s, sms, s.lens), dout, decode_reference(s, d, s.lens, v2_lite_scale())));
}

// Captured once in a CUDA graph and replayed twice; then the rows' contexts grow on the device (the
// new rows are already in the cache) and the same graph, replayed, must attend to them: the split
// plan depends on the cache capacity only, each chunk is cut from the row's own length.
void decode_graph_case(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng, DecodeShape s,
                       const std::vector<int>& grown) {
  DecodeShape full = s;
  full.lens = grown;  // the cache holds the grown contexts' rows from the start
  const DecodeData d = make_decode(full, rng);
  const int batch = int(s.lens.size());
  auto dq = upload(dev, d.q), dc = upload(dev, d.cache), ds = upload_int(dev, s.slot_of), dl = upload_int(dev, s.lens);
  auto dout = poisoned(dev, size_t(batch) * s.heads * L);
  gpu::DeviceBuffer ws(dev, std::max<size_t>(256, kn::mla_decode_workspace_bytes(batch, s.heads, s.max_ctx, sms)));
  gpu::Stream stream(dev);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  kn::mla_decode(decode_args(s, d, dq, dc, ds, dl, dout, ws), sms, stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
  stream.synchronize();
  out.push_back(compare("mla_decode(CUDA graph)", decode_text(s, sms, s.lens), dout,
                        decode_reference(s, d, s.lens, v2_lite_scale())));
  CUDA_CHECK(cudaMemcpy(dl.get(), grown.data(), grown.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout.get(), 0xff, size_t(batch) * s.heads * L * 2));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  stream.synchronize();
  out.push_back(compare("mla_decode(CUDA graph, contexts grown)", decode_text(s, sms, grown), dout,
                        decode_reference(s, d, grown, v2_lite_scale())));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
}

// ---- cache write + rope ----

struct RopeShape {
  int tokens, heads, slots, max_ctx;
  bool yarn;
  int pos_lo, pos_hi;      // positions drawn from [pos_lo, pos_hi), distinct per slot
  bool one_sequence;       // positions pos_lo, pos_lo + 1, ... all in slot 0
  int64_t kv_offset = 0;   // kv row inside a fused projection row of kv_offset + 576 values
  bool with_q = true;
  std::string what;
  int q_head = kn::kMlaRow, q_pe = kn::kMlaLatent;  // prefill: 192-wide heads, q_pe at 128
  bool to_out = false;  // rotated q_pe into separate 576-wide absorbed rows (q_out) instead of in place
};

struct RopeData {
  std::vector<bf16> kv, q, w, qo;  // qo: the q_out rows (to_out), their latent part the GEMM's
  std::vector<int> pos, slot;
  std::vector<float> inv_freq;
  float mscale = 1.f;
  int64_t kv_stride = 0, q_stride = 0;
  std::vector<double> ref_rows, ref_q, ref_qo;  // [tokens][576] cache rows; the whole q (q_out) after rope
};

RopeData make_rope(const RopeShape& s, std::mt19937_64& rng) {
  RopeData d;
  d.kv_stride = s.kv_offset + R;
  d.q_stride = int64_t(s.heads) * s.q_head;
  d.kv = random_bf16(size_t(s.tokens) * d.kv_stride, rng, -4.0, 4.0);
  d.q = random_bf16(size_t(s.tokens) * std::max<int64_t>(d.q_stride, 1), rng, -4.0, 4.0);
  d.w = random_bf16(L, rng, 0.5, 1.5);
  if (s.yarn) {
    const kn::MlaRope r = v2_lite_rope();
    d.inv_freq = r.inv_freq;
    d.mscale = r.mscale;
  } else {
    for (int i = 0; i < kn::kMlaRope / 2; ++i) d.inv_freq.push_back(float(std::pow(10000.0, -2.0 * i / kn::kMlaRope)));
  }
  std::vector<std::set<int>> taken(size_t(s.slots));
  std::uniform_int_distribution<int> upos(s.pos_lo, std::max(s.pos_lo, s.pos_hi - 1));
  for (int t = 0; t < s.tokens; ++t) {
    const int sl = s.one_sequence ? 0 : t % s.slots;
    int p = s.pos_lo + t;
    if (!s.one_sequence) do p = upos(rng); while (!taken[size_t(sl)].insert(p).second);
    d.pos.push_back(p);
    d.slot.push_back(sl);
  }
  auto angle = [&](int t, int i) { return double(float(d.pos[size_t(t)]) * d.inv_freq[size_t(i)]); };
  d.ref_rows.assign(size_t(s.tokens) * R, 0.0);
  for (int t = 0; t < s.tokens; ++t) {
    const bf16* x = d.kv.data() + t * d.kv_stride + s.kv_offset;
    double ss = 0;
    for (int j = 0; j < L; ++j) ss += bf16_value(x[j]) * bf16_value(x[j]);
    const double inv = 1.0 / std::sqrt(ss / L + 1e-6);
    double* o = &d.ref_rows[size_t(t) * R];
    for (int j = 0; j < L; ++j) o[j] = bf16_value(x[j]) * inv * bf16_value(d.w[size_t(j)]);
    for (int i = 0; i < kn::kMlaRope / 2; ++i) {
      const double c = std::cos(angle(t, i)) * d.mscale, sn = std::sin(angle(t, i)) * d.mscale;
      const double x0 = bf16_value(x[L + 2 * i]), x1 = bf16_value(x[L + 2 * i + 1]);
      o[L + 2 * i] = x0 * c - x1 * sn;
      o[L + 2 * i + 1] = x1 * c + x0 * sn;
    }
  }
  d.ref_q.resize(d.q.size());
  for (size_t i = 0; i < d.q.size(); ++i) d.ref_q[i] = bf16_value(d.q[i]);
  if (s.to_out) {
    d.qo = random_bf16(size_t(s.tokens) * s.heads * R, rng, -4.0, 4.0);
    d.ref_qo.resize(d.qo.size());
    for (size_t i = 0; i < d.qo.size(); ++i) d.ref_qo[i] = bf16_value(d.qo[i]);
  }
  for (int t = 0; t < s.tokens && s.with_q; ++t)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < kn::kMlaRope / 2; ++i) {
        const double* e = &d.ref_q[size_t(t * d.q_stride + int64_t(h) * s.q_head + s.q_pe + 2 * i)];
        double* o = s.to_out ? &d.ref_qo[size_t((int64_t(t) * s.heads + h) * R + L + 2 * i)]
                             : &d.ref_q[size_t(t * d.q_stride + int64_t(h) * s.q_head + s.q_pe + 2 * i)];
        const double c = std::cos(angle(t, i)) * d.mscale, sn = std::sin(angle(t, i)) * d.mscale;
        const double x0 = e[0], x1 = e[1];
        o[0] = x0 * c - x1 * sn;
        o[1] = x1 * c + x0 * sn;
      }
  return d;
}

struct RopeDevice {
  gpu::DeviceBuffer kv, q, w, pos, slot, freq, cache, qo;
};

RopeDevice upload_rope(int dev, const RopeShape& s, const RopeData& d) {
  RopeDevice g;
  g.kv = upload(dev, d.kv);
  g.q = upload(dev, d.q);
  g.w = upload(dev, d.w);
  g.pos = upload_int(dev, d.pos);
  g.slot = upload_int(dev, d.slot);
  g.freq = gpu::DeviceBuffer(dev, d.inv_freq.size() * 4);
  CUDA_CHECK(cudaMemcpy(g.freq.get(), d.inv_freq.data(), d.inv_freq.size() * 4, cudaMemcpyHostToDevice));
  g.cache = poisoned(dev, size_t(s.slots) * s.max_ctx * R);
  if (s.to_out) g.qo = upload(dev, d.qo);
  return g;
}

kn::MlaRopeCache rope_args(const RopeShape& s, const RopeData& d, const RopeDevice& g) {
  kn::MlaRopeCache a;
  a.kv = g.kv.as<bf16>() + s.kv_offset;
  a.kv_row_stride = d.kv_stride;
  a.q = s.with_q ? g.q.as<bf16>() : nullptr;
  a.q_row_stride = d.q_stride;
  a.q_head_stride = s.q_head;
  a.q_pe_offset = s.q_pe;
  if (s.to_out) {
    a.q_out = g.qo.as<bf16>();
    a.q_out_row_stride = int64_t(s.heads) * R;
  }
  a.norm_weight = g.w.as<bf16>();
  a.positions = g.pos.as<int>();
  a.token_slot = g.slot.as<int>();
  a.cache = g.cache.as<bf16>();
  a.inv_freq = s.yarn ? g.freq.as<float>() : nullptr;  // plain rope: the kernel's own theta^(-2i/64)
  a.tokens = s.tokens;
  a.heads = s.heads;
  a.max_ctx = s.max_ctx;
  a.eps = 1e-6f;
  a.theta = 10000.f;
  a.rope_mscale = d.mscale;
  return a;
}

void check_rope(std::vector<SelfTestResult>& out, const std::string& kernel, const RopeShape& s, const RopeData& d,
                const RopeDevice& g) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<bf16> rows(size_t(s.tokens) * R);
  for (int t = 0; t < s.tokens; ++t)
    CUDA_CHECK(cudaMemcpy(rows.data() + size_t(t) * R,
                          g.cache.as<bf16>() + (int64_t(d.slot[size_t(t)]) * s.max_ctx + d.pos[size_t(t)]) * R, R * 2,
                          cudaMemcpyDeviceToHost));
  const auto [lo, hi] = std::minmax_element(d.pos.begin(), d.pos.end());
  const std::string shape = fmt::format("tokens={} heads={}x{} slots={} cap={} pos={}..{} {}{}({})", s.tokens, s.heads,
                                        s.q_head, s.slots, s.max_ctx, *lo, *hi, s.yarn ? "yarn " : "theta ",
                                        s.kv_offset ? fmt::format("kv at +{} ", s.kv_offset) : "", s.what);
  out.push_back(compare_host(kernel + " cache rows", shape, rows, d.ref_rows));
  std::vector<bf16> q(d.q.size());
  CUDA_CHECK(cudaMemcpy(q.data(), g.q.get(), q.size() * 2, cudaMemcpyDeviceToHost));
  out.push_back(compare_host(kernel + (s.to_out ? " q (source, untouched)" : " q"), shape, q, d.ref_q));
  if (s.to_out) {
    std::vector<bf16> qo(d.qo.size());
    CUDA_CHECK(cudaMemcpy(qo.data(), g.qo.get(), qo.size() * 2, cudaMemcpyDeviceToHost));
    out.push_back(compare_host(kernel + " q_out", shape, qo, d.ref_qo));
  }
}

void rope_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const RopeShape& s) {
  const RopeData d = make_rope(s, rng);
  RopeDevice g = upload_rope(dev, s, d);
  kn::mla_rope_and_cache(rope_args(s, d, g), nullptr);
  check_rope(out, "mla_rope_and_cache", s, d, g);
}

// Captured with the copy that restores q (the rope works in place), replayed twice.
void rope_graph_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const RopeShape& s) {
  const RopeData d = make_rope(s, rng);
  RopeDevice g = upload_rope(dev, s, d);
  gpu::DeviceBuffer pristine = upload(dev, d.q);
  gpu::Stream stream(dev);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(cudaMemcpyAsync(g.q.get(), pristine.get(), d.q.size() * 2, cudaMemcpyDeviceToDevice, stream));
  kn::mla_rope_and_cache(rope_args(s, d, g), stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
  stream.synchronize();
  check_rope(out, "mla_rope_and_cache(CUDA graph)", s, d, g);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
}

// The YaRN helpers against their closed forms for DeepSeek-V2-Lite (theta 1e4, factor 40, original
// 4096, beta 32 / 1, mscale = mscale_all_dim = 0.707): the correction range is [10, 23] (floor of
// 10.47, ceil of 22.5), so pairs 0..10 keep theta^(-2i/64), pairs 23..31 are divided by 40, the
// pairs between blend linearly; cos/sin factor 1; softmax scale 192^-0.5 (1 + 0.0707 ln 40)^2.
SelfTestResult yarn_host_check() {
  const kn::MlaRope r = v2_lite_rope();
  double err = std::abs(r.mscale - 1.0);
  for (int i = 0; i < 32; ++i) {
    const double ext = std::pow(10000.0, -2.0 * i / 64), ramp = std::clamp((i - 10.0) / 13.0, 0.0, 1.0);
    const double want = ext / 40 * ramp + ext * (1 - ramp);
    err = std::max(err, std::abs(r.inv_freq[size_t(i)] - want) / want);
  }
  const double m = 1 + 0.1 * 0.707 * std::log(40.0);
  err = std::max(err, std::abs(v2_lite_scale() - m * m / std::sqrt(192.0)) / (m * m / std::sqrt(192.0)));
  SelfTestResult res;
  res.kernel = "mla_yarn_rope + mla_softmax_scale (host)";
  res.shape = "DeepSeek-V2-Lite rope_scaling, max relative error";
  res.rel_error = err;
  res.tolerance = 1e-6;
  res.all_written = r.inv_freq.size() == 32;
  return res;
}

// ---- prefill (expanded K/V through prefill_attention at head_dim 192) ----

// Sequence s: qlen[s] new tokens, the last of its ctx[s]; latent cache slot slot_of[s]. The reference
// is MLA prefill itself: K = [k_nope | k_pe] (192), V = v (128), causal bottom-right, per head.
void prefill_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, int heads,
                  const std::vector<int>& qlen, const std::vector<int>& ctx, const std::vector<int>& slot_of,
                  const std::string& what) {
  constexpr int QK = kn::kMlaQkDim, KVB = kn::kMlaKvB, NOPE = kn::kMlaQkNope, VD = kn::kMlaVDim;
  const int nseq = int(qlen.size());
  std::vector<int> qstart{0}, cstart{0};
  for (int s = 0; s < nseq; ++s) {
    qstart.push_back(qstart.back() + qlen[size_t(s)]);
    cstart.push_back(cstart.back() + ctx[size_t(s)]);
  }
  const int total_q = qstart.back(), total_ctx = cstart.back();
  const int max_ctx = *std::max_element(ctx.begin(), ctx.end());
  const int max_q = *std::max_element(qlen.begin(), qlen.end());
  const int slots = *std::max_element(slot_of.begin(), slot_of.end()) + 1;
  const int64_t qstride = int64_t(heads) * QK, kvstride = int64_t(heads) * KVB + 32;  // a gap after the heads
  const auto q = random_bf16(size_t(total_q) * qstride, rng, -1.0, 1.0);
  const auto kvb = random_bf16(size_t(total_ctx) * kvstride, rng, -1.0, 1.0);
  const auto cache = random_bf16(size_t(slots) * max_ctx * R, rng, -1.0, 1.0);
  auto dq = upload(dev, q), dkvb = upload(dev, kvb), dc = upload(dev, cache);
  auto dslots = upload_int(dev, slot_of), dcs = upload_int(dev, cstart), dqs = upload_int(dev, qstart),
       dlens = upload_int(dev, ctx);
  // Zeros, not NaN: attention kernels may multiply a masked weight 0 by a row past the context, so
  // the scratch must hold finite values there (an engine zeroes it once when it allocates it). A
  // row the expansion fails to write stays zero and fails the comparison.
  const size_t scratch = size_t(nseq) * heads * max_ctx * QK;
  gpu::DeviceBuffer dk(dev, scratch * 2), dv(dev, scratch * 2);
  CUDA_CHECK(cudaMemset(dk.get(), 0, scratch * 2));
  CUDA_CHECK(cudaMemset(dv.get(), 0, scratch * 2));
  auto dout = poisoned(dev, size_t(total_q) * heads * QK);
  kn::MlaPrefillExpand e;
  e.kv_b = dkvb.as<bf16>();
  e.kv_b_row_stride = kvstride;
  e.cache = dc.as<bf16>();
  e.slots = dslots.as<int>();
  e.ctx_start = dcs.as<int>();
  e.k_out = dk.as<bf16>();
  e.v_out = dv.as<bf16>();
  e.total_ctx = total_ctx;
  e.num_seqs = nseq;
  e.heads = heads;
  e.max_ctx = max_ctx;
  e.cache_max_ctx = max_ctx;
  kn::mla_prefill_expand(e, nullptr);
  kn::PrefillAttention a;
  a.q = dq.as<bf16>();
  a.q_row_stride = qstride;
  a.k_cache = dk.as<bf16>();
  a.v_cache = dv.as<bf16>();
  a.q_start = dqs.as<int>();
  a.seq_lens = dlens.as<int>();
  a.out = dout.as<bf16>();
  a.num_seqs = nseq;
  a.max_q_len = max_q;
  a.heads = heads;
  a.kv_heads = heads;
  a.head_dim = QK;
  a.max_ctx = max_ctx;
  a.scale = v2_lite_scale();
  a.num_slots = nseq;
  kn::prefill_attention(a, nullptr);
  const std::string path = kn::prefill_attention_last_path();

  std::vector<double> ref(size_t(total_q) * heads * QK, 0.0);  // dims 128..191 of each head: 0
  const double scale = v2_lite_scale();
  for (int s = 0; s < nseq; ++s) {
    const int n = ctx[size_t(s)], first = n - qlen[size_t(s)];
    for (int h = 0; h < heads; ++h) {
      std::vector<double> K(size_t(n) * QK), V(size_t(n) * VD);
      for (int t = 0; t < n; ++t) {
        const bf16* row = kvb.data() + int64_t(cstart[size_t(s)] + t) * kvstride + int64_t(h) * KVB;
        const bf16* pe = cache.data() + (int64_t(slot_of[size_t(s)]) * max_ctx + t) * R + L;
        for (int j = 0; j < NOPE; ++j) K[size_t(t) * QK + j] = bf16_value(row[j]);
        for (int j = 0; j < kn::kMlaRope; ++j) K[size_t(t) * QK + NOPE + j] = bf16_value(pe[j]);
        for (int j = 0; j < VD; ++j) V[size_t(t) * VD + j] = bf16_value(row[NOPE + j]);
      }
      for (int i = 0; i < qlen[size_t(s)]; ++i) {
        const int tq = qstart[size_t(s)] + i, keys = first + i + 1;
        const bf16* qr = q.data() + int64_t(tq) * qstride + int64_t(h) * QK;
        std::vector<double> p(static_cast<size_t>(keys));
        double m = -INFINITY;
        for (int t = 0; t < keys; ++t) {
          double acc = 0;
          for (int j = 0; j < QK; ++j) acc += bf16_value(qr[j]) * K[size_t(t) * QK + j];
          m = std::max(m, p[size_t(t)] = acc * scale);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - m));
        double* o = &ref[(size_t(tq) * heads + size_t(h)) * QK];
        for (int t = 0; t < keys; ++t)
          for (int j = 0; j < VD; ++j) o[j] += p[size_t(t)] / sum * V[size_t(t) * VD + j];
      }
    }
  }
  std::string ls;
  for (int s = 0; s < nseq; ++s) ls += fmt::format("{}{}/{}", s ? "," : "", qlen[size_t(s)], ctx[size_t(s)]);
  out.push_back(compare("mla_prefill_expand + prefill_attention(D=192)",
                        fmt::format("heads={} q/ctx={} ({}; {})", heads, ls, what, path), dout, ref));
}

std::vector<int> iota_from(int n, int first) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace

void mla_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  out.push_back(yarn_host_check());

  std::fprintf(stderr, "self-test: %s\n", "MLA cache write + rope");
  rope_case(out, dev, rng, {5, 16, 4, 4096, false, 0, 4096, false, 0, true, "decode batch 5, plain rope"});
  rope_case(out, dev, rng, {37, 16, 1, 64, true, 0, 0, true, 1536, true, "prefill of 37, V2-Lite YaRN, fused row"});
  rope_case(out, dev, rng, {3, 128, 1, 163840, true, 150000, 163840, false, 0, true, "128 heads near 160k"});
  rope_case(out, dev, rng, {9, 16, 3, 512, true, 0, 512, false, 0, false, "no query"});
  rope_case(out, dev, rng, {21, 16, 1, 64, true, 7, 0, true, 0, true, "prefill q_b rows: 192-wide heads", 192, 128});
  rope_case(out, dev, rng,
            {6, 16, 2, 1024, true, 0, 1024, false, 0, true, "decode: q_b heads -> absorbed rows", 192, 128, true});
  rope_graph_case(out, dev, rng, {8, 16, 8, 2048, true, 0, 2048, false, 0, true, "decode batch 8"});

  std::fprintf(stderr, "self-test: %s\n", "MLA decode attention");
  const std::vector<int> mixed = {1, 17, 300, 1024, 33, 4097, 64, 2000};
  const std::vector<int> mixed_slots = {5, 0, 7, 2, 1, 3, 6, 4};
  const std::vector<DecodeShape> shapes = {
      {16, {1}, {}, 64, 0, "V2-Lite, context 1"},
      {16, {37}, {}, 64, 0, "V2-Lite, context 37"},
      {16, {1024}, {}, 1024, 0, "V2-Lite, context 1024"},
      {16, {9000}, {}, 9216, 0, "V2-Lite, context 9000: split-K"},
      {16, mixed, mixed_slots, 4200, 0, "V2-Lite batch 8, mixed"},
      {32, {1500}, {}, 2048, 0, "32 heads"},
      {32, {5, 700, 1300, 64}, {3, 1, 0, 2}, 1536, 16, "32 heads, tile 16"},
      {64, {2500, 90}, {1, 0}, 2560, 0, "64 heads"},
      {128, {1}, {}, 128, 0, "V3 / Kimi K2, context 1"},
      {128, {3000, 257}, {0, 1}, 3072, 0, "V3 / Kimi K2 heads"},
      {128, {1111, 40}, {1, 0}, 1200, 32, "128 heads, tile 32"},
      {128, {999, 3}, {0, 1}, 1024, 16, "128 heads, tile 16"},
      {8, {5000, 77}, {1, 0}, 5120, 0, "8 heads: V2-Lite at TP 2, a half-empty group"},
      {40, {700, 1}, {0, 1}, 768, 0, "40 heads: groups of 16, 16, 8"},
      {16, iota_from(37, 1), std::vector<int>(37, 2), 64, 0, "prefill of 37 as decode rows of one slot"},
      {16, std::vector<int>(160, 100), iota_from(160, 0), 128, 0, "batch 160: no split"},
  };
  for (const DecodeShape& s : shapes) decode_case(out, dev, sms, rng, s);
  decode_graph_case(out, dev, sms, rng, {16, {3, 200, 1500, 40}, {2, 0, 3, 1}, 4096, 0, "graph"},
                    {4, 260, 3900, 41});

  std::fprintf(stderr, "self-test: %s\n", "MLA prefill (expanded K/V, prefill attention at D=192)");
  prefill_case(out, dev, rng, 16, {37}, {37}, {0}, "V2-Lite prompt of 37");
  prefill_case(out, dev, rng, 16, {16, 64, 5}, {300, 64, 1000}, {2, 0, 1}, "V2-Lite chunks over cached contexts");
  prefill_case(out, dev, rng, 128, {24}, {200}, {0}, "V3 heads, a chunk");
}

}  // namespace peerplan::exec::selftest
