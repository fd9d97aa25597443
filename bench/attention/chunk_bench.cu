// Long-context attention bench (issue 18): prefill chunks over a cached context through
// kernels::prefill_attention with each backend (own kernel, cuDNN), the shapes of
// .gpu-ref/torch_attn_ref.py (32 query / 8 kv heads, head_dim 128, bf16, causal aligned
// bottom-right); checks against a naive fp32 GPU reference (packed sequences, cache slots, sliding
// window); decode at 32k-128k contexts with the HBM bandwidth it reaches. Build: chunk_build.sh.
// Run: ./cb OUT.jsonl [SECTION]   (prints a table, appends the figures as JSON lines)
// SECTION: dense (no slot table: cuDNN's plain layout; and the own kernel's timings), slots (a slot
// table: cuDNN through its paged, or with PEERPLAN_CUDNN_KV=ragged its ragged-offset, KV; packed
// sequences), window, decode, probe (one small slot-table call, for compute-sanitizer), or all (default). One process per section lets a run go on when one
// path faults (an illegal address ends the CUDA context).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/gpu/cudnn_attention.hpp"
#include "profiler/kernels/attention.hpp"

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;
namespace pg = peerplan::gpu;

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "CUDA %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__global__ void fill(bf16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed * 0x9E3779B9u ^ uint32_t(i >> 32) * 0x85EBCA6Bu;
    x ^= x >> 15; x *= 0x2C1B3C6Du; x ^= x >> 12; x *= 0x297A2D39u; x ^= x >> 15;
    p[i] = __float2bfloat16((x & 0xFFFFFF) / float(0x800000) - 1.0f);
  }
}

// Naive reference: one block per (row, head); row r reads cache slot slot[r], keys [lo[r], hi[r]).
__global__ void ref_kernel(const bf16* q, int64_t qstride, const bf16* k, const bf16* v, const int* slot,
                           const int* lo, const int* hi, int heads, int kvh, int D, int max_ctx, float scale,
                           float* out) {
  extern __shared__ float sm[];
  const int r = blockIdx.x, h = blockIdx.y;
  const int a0 = lo[r], n = hi[r];
  const bf16* kp = k + (int64_t(slot[r]) * kvh + h / (heads / kvh)) * max_ctx * D;
  const bf16* vp = v + (int64_t(slot[r]) * kvh + h / (heads / kvh)) * max_ctx * D;
  float* qs = sm;
  float* s = sm + D;
  __shared__ float red[32];
  for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = __bfloat162float(q[int64_t(r) * qstride + int64_t(h) * D + d]);
  __syncthreads();
  float mx = -INFINITY;
  for (int t = a0 + threadIdx.x; t < n; t += blockDim.x) {
    float a = 0;
    for (int d = 0; d < D; ++d) a += qs[d] * __bfloat162float(kp[int64_t(t) * D + d]);
    s[t - a0] = a * scale;
    mx = fmaxf(mx, s[t - a0]);
  }
  for (int o = 16; o; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int i = 0; i < int(blockDim.x / 32); ++i) mx = fmaxf(mx, red[i]);
  __syncthreads();
  float l = 0;
  for (int t = threadIdx.x; t < n - a0; t += blockDim.x) { s[t] = expf(s[t] - mx); l += s[t]; }
  for (int o = 16; o; o /= 2) l += __shfl_xor_sync(~0u, l, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = l;
  __syncthreads();
  l = 0;
  for (int i = 0; i < int(blockDim.x / 32); ++i) l += red[i];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float a = 0;
    for (int t = 0; t < n - a0; ++t) a += s[t] * __bfloat162float(vp[int64_t(t + a0) * D + d]);
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
static double time_ms(F&& launch, int iters = 20) {
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
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static int* upload(const std::vector<int>& h) {
  int* d;
  CK(cudaMalloc(&d, sizeof(int) * std::max<size_t>(1, h.size())));
  CK(cudaMemcpy(d, h.data(), sizeof(int) * h.size(), cudaMemcpyHostToDevice));
  return d;
}

struct Bufs {
  bf16 *k, *v, *q, *out;
  float* ref;
  size_t kv_elems, q_elems;
};

static FILE* jout = nullptr;

// One prefill call: packed sequences (qlen, ctx, slot), the cache holding max_ctx per slot.
struct Call {
  std::vector<int> qlen, ctx, slot;  // slot empty: none (slot = index)
  int max_ctx, window = 0;
};

static double run_call(Bufs& B, const Call& c, const char* backend, bool verify, double* err_out) {
  const int H = 32, KV = 8, D = 128;
  const int64_t qstride = int64_t(H + 2 * KV) * D;  // Q inside fused QKV rows, as the executor
  std::vector<int> qs{0};
  for (int l : c.qlen) qs.push_back(qs.back() + l);
  int* dqs = upload(qs);
  int* dlen = upload(c.ctx);
  int* dslot = c.slot.empty() ? nullptr : upload(c.slot);
  const int nseq = int(c.qlen.size());
  const int maxq = *std::max_element(c.qlen.begin(), c.qlen.end());
  auto launch = [&] {
    if (c.window > 0) {
      pg::CudnnPrefill p;
      p.q = B.q; p.q_row_stride = qstride; p.k_cache = B.k; p.v_cache = B.v; p.slots = dslot; p.q_start = dqs;
      p.seq_lens = dlen; p.out = B.out; p.num_seqs = nseq; p.max_q_len = maxq; p.heads = H; p.kv_heads = KV;
      p.head_dim = D; p.max_ctx = c.max_ctx; p.window = c.window;
      std::string why;
      if (!pg::cudnn_prefill_attention(p, nullptr, &why)) {
        std::fprintf(stderr, "window: %s\n", why.c_str());
        std::exit(3);
      }
      return;
    }
    kn::PrefillAttention a;
    a.q = B.q; a.q_row_stride = qstride; a.k_cache = B.k; a.v_cache = B.v; a.slots = dslot; a.q_start = dqs;
    a.seq_lens = dlen; a.out = B.out; a.num_seqs = nseq; a.max_q_len = maxq; a.heads = H; a.kv_heads = KV;
    a.head_dim = D; a.max_ctx = c.max_ctx;
    kn::prefill_attention(a, nullptr);
  };
  pg::set_prefill_backend(std::string(backend) == "own" ? pg::PrefillBackend::Own : pg::PrefillBackend::Auto);
  double ms = time_ms(launch);
  *err_out = -1;
  if (verify) {
    std::vector<int> rs, rlo, rhi;
    for (int s = 0; s < nseq; ++s)
      for (int i = 0; i < c.qlen[s]; ++i) {
        int pos = c.ctx[s] - c.qlen[s] + i;
        rs.push_back(c.slot.empty() ? s : c.slot[s]);
        rhi.push_back(pos + 1);
        rlo.push_back(c.window > 0 ? std::max(0, pos - c.window + 1) : 0);
      }
    int *ds = upload(rs), *dlo = upload(rlo), *dhi = upload(rhi);
    int longest = 0;
    for (size_t i = 0; i < rhi.size(); ++i) longest = std::max(longest, rhi[i] - rlo[i]);
    ref_kernel<<<dim3(unsigned(rs.size()), H), 128, size_t(D + longest) * 4>>>(
        B.q, qstride, B.k, B.v, ds, dlo, dhi, H, KV, D, c.max_ctx, 1.0f / std::sqrt(float(D)), B.ref);
    CK(cudaGetLastError());
    CK(cudaMemset(B.out, 0xff, rs.size() * H * D * 2));
    launch();
    CK(cudaDeviceSynchronize());
    *err_out = check(B.out, B.ref, rs.size() * H * D);
    CK(cudaFree(ds)); CK(cudaFree(dlo)); CK(cudaFree(dhi));
  }
  CK(cudaFree(dqs)); CK(cudaFree(dlen));
  if (dslot) CK(cudaFree(dslot));
  return ms;
}

int main(int argc, char** argv) {
  jout = std::fopen(argc > 1 ? argv[1] : "chunk_bench.jsonl", "a");
  if (!std::getenv("PEERPLAN_PREFILL_ATTENTION")) setenv("PEERPLAN_PREFILL_ATTENTION", "auto", 0);
  const std::string section = argc > 2 ? argv[2] : "all";
  auto want = [&](const char* s) { return section == s || (section == "all" && std::string(s) != "probe"); };
  Bufs B;
  B.kv_elems = size_t(1) << 31;  // 4 GiB of bf16 each for K and V
  B.q_elems = size_t(8192) * 48 * 128;
  CK(cudaMalloc(&B.k, B.kv_elems * 2));
  CK(cudaMalloc(&B.v, B.kv_elems * 2));
  CK(cudaMalloc(&B.q, B.q_elems * 2));
  CK(cudaMalloc(&B.out, size_t(8192) * 32 * 128 * 2));
  CK(cudaMalloc(&B.ref, size_t(8192) * 32 * 128 * 4));
  fill<<<2048, 256>>>(B.k, B.kv_elems, 1);
  fill<<<2048, 256>>>(B.v, B.kv_elems, 2);
  fill<<<1024, 256>>>(B.q, B.q_elems, 3);
  CK(cudaDeviceSynchronize());
  const std::string dnn = pg::cudnn_description();
  std::printf("cuDNN: %s\n", dnn.empty() ? pg::cudnn_load_error().c_str() : dnn.c_str());
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // 1. Correctness: packed sequences with slots (ragged + paged in cuDNN), chunks over a context.
  struct V { const char* name; Call c; const char* section; };
  std::vector<V> all_checks = {
      {"causal 2048 no-slots", {{2048}, {2048}, {}, 2048}, "dense"},
      {"chunk 1024/4096 no-slots", {{1024}, {4096}, {}, 4096}, "dense"},
      {"packed 2 no-slots", {{700, 2048}, {3000, 2048}, {}, 4096}, "dense"},
      {"causal 2048", {{2048}, {2048}, {0}, 2048}, "slots"},
      {"probe causal 512 slots", {{512}, {512}, {0}, 512}, "probe"},
      {"chunk 1024/4096", {{1024}, {4096}, {1}, 4096}, "slots"},
      {"packed 3 seqs slots", {{300, 1, 129}, {1000, 1, 129}, {2, 0, 1}, 1100}, "slots"},
      {"packed 2 seqs chunk", {{700, 2048}, {3000, 2048}, {1, 0}, 4096}, "slots"},
      {"window 4096 over 12288", {{2048}, {12288}, {0}, 12288, 4096}, "window"},
  };
  std::vector<V> checks;
  for (auto& v : all_checks)
    if (want(v.section)) checks.push_back(v);
  std::printf("%-28s %-6s %10s %12s  %s\n", "check", "path", "ms", "rel_err", "result");
  for (auto& v : checks)
    for (const char* be : {"own", "auto"}) {
      if (section == "probe" && std::string(be) == "own") continue;
      if (v.c.window > 0 && std::string(be) == "own") continue;  // the own kernel has no window
      double err = 0;
      double ms = run_call(B, v.c, be, true, &err);
      std::string path = std::string(be) == "own" ? "own" : kn::prefill_attention_last_path().substr(0, 5);
      if (v.c.window > 0) path = "cudnn";
      const bool ok = err >= 0 && err < 2e-2;
      std::printf("%-28s %-6s %10.3f %12.2e  %s\n", v.name, path.c_str(), ms, err, ok ? "PASS" : "FAIL");
      if (!ok && path != "own" && std::string(be) == "auto") std::printf("   path: %s\n", kn::prefill_attention_last_path().c_str());
      std::fprintf(jout, "{\"check\":\"%s\",\"path\":\"%s\",\"ms\":%.4f,\"rel_err\":%.3e,\"pass\":%s}\n", v.name,
                   path.c_str(), ms, err, ok ? "true" : "false");
    }

  // 2. The reference's shapes: one sequence, slot table given (the executor's call) and not.
  std::printf("\n%-8s %-8s %-12s %10s %9s\n", "q_len", "ctx", "path", "ms", "TFLOP/s");
  const int shapes[][2] = {{2048, 2048}, {8192, 8192}, {8192, 16384}, {8192, 24576}, {1024, 17408}, {4096, 32768},
                           {512, 65536}, {2048, 131072}};
  for (auto& s : shapes) {
    const int q = s[0], ctx = s[1];
    const double flops = 4.0 * 32 * 128 * q * (ctx - q / 2.0);
    for (int form = 0; form < 3; ++form) {
      if (!want(form == 2 ? "slots" : "dense")) continue;
      Call c{{q}, {ctx}, form == 1 ? std::vector<int>{} : std::vector<int>{0}, ctx};
      const char* be = form == 0 ? "own" : "auto";
      if (form == 0 && ctx > 32768) continue;
      double err = 0;
      double ms = run_call(B, c, be, false, &err);
      std::string path = form == 0 ? "own" : (form == 1 ? "cudnn-dense" : "cudnn-paged");
      if (form > 0 && kn::prefill_attention_last_path().rfind("cudnn", 0) != 0) path = "FELLBACK";
      std::printf("%-8d %-8d %-12s %10.3f %9.1f\n", q, ctx, path.c_str(), ms, flops / ms / 1e9);
      std::fprintf(jout, "{\"q_len\":%d,\"ctx\":%d,\"path\":\"%s\",\"ms\":%.4f,\"tflops\":%.1f}\n", q, ctx, path.c_str(),
                   ms, flops / ms / 1e9);
      if (path == "FELLBACK") std::printf("   %s\n", kn::prefill_attention_last_path().c_str());
    }
  }
  if (want("window")) {  // sliding window 4096 (Mistral) against full causal, chunk 8192 over 32k.
    double err = 0;
    Call w{{8192}, {32768}, {0}, 32768, 4096};
    double ms = run_call(B, w, "auto", false, &err);
    const double flops = 4.0 * 32 * 128 * 8192 * 4096;
    std::printf("%-8d %-8d %-12s %10.3f %9.1f\n", 8192, 32768, "cudnn-win4k", ms, flops / ms / 1e9);
    std::fprintf(jout, "{\"q_len\":8192,\"ctx\":32768,\"path\":\"cudnn-window4096\",\"ms\":%.4f}\n", ms);
  }

  // 3. Decode at long context: bytes of K and V read per call over the time.
  std::printf("\n%-6s %-8s %10s %9s\n", "batch", "ctx", "us", "TB/s");
  float* ws;
  CK(cudaMalloc(&ws, size_t(512) << 20));
  const int dec[][2] = {{1, 32768}, {1, 65536}, {1, 131072}, {8, 32768}, {8, 131072}, {16, 131072}, {32, 65536},
                        {64, 32768}};
  for (auto& d : dec) {
    if (!want("decode")) break;
    const int b = d[0], ctx = d[1];
    std::vector<int> lens(size_t(b), ctx);
    int* dl = upload(lens);
    kn::DecodeAttention a;
    a.q = B.q; a.q_row_stride = 48 * 128; a.k_cache = B.k; a.v_cache = B.v; a.seq_lens = dl; a.out = B.out;
    a.workspace = ws; a.batch = b; a.heads = 32; a.kv_heads = 8; a.head_dim = 128; a.max_ctx = ctx;
    if (kn::decode_attention_workspace_bytes(b, 32, 128, ctx, 8, sms) > (size_t(512) << 20)) {
      std::printf("%-6d %-8d workspace too large\n", b, ctx);
      continue;
    }
    double ms = time_ms([&] { kn::decode_attention(a, sms, nullptr); });
    double tbs = double(b) * ctx * 8 * 128 * 2 * 2 / (ms * 1e-3) / 1e12;
    std::printf("%-6d %-8d %10.1f %9.2f\n", b, ctx, ms * 1000, tbs);
    std::fprintf(jout, "{\"decode_batch\":%d,\"ctx\":%d,\"us\":%.1f,\"tbs\":%.3f}\n", b, ctx, ms * 1000, tbs);
    CK(cudaFree(dl));
  }
  std::fclose(jout);
  return 0;
}
