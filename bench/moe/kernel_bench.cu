// Standalone check and timing of the routed-MoE kernels (profiler/kernels/moe_route.cu, moe_gemm.cu),
// without the rest of peerplan, for a GPU host where only nvcc is at hand (bench/moe/kernel_bench.sh
// builds and runs it). 1) correctness against CPU references: the routing (route_token's experts,
// renormalised softmax, offsets, sort, tile lists), every grouped-GEMM kernel, the combine; 2) the
// grouped expert GEMMs of Qwen1.5-MoE-A2.7B and Mixtral-8x7B at decode and prefill token counts:
// time per call (CUDA events over a CUDA graph of `reps` calls, weights rotating over layer copies
// that exceed L2, as a decode step reads each layer's experts cold), the touched experts' bytes
// per second against the measured device-to-device copy bandwidth, every kernel at small groups,
// and cuBLAS per touched expert (host-known sizes) at prefill sizes.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "planner/model/routing.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/moe_route.hpp"

namespace kn = peerplan::kernels;
using bf16 = __nv_bfloat16;

namespace {

int failures = 0;

template <class T>
T* dalloc(size_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}
template <class T>
std::vector<T> down(const T* p, size_t n) {
  std::vector<T> h(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (n) CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
std::vector<bf16> randv(size_t n, std::mt19937_64& g, float s) {
  std::uniform_real_distribution<float> u(-s, s);
  std::vector<bf16> v(n);
  for (auto& x : v) x = __float2bfloat16(u(g));
  return v;
}
bf16* up(const std::vector<bf16>& v) {
  bf16* p = dalloc<bf16>(v.size());
  CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  return p;
}
double f(bf16 x) { return double(__bfloat162float(x)); }
void report(const char* what, const std::string& shape, double err, double tol) {
  const bool ok = err <= tol;
  failures += !ok;
  std::printf("%s %-26s %-44s err %.2e (tol %.0e)\n", ok ? "PASS" : "FAIL", what, shape.c_str(), err, tol);
}

struct Routing {
  int* buf = nullptr;
  kn::MoeRouting r;
  bf16* logits = nullptr;
  std::vector<bf16> lg;
};

Routing route(std::mt19937_64& g, int64_t T, int E, int k, int first, int count, uint64_t seed, cudaStream_t s) {
  Routing x;
  x.lg = randv(size_t(T * E), g, 3.f);
  x.logits = up(x.lg);
  x.buf = dalloc<int>(size_t(kn::moe_route_buffer_ints(T, k, count)));
  CUDA_CHECK(cudaMemset(x.buf, 0xff, size_t(kn::moe_route_buffer_ints(T, k, count)) * 4));
  x.r = kn::moe_routing_view(x.buf, T, k, count);
  kn::MoeRouteArgs a;
  a.logits = x.logits, a.tokens = T, a.experts = E, a.topk = k, a.expert_first = first, a.expert_count = count;
  a.seed = seed, a.layer = 0;
  kn::moe_route(a, x.r, s);
  return x;
}

void check(std::mt19937_64& g) {
  const int64_t T = 77;
  const int E = 60, k = 4, first = 10, count = 40;
  Routing x = route(g, T, E, k, first, count, 1, nullptr);
  auto w = down(x.r.weights, size_t(T * k));
  auto row_of = down(x.r.row_of, size_t(T * k));
  auto tor = down(x.r.token_of_row, size_t(T * k));
  auto off = down(x.r.offsets, size_t(count + 1));
  double werr = 0;
  int bad = 0;
  std::vector<int> cnt(static_cast<size_t>(count), 0), used(static_cast<size_t>(T * k), 0);
  for (int64_t t = 0; t < T; ++t) {
    int ids[16];
    peerplan::routing::route_token(1, 0, t, E, k, nullptr, ids);
    double mx = -1e30, sum = 0, ps = 0;
    for (int e = 0; e < E; ++e) mx = std::max(mx, f(x.lg[size_t(t * E + e)]));
    for (int e = 0; e < E; ++e) sum += std::exp(f(x.lg[size_t(t * E + e)]) - mx);
    for (int j = 0; j < k; ++j) ps += std::exp(f(x.lg[size_t(t * E + ids[j])]) - mx) / sum;
    for (int j = 0; j < k; ++j) {
      const double ref = std::exp(f(x.lg[size_t(t * E + ids[j])]) - mx) / sum / ps;
      werr = std::max(werr, std::fabs(w[size_t(t * k + j)] - ref));
      const int le = ids[j] - first, row = row_of[size_t(t * k + j)];
      if (le < 0 || le >= count) { bad += row != -1; continue; }
      ++cnt[size_t(le)];
      if (row < 0 || row >= T * k) { ++bad; continue; }
      bad += used[size_t(row)]++ != 0;
      bad += tor[size_t(row)] != t;
      bad += row < off[size_t(le)] || row >= off[size_t(le) + 1];
    }
  }
  int o = 0;
  for (int e = 0; e < count; ++e) bad += off[size_t(e)] != o, o += cnt[size_t(e)];
  bad += off[size_t(count)] != o;
  report("moe_route weights", "T=77 E=60 k=4 local [10,+40)", werr, 1e-5);
  report("moe_route counts/sort", "T=77 E=60 k=4 local [10,+40)", bad, 0);
  // Grouped GEMM, each kernel, gathered; n and k off the tiles.
  const int64_t n = 200, kd = 288;
  auto xin = randv(size_t(T * kd), g, 1.f), wv = randv(size_t(count * n * kd), g, 0.1f);
  bf16 *dx = up(xin), *dw = up(wv), *dy = dalloc<bf16>(size_t(o * n));
  for (int variant = 0; variant < 2 * kn::kMoeTileKinds - 1; ++variant) {
    const int kind = variant % kn::kMoeTileKinds;
    const bool split = variant < kn::kMoeTileKinds;  // stream kernels with and without the k split
    CUDA_CHECK(cudaMemset(dy, 0xff, size_t(o * n) * 2));
    kn::MoeGemmArgs a;
    a.x = dx, a.gather = x.r.token_of_row, a.w = dw, a.y = dy, a.n = n, a.k = kd, a.entries = T * k;
    a.touched = split ? 0 : int64_t(1) << 30;
    kn::moe_grouped_gemm_kind(a, x.r, kind, nullptr);
    auto y = down(dy, size_t(o * n));
    double num = 0, den = 0;
    for (int e = 0; e < count; ++e)
      for (int r = off[size_t(e)]; r < off[size_t(e) + 1]; ++r)
        for (int64_t c = 0; c < n; ++c) {
          double ref = 0;
          for (int64_t q = 0; q < kd; ++q) ref += f(xin[size_t(tor[size_t(r)] * kd + q)]) * f(wv[size_t((e * n + c) * kd + q)]);
          const double got = f(y[size_t(r * n + c)]);
          num += std::isnan(got) ? 1e30 : (got - ref) * (got - ref);
          den += ref * ref;
        }
    report(kind == 0 ? "moe_gemm stream16" : kind == 1 ? "moe_gemm stream32" : "moe_gemm tiled64",
           "rows=" + std::to_string(o) + " n=200 k=288 gather" + (kind < 2 ? (split ? " split-k" : " no split") : ""),
           std::sqrt(num / den), 1e-2);
  }
  // Combine.
  const int64_t H = 264;
  auto rows = randv(size_t(o * H), g, 1.f);
  bf16 *dr = up(rows), *dout = dalloc<bf16>(size_t(T * H));
  kn::moe_combine(x.r, dr, dout, T, k, H, nullptr);
  auto out = down(dout, size_t(T * H));
  double num = 0, den = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < H; ++c) {
      double ref = 0;
      for (int j = 0; j < k; ++j)
        if (row_of[size_t(t * k + j)] >= 0) ref += double(w[size_t(t * k + j)]) * f(rows[size_t(row_of[size_t(t * k + j)] * H + c)]);
      const double got = f(out[size_t(t * H + c)]);
      num += std::isnan(got) ? 1e30 : (got - ref) * (got - ref);
      den += ref * ref;
    }
  report("moe_combine", "T=77 k=4 H=264 local [10,+40)", std::sqrt(num / den), 1e-2);
}

// Seconds per call of `body` (which enqueues one call on s), from a CUDA graph of `reps` calls.
template <class F>
double graph_time(cudaStream_t s, int reps, F&& body) {
  body(0);  // eager once: cuBLAS heuristics and workspace outside the capture
  CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t gr;
  cudaGraphExec_t ge;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < reps; ++i) body(i);
  CUDA_CHECK(cudaStreamEndCapture(s, &gr));
  CUDA_CHECK(cudaGraphInstantiate(&ge, gr, 0));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaGraphLaunch(ge, s));
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    CUDA_CHECK(cudaEventRecord(a, s));
    CUDA_CHECK(cudaGraphLaunch(ge, s));
    CUDA_CHECK(cudaEventRecord(b, s));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3 / reps);
  }
  CUDA_CHECK(cudaGraphExecDestroy(ge));
  CUDA_CHECK(cudaGraphDestroy(gr));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Shape {
  const char* model;
  const char* name;
  int64_t n, k;
  int E, topk;
  bool gather;
};

}  // namespace

int main() {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::mt19937_64 g(7);
  check(g);

  // Device-to-device copy of 2 GiB: bytes read + written per second (the profile's hbm_gbps).
  const size_t cb = size_t(2) << 30;
  char *c0 = dalloc<char>(cb), *c1 = dalloc<char>(cb);
  CUDA_CHECK(cudaMemset(c0, 1, cb));
  const double tc = graph_time(s, 5, [&](int) { CUDA_CHECK(cudaMemcpyAsync(c1, c0, cb, cudaMemcpyDeviceToDevice, s)); });
  const double hbm = 2.0 * double(cb) / tc;
  std::printf("HBM: device-to-device copy %.0f GB/s (read + write)\n", hbm / 1e9);
  CUDA_CHECK(cudaFree(c0));
  CUDA_CHECK(cudaFree(c1));

  cublasHandle_t cub;
  if (cublasCreate(&cub) != CUBLAS_STATUS_SUCCESS) return 2;
  cublasSetStream(cub, s);
  const Shape shapes[] = {{"qwen1.5-moe", "gate_up", 2816, 2048, 60, 4, true},
                          {"qwen1.5-moe", "down", 2048, 1408, 60, 4, false},
                          {"mixtral", "gate_up", 28672, 4096, 8, 2, true},
                          {"mixtral", "down", 4096, 14336, 8, 2, false}};
  std::printf("\n%-12s %-7s %6s %6s %7s %8s %10s %9s %8s   %s\n", "model", "gemm", "tokens", "rows", "touched", "max_rows",
              "us/call", "GB/s", "%copy", "us per kernel (stream16 stream32 tiled64) | cublas per expert");
  for (const Shape& sh : shapes) {
    const int64_t maxT = 2048;
    const int64_t wel = int64_t(sh.E) * sh.n * sh.k;
    // Layer copies of all experts: >= 1.5 GB together, as a decode step meets each layer's experts cold.
    const int layers = int(std::clamp<int64_t>(int64_t(1.5e9) / (wel * 2) + 1, 2, 24));
    std::vector<bf16*> w(static_cast<size_t>(layers), nullptr);
    for (auto& p : w) {
      p = dalloc<bf16>(size_t(wel));
      auto v = randv(1 << 20, g, 0.05f);  // tile a random MiB over the weights (never zeros)
      for (int64_t o = 0; o < wel; o += int64_t(v.size()))
        CUDA_CHECK(cudaMemcpy(p + o, v.data(), size_t(std::min<int64_t>(wel - o, int64_t(v.size()))) * 2, cudaMemcpyHostToDevice));
    }
    bf16* x = up(randv(size_t(maxT * sh.topk * sh.k), g, 1.f));
    bf16* y = dalloc<bf16>(size_t(maxT * sh.topk * sh.n));
    for (int64_t T : {1, 8, 32, 64, 512, 2048}) {
      Routing rt = route(g, T, sh.E, sh.topk, 0, sh.E, 1, s);
      auto off = down(rt.r.offsets, size_t(sh.E + 1));
      int touched = 0, max_rows = 0;
      for (int e = 0; e < sh.E; ++e) {
        const int c = off[size_t(e) + 1] - off[size_t(e)];
        touched += c > 0, max_rows = std::max(max_rows, c);
      }
      const int rows = off[size_t(sh.E)];
      kn::MoeGemmArgs a;
      a.x = x, a.gather = sh.gather ? rt.r.token_of_row : nullptr, a.y = y, a.n = sh.n, a.k = sh.k;
      a.entries = T * sh.topk, a.max_rows = max_rows, a.touched = touched;
      const double bytes = double(touched) * double(sh.n * sh.k) * 2;
      const int reps = std::clamp(int(2e-3 / (bytes / 4e12 + 2.0 * rows * sh.n * sh.k / 3e14 + 3e-6)), 2, 48);
      auto time_kind = [&](int kind) {
        return graph_time(s, reps, [&](int i) {
          a.w = w[size_t(i % layers)];
          if (kind < 0) kn::moe_grouped_gemm(a, rt.r, s);
          else kn::moe_grouped_gemm_kind(a, rt.r, kind, s);
        });
      };
      const double t = time_kind(-1);
      std::printf("%-12s %-7s %6lld %6d %7d %8d %10.1f %9.0f %7.0f%%  ", sh.model, sh.name, (long long)T, rows, touched,
                  max_rows, t * 1e6, bytes / t / 1e9, 100 * bytes / t / (hbm / 2));
      for (int kind = 0; kind < kn::kMoeTileKinds; ++kind)
        if (max_rows <= 256) std::printf(" %8.1f", time_kind(kind) * 1e6);
      if (max_rows <= 32) {  // the stream kernel with the k split forced on and off
        const int64_t keep = a.touched;
        for (const int64_t tv : {int64_t(0), int64_t(1) << 30}) {
          a.touched = tv;
          std::printf(" %s %.1f", tv ? "nosplit" : "split", time_kind(kn::moe_gemm_tile_kind(max_rows, sh.gather)) * 1e6);
        }
        a.touched = keep;
      }
      if (T >= 512) {
        // cuBLAS per touched expert on rows already in expert order (sizes known on the host).
        const float one = 1.f, zero = 0.f;
        const double tb = graph_time(s, reps, [&](int i) {
          const bf16* wl = w[size_t(i % layers)];
          for (int e = 0; e < sh.E; ++e) {
            const int m = off[size_t(e) + 1] - off[size_t(e)];
            if (m == 0) continue;
            cublasGemmEx(cub, CUBLAS_OP_T, CUBLAS_OP_N, int(sh.n), m, int(sh.k), &one, wl + int64_t(e) * sh.n * sh.k,
                         CUDA_R_16BF, int(sh.k), x + int64_t(off[size_t(e)]) * sh.k, CUDA_R_16BF, int(sh.k), &zero,
                         y + int64_t(off[size_t(e)]) * sh.n, CUDA_R_16BF, int(sh.n), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
          }
        });
        std::printf(" | %8.1f (%.0f TFLOP/s ours, %.0f cublas)", tb * 1e6, 2.0 * rows * sh.n * sh.k / t / 1e12,
                    2.0 * rows * sh.n * sh.k / tb / 1e12);
      }
      std::printf("\n");
      CUDA_CHECK(cudaFree(rt.buf));
      CUDA_CHECK(cudaFree(rt.logits));
    }
    for (auto p : w) CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }
  std::printf("\n%s: %d correctness failures\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
