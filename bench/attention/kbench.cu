// Attention kernel bench + large-shape check against a naive fp32 GPU reference (see build.sh).
// Uses only the public API (profiler/kernels/attention.hpp), so it links against old or new kernels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/kernels/attention.hpp"

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;

#ifdef KBENCH_NO_CUDNN
// The bench links the kernel files alone (no cuDNN, no planner code): prefill runs the own kernel.
namespace peerplan::kernels {
bool prefill_attention_cudnn(const PrefillAttention&, cudaStream_t) { return false; }
std::string prefill_attention_last_path() { return "own kernel (bench: cuDNN not linked)"; }
#ifdef KBENCH_HAS_PATH
AttentionPath prefill_attention_path(bool kv_fp8) {
  AttentionPath p;
  p.kv_fp8 = kv_fp8;
  p.cudnn = false;
  p.no_cudnn_why = "the bench links no cuDNN";
  return p;
}
#endif
}  // namespace peerplan::kernels
#endif

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "CUDA %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__global__ void fill(bf16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed * 0x9E3779B9u ^ uint32_t(i >> 32) * 0x85EBCA6Bu;
    x ^= x >> 15; x *= 0x2C1B3C6Du; x ^= x >> 12; x *= 0x297A2D39u; x ^= x >> 15;
    p[i] = __float2bfloat16((x & 0xFFFFFF) / float(0x800000) - 1.0f);
  }
}

// Naive reference: one block per (row, head). Row r attends keys [0, n(r)) of cache slot slot(r).
// mode 0 (prefill, one sequence, ctx0 = 0): n = r + 1, slot 0. mode 1 (decode): n = lens[r], slot r.
__global__ void ref_kernel(int mode, const bf16* q, int64_t qstride, const bf16* k, const bf16* v, const int* lens,
                           int heads, int kvh, int D, int max_ctx, float scale, float* out) {
  extern __shared__ float sm[];
  const int r = blockIdx.x, h = blockIdx.y;
  const int n = mode == 0 ? r + 1 : lens[r];
  const int slot = mode == 0 ? 0 : r;
  const bf16* kp = k + (int64_t(slot) * kvh + h / (heads / kvh)) * max_ctx * D;
  const bf16* vp = v + (int64_t(slot) * kvh + h / (heads / kvh)) * max_ctx * D;
  float* qs = sm;
  float* s = sm + D;
  __shared__ float red[32];
  for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = __bfloat162float(q[int64_t(r) * qstride + int64_t(h) * D + d]);
  __syncthreads();
  float mx = -INFINITY;
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    float a = 0;
    for (int d = 0; d < D; ++d) a += qs[d] * __bfloat162float(kp[int64_t(t) * D + d]);
    s[t] = a * scale;
    mx = fmaxf(mx, s[t]);
  }
  for (int o = 16; o; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int i = 0; i < int(blockDim.x / 32); ++i) mx = fmaxf(mx, red[i]);
  __syncthreads();
  float l = 0;
  for (int t = threadIdx.x; t < n; t += blockDim.x) { s[t] = expf(s[t] - mx); l += s[t]; }
  for (int o = 16; o; o /= 2) l += __shfl_xor_sync(~0u, l, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = l;
  __syncthreads();
  l = 0;
  for (int i = 0; i < int(blockDim.x / 32); ++i) l += red[i];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float a = 0;
    for (int t = 0; t < n; ++t) a += s[t] * __bfloat162float(vp[int64_t(t) * D + d]);
    out[(int64_t(r) * heads + h) * D + d] = a / l;
  }
}

__global__ void rel_err(const bf16* got, const float* ref, size_t n, double* acc) {
  double a = 0, b = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    double g = __bfloat162float(got[i]), r = ref[i];
    if (isnan(g)) g = 1e30;
    a += (g - r) * (g - r);
    b += r * r;
  }
  atomicAdd(acc, a);
  atomicAdd(acc + 1, b);
}

static double check(const bf16* got, const float* ref, size_t n) {
  double* acc;
  CK(cudaMalloc(&acc, 16));
  CK(cudaMemset(acc, 0, 16));
  rel_err<<<264, 256>>>(got, ref, n, acc);
  double h[2];
  CK(cudaMemcpy(h, acc, 16, cudaMemcpyDeviceToHost));
  CK(cudaFree(acc));
  return std::sqrt(h[0] / h[1]);
}

template <class F>
static double time_us(F&& launch, int iters = 30) {
  launch();
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < 3; ++i) launch();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct HC { int heads, kvh, D; };

// "28:4:128,32:4:128" -> shapes (argv[2]): a new shape timed against an old one in one run.
static std::vector<HC> parse_shapes(const char* s) {
  std::vector<HC> v;
  while (s && *s) {
    HC c{};
    int n = 0;
    if (std::sscanf(s, "%d:%d:%d%n", &c.heads, &c.kvh, &c.D, &n) != 3 || c.kvh <= 0 || c.heads % c.kvh || c.D > 256 ||
        c.heads > 64 || c.heads * c.D > 64 * 128) {
      std::fprintf(stderr, "shapes: HEADS:KV:DIM[,...] with HEADS a multiple of KV, HEADS <= 64, DIM <= 256, "
                           "HEADS x DIM <= 8192\n");
      std::exit(2);
    }
    v.push_back(c);
    s += n;
    if (*s == ',') ++s;
  }
  return v;
}

// Random e4m3 codes with magnitudes 2^-2..2^1 (exponent field 5..8, never the NaN code): an FP8 cache.
__global__ void fill_fp8(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed * 0x9E3779B9u ^ uint32_t(i >> 32) * 0x85EBCA6Bu;
    x ^= x >> 15; x *= 0x2C1B3C6Du; x ^= x >> 12; x *= 0x297A2D39u; x ^= x >> 15;
    p[i] = uint8_t((x & 0x80u) | ((5u + ((x >> 8) & 3u)) << 3) | ((x >> 12) & 7u));
  }
}

// `./kb table [bf16|fp8|all]` (issue 23): decode at head_dim 256 and 192 against the 128 tile at equal KV
// bytes per token (a 256 shape with K kv heads against 128 with 2K, 192 with K against 128 with 1.5K;
// same query heads per kv head G, so the same Q and output bytes too), G 4, 8, 16, batch 1, 4, 8, 32, 64,
// context 1k..32k (one sequence length = the cache capacity). Columns: both times (median of 30
// launches), both TB/s (K+V bytes read / time), ratio = wide time / 128 time (issue 23 item 4: <= 1.10),
// and at batch 1 and 4, ctx 1024, bf16, the wide kernel's relative error against the fp32 reference.
static int table_main(const char* which) {
  const bool do_bf16 = !which || !std::strcmp(which, "bf16") || !std::strcmp(which, "all");
  const bool do_fp8 = which && (!std::strcmp(which, "fp8") || !std::strcmp(which, "all"));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int batches[] = {1, 4, 8, 32, 64};
  const int ctxs[] = {1024, 2048, 4096, 8192, 16384, 32768};
  struct Pair { int wide_heads, wide_kv, wide_d, ref_heads, ref_kv; };
  const Pair pairs[] = {{16, 4, 256, 32, 8}, {32, 4, 256, 64, 8}, {32, 2, 256, 64, 4},
                        {16, 4, 192, 24, 6}, {32, 4, 192, 48, 6}, {32, 2, 192, 48, 3}};
  const size_t kv_elems = size_t(64) * 32768 * 1024;  // the largest shape: batch 64 x 32k x 1024 (kv x dim)
  void *k, *v;
  bf16 *q, *out;
  float *ref, *ws;
  int* lens;
  CK(cudaMalloc(&k, kv_elems * 2));
  CK(cudaMalloc(&v, kv_elems * 2));
  const size_t q_elems = size_t(64) * 64 * 256 * 2;
  CK(cudaMalloc(&q, q_elems * 2));
  CK(cudaMalloc(&out, q_elems * 2));
  CK(cudaMalloc(&ref, q_elems * 4));
  const size_t ws_bytes = size_t(256) << 20;
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMalloc(&lens, 64 * 4));
  fill<<<4096, 256>>>(q, q_elems, 3);
  std::printf("== table: decode, wide head_dim vs the 128 tile at equal KV bytes per token (SMs %d)\n", sms);
  std::printf("%-5s %-4s %-3s %-12s %-12s %4s %6s %9s %9s %7s %7s %6s %s\n", "kv", "D", "G", "wide", "ref128", "b", "ctx",
              "wide_us", "ref_us", "wTB/s", "rTB/s", "ratio", "");
  for (int fp8 = 0; fp8 < 2; ++fp8) {
    if ((fp8 && !do_fp8) || (!fp8 && !do_bf16)) continue;
    if (fp8) {
      fill_fp8<<<4096, 256>>>(static_cast<uint8_t*>(k), kv_elems, 1);
      fill_fp8<<<4096, 256>>>(static_cast<uint8_t*>(v), kv_elems, 2);
    } else {
      fill<<<4096, 256>>>(static_cast<bf16*>(k), kv_elems, 1);
      fill<<<4096, 256>>>(static_cast<bf16*>(v), kv_elems, 2);
    }
    CK(cudaDeviceSynchronize());
    double worst = 0;
    for (const Pair& pr : pairs) {
      for (int b : batches) {
        for (int ctx : ctxs) {
          std::vector<int> hl(size_t(b), ctx);
          CK(cudaMemcpy(lens, hl.data(), 4 * b, cudaMemcpyHostToDevice));
          double us[2];
          double err = -1;
          for (int side = 0; side < 2; ++side) {
            const int heads = side ? pr.ref_heads : pr.wide_heads, kvh = side ? pr.ref_kv : pr.wide_kv;
            const int D = side ? 128 : pr.wide_d;
            kn::DecodeAttention a;
            a.q = q; a.q_row_stride = int64_t(heads + 2 * kvh) * D;
            if (fp8) {
              a.k_cache_fp8 = static_cast<const uint8_t*>(k), a.v_cache_fp8 = static_cast<const uint8_t*>(v);
              a.k_scale = 0.5f, a.v_scale = 0.5f;
            } else {
              a.k_cache = static_cast<const bf16*>(k), a.v_cache = static_cast<const bf16*>(v);
            }
            a.seq_lens = lens; a.out = out; a.workspace = ws;
            a.batch = b; a.heads = heads; a.kv_heads = kvh; a.head_dim = D; a.max_ctx = ctx;
            if (kn::decode_attention_workspace_bytes(b, heads, D, ctx, kvh, sms) > ws_bytes) {
              std::fprintf(stderr, "workspace too small for %d:%d:%d b%d ctx%d\n", heads, kvh, D, b, ctx);
              return 1;
            }
            us[side] = time_us([&] { kn::decode_attention(a, sms, nullptr); });
            if (side == 0 && !fp8 && ctx == 1024 && b <= 4) {
              ref_kernel<<<dim3(b, heads), 128, (D + ctx) * 4>>>(1, q, a.q_row_stride, static_cast<const bf16*>(k),
                                                                static_cast<const bf16*>(v), lens, heads, kvh, D, ctx,
                                                                1.0f / std::sqrt(float(D)), ref);
              CK(cudaDeviceSynchronize());
              kn::decode_attention(a, sms, nullptr);
              err = check(out, ref, size_t(b) * heads * D);
            }
          }
          const double bytes = double(b) * ctx * pr.wide_kv * pr.wide_d * 2 * (fp8 ? 1 : 2);
          const double ratio = us[0] / us[1];
          worst = std::max(worst, ratio);
          char wide[32], rf[32], e[48] = "";
          std::snprintf(wide, sizeof wide, "%d:%d:%d", pr.wide_heads, pr.wide_kv, pr.wide_d);
          std::snprintf(rf, sizeof rf, "%d:%d:128", pr.ref_heads, pr.ref_kv);
          if (err >= 0) std::snprintf(e, sizeof e, "err=%.4f", err);
          std::printf("%-5s %-4d %-3d %-12s %-12s %4d %6d %9.1f %9.1f %7.2f %7.2f %6.2f%s %s\n", fp8 ? "fp8" : "bf16",
                      pr.wide_d, pr.wide_heads / pr.wide_kv, wide, rf, b, ctx, us[0], us[1], bytes / (us[0] * 1e-6) / 1e12,
                      bytes / (us[1] * 1e-6) / 1e12, ratio, ratio > 1.10 ? " >1.10" : "", e);
        }
      }
    }
    std::printf("== %s: worst ratio %.2f (issue 23 item 4: <= 1.10)\n", fp8 ? "fp8" : "bf16", worst);
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* tag = argc > 1 ? argv[1] : "?";
  if (!std::strcmp(tag, "table")) return table_main(argc > 2 ? argv[2] : "all");
  const std::vector<HC> only = parse_shapes(argc > 2 ? argv[2] : nullptr);
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t kv_elems = size_t(1) << 29;  // 1 GiB of bf16 each for K and V
  bf16 *k, *v, *q, *out;
  float *ref, *ws;
  int *lens, *qstart;
  CK(cudaMalloc(&k, kv_elems * 2));
  CK(cudaMalloc(&v, kv_elems * 2));
  const size_t q_elems = size_t(8192) * 64 * 128;
  CK(cudaMalloc(&q, q_elems * 2));
  CK(cudaMalloc(&out, q_elems * 2));
  CK(cudaMalloc(&ref, q_elems * 4));
  CK(cudaMalloc(&ws, size_t(256) << 20));
  CK(cudaMalloc(&lens, 4096 * 4));
  CK(cudaMalloc(&qstart, 8));
  fill<<<1024, 256>>>(k, kv_elems, 1);
  fill<<<1024, 256>>>(v, kv_elems, 2);
  fill<<<1024, 256>>>(q, q_elems, 3);
  CK(cudaDeviceSynchronize());
  const std::vector<HC> pre_shapes = only.empty() ? std::vector<HC>{{32, 8, 128}, {64, 8, 128}, {32, 8, 64}} : only;
  const std::vector<HC> dec_shapes = only.empty() ? std::vector<HC>{{32, 8, 128}, {64, 8, 128}, {32, 4, 128}} : only;
  std::printf("== %s (SMs %d)\n", tag, sms);
  std::printf("%-8s %-10s %6s %6s %4s %6s %10s %10s %9s\n", "tag", "kind", "heads", "kv", "D", "b/L", "ctx(cap)", "us",
              "TB/s|TF");
  // Prefill, one sequence, context = q_len (the profiler's shapes).
  for (HC c : pre_shapes) {
#ifdef KBENCH_HAS_PATH
    if (kn::attention_head_dim_needs_cudnn(c.D)) continue;  // prefill on cuDNN only: not linked here
#endif
    for (int L : {512, 2048, 8192}) {
      int hl[2] = {0, L};
      CK(cudaMemcpy(qstart, hl, 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(lens, &L, 4, cudaMemcpyHostToDevice));
      kn::PrefillAttention a;
      a.q = q; a.q_row_stride = int64_t(c.heads) * c.D; a.k_cache = k; a.v_cache = v;
      a.q_start = qstart; a.seq_lens = lens; a.out = out; a.num_seqs = 1; a.max_q_len = L;
      a.heads = c.heads; a.kv_heads = c.kvh; a.head_dim = c.D; a.max_ctx = L;
      double us = time_us([&] { kn::prefill_attention(a, nullptr); });
      double tf = 4.0 * double(L) * L / 2 * c.heads * c.D / (us * 1e-6) / 1e12;
      std::string err = "";
      if (L == 2048) {
        ref_kernel<<<dim3(L, c.heads), 128, (c.D + L) * 4>>>(0, q, a.q_row_stride, k, v, lens, c.heads, c.kvh, c.D, L,
                                                             1.0f / std::sqrt(float(c.D)), ref);
        CK(cudaDeviceSynchronize());
        kn::prefill_attention(a, nullptr);
        err = " err=" + std::to_string(check(out, ref, size_t(L) * c.heads * c.D));
      }
      std::printf("%-8s %-10s %6d %6d %4d %6d %10d %10.1f %9.1f%s\n", tag, "prefill", c.heads, c.kvh, c.D, L, L, us, tf,
                  err.c_str());
    }
  }
  // Decode: cap = ctx (the profiler) and cap = 2064 (the executor's bench-steps capacity for ctx 1024).
  for (HC c : dec_shapes) {
    for (int b : {1, 8, 32, 64, 128}) {
      for (int ctx : {1024, 4096}) {
        for (int cap : {ctx, 2064}) {
          if (cap < ctx || (cap != ctx && ctx != 1024)) continue;
          if (size_t(b) * c.kvh * cap * c.D > kv_elems) continue;
          std::vector<int> hl(size_t(b), ctx);
          CK(cudaMemcpy(lens, hl.data(), 4 * b, cudaMemcpyHostToDevice));
          kn::DecodeAttention a;
          a.q = q; a.q_row_stride = int64_t(c.heads + 2 * c.kvh) * c.D; a.k_cache = k; a.v_cache = v;
          a.seq_lens = lens; a.out = out; a.workspace = ws;
          a.batch = b; a.heads = c.heads; a.kv_heads = c.kvh; a.head_dim = c.D; a.max_ctx = cap;
          if (kn::decode_attention_workspace_bytes(b, c.heads, c.D, cap, c.kvh, sms) > (size_t(256) << 20)) continue;
          double us = time_us([&] { kn::decode_attention(a, sms, nullptr); });
          double tbs = double(b) * ctx * c.kvh * c.D * 4 / (us * 1e-6) / 1e12;
          std::string err = "";
          if ((b == 64 || b == 1) && cap == ctx) {
            ref_kernel<<<dim3(b, c.heads), 128, (c.D + ctx) * 4>>>(1, q, a.q_row_stride, k, v, lens, c.heads, c.kvh,
                                                                   c.D, cap, 1.0f / std::sqrt(float(c.D)), ref);
            CK(cudaDeviceSynchronize());
            kn::decode_attention(a, sms, nullptr);
            err = " err=" + std::to_string(check(out, ref, size_t(b) * c.heads * c.D));
          }
          std::printf("%-8s %-10s %6d %6d %4d %6d %5d(%4d) %10.1f %9.2f%s\n", tag, "decode", c.heads, c.kvh, c.D, b, ctx,
                      cap, us, tbs, err.c_str());
        }
      }
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
