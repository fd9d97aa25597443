// W4A16 at batch 1: is the GEMV's 2.4-3x over the packed-bytes floor (issue 15; docs/quantization.md) the
// weight layout's fault? The GEMV kernels read W as GPTQ stores it ([n][k/8] words): one warp load
// instruction takes 16 bytes per lane from 8 rows, 64 bytes of each, 2 KB or more apart. Marlin and
// Machete repack W offline so that a warp's load is one contiguous 512-byte piece. This bench times, on
// Llama-3.1-8B's four decode GEMMs at M = 1 (weights rotating over copies > 4x the L2, calls in a CUDA
// graph, as the profiler times decode rows):
//   read-std    the production kernels' access pattern (warp per 32 rows x a k split, 8 rows x 64 B per
//               load), loads only;
//   read-tiled  the same loads from a tiled layout (the 16-byte units of a warp load contiguous);
//   gemv-tiled  a CUDA-core GEMV over the tiled layout (fp32 FMA, 4 chunks in flight per warp);
//   v5          the production GEMV (kernels::w4a16_gemm, variant 5) on the standard layout;
// against the floor: packed bytes (codes + scales) over the streaming-read bandwidth measured here. The
// tiled GEMV's output is compared with v5's (same weights): the max difference over max |y| is printed.
// Build: bench/quant/w4layout.sh [out]; run: ./w4layout. Nothing here is used by peerplan itself.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/w4a16.hpp"

using namespace peerplan;
using bf16 = __nv_bfloat16;

namespace {

constexpr int kChunk = 128;        // k per scale group and per 16-byte unit x 4 lanes
constexpr int kWarpsPerBlock = 4;  // 128 threads

using kernels::ptx::ld_stream16;  // the production kernels' streaming load

__global__ void fill_words(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    p[i] = h;
  }
}
__global__ void fill_bf16(bf16* p, size_t n, uint32_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16(lo + (hi - lo) * float(h & 0xFFFFFF) / float(0xFFFFFF));
  }
}

// Tiled layout: the 16-byte unit of row r, chunk c, quarter t (k = 128c + 32t .. +32) goes to unit
// ((r / 8) * chunks + c) * 32 + (r % 8) * 4 + t: lane (g, t) of the production kernels' mapping reads
// unit lane of its (8-row group, chunk), so a warp's load is 512 contiguous bytes.
__global__ void repack_tiled(const uint4* src, uint4* dst, int64_t n, int64_t k) {
  const int64_t chunks = k / kChunk, units = n * chunks * 4;
  for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < units; u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = u / (chunks * 4), c = (u / 4) % chunks, t = u % 4;
    dst[((r / 8) * chunks + c) * 32 + (r % 8) * 4 + t] = src[u];  // src unit u = row r, words 16c + 4t ..
  }
}

// Warp w of the grid: column group cg = w % groups (32 rows: 4 tiles of 8), k split w / groups.
struct Split {
  int64_t cg, c0, c1;
  bool ok;
};
__device__ Split warp_split(int64_t n, int64_t k, int splits) {
  const int64_t warp = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t groups = n / 32, chunks = k / kChunk, per = (chunks + splits - 1) / splits;
  Split s;
  s.cg = warp % groups;
  const int64_t sp = warp / groups;
  s.c0 = sp * per, s.c1 = std::min<int64_t>(chunks, s.c0 + per);
  s.ok = sp < splits && s.c0 < s.c1;
  return s;
}

template <bool TILED>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) read_kernel(const uint4* w, int64_t n, int64_t k, int splits,
                                                                   uint32_t* sink) {
  const Split s = warp_split(n, k, splits);
  if (!s.ok) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t chunks = k / kChunk;
  uint32_t acc = 0;
  for (int64_t c = s.c0; c < s.c1; c += 2) {  // two chunks in flight, as the production v1
    uint4 v[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t cc = std::min<int64_t>(c + j, s.c1 - 1);
        const int64_t row = s.cg * 32 + nt * 8 + g;
        v[j][nt] = TILED ? ld_stream16(w + ((s.cg * 4 + nt) * chunks + cc) * 32 + lane)
                         : ld_stream16(w + row * chunks * 4 + cc * 4 + t);
      }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) acc ^= v[j][nt].x ^ v[j][nt].y ^ v[j][nt].z ^ v[j][nt].w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // keeps the loads
}

// One 16-byte unit (32 codes of one row, k = kb .. kb + 31) against x (fp32 in shared memory):
// sum (q - 8) x = sum (128 + q) x - 136 sum x, (128 + q) as a bf16 built with one lop3 per 2 codes.
__device__ __forceinline__ float unit_dot(uint4 u, const float* xs, const float* xsum32, int kb) {
  float acc = 0.f;
  const uint32_t word[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
    const float4 xa = *reinterpret_cast<const float4*>(xs + kb + 8 * wi);
    const float4 xb = *reinterpret_cast<const float4*>(xs + kb + 8 * wi + 4);
    const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
    // Nibble i of word wi is k = kb + 8 wi + i (w4a16.hpp). The bf16 trick pairs bits [s, s+4) with
    // [s+16, s+20): nibbles i and i + 4.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t v = ((word[wi] >> (4 * i)) & 0x000F000Fu) | 0x43004300u;
      const float lo = __uint_as_float(v << 16), hi = __uint_as_float(v & 0xFFFF0000u);  // 128 + q
      acc = fmaf(lo, xv[i], acc);
      acc = fmaf(hi, xv[i + 4], acc);
    }
  }
  return acc - 136.f * xsum32[kb / 32];
}

// y = x W^T at M = 1 over the tiled layout. Lane (g, t): row cg * 32 + nt * 8 + g, k quarter t of each
// chunk. Split-K partials go to y32 by atomicAdd (zeroed before the call, part of the timed work).
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_tiled(const uint4* w, const bf16* scales, const bf16* x,
                                                                  float* y32, int64_t n, int64_t k, int splits) {
  extern __shared__ __align__(16) float xs[];  // [k] x in fp32, then [k / 32] sums of x over 32 k
  float* xsum32 = xs + k;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) xs[i] = __bfloat162float(x[i]);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < k / 32; i += blockDim.x) {
    float s = 0.f;
    for (int j = 0; j < 32; ++j) s += xs[32 * i + j];
    xsum32[i] = s;
  }
  __syncthreads();
  const Split s = warp_split(n, k, splits);
  if (!s.ok) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t chunks = k / kChunk;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  constexpr int kFly = 4;  // chunks in flight per warp: 4 x 4 x 512 B = 8 KB
  for (int64_t c = s.c0; c < s.c1; c += kFly) {
    uint4 v[kFly][4];
#pragma unroll
    for (int j = 0; j < kFly; ++j)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t cc = std::min<int64_t>(c + j, s.c1 - 1);
        v[j][nt] = ld_stream16(w + ((s.cg * 4 + nt) * chunks + cc) * 32 + lane);
      }
#pragma unroll
    for (int j = 0; j < kFly; ++j) {
      if (c + j < s.c1) {  // (not a break: the loop stays unrolled, v in registers)
        const int kb = int((c + j) * kChunk + 32 * t);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int64_t row = s.cg * 32 + nt * 8 + g;
          const float sc = __bfloat162float(scales[row * chunks + c + j]);
          acc[nt] = fmaf(unit_dot(v[j][nt], xs, xsum32, kb), sc, acc[nt]);
        }
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {  // the 4 lanes of a row (t) hold its 4 k quarters
    float a = acc[nt];
    a += __shfl_xor_sync(0xffffffffu, a, 1);
    a += __shfl_xor_sync(0xffffffffu, a, 2);
    if (t == 0) atomicAdd(y32 + s.cg * 32 + nt * 8 + g, a);
  }
}


// ---- gemv-dp4a: the tiled layout with x quantized to int8 (one scale per 128-k group), as
// llama.cpp's mmvq does: per 8 codes (one word) 2 masks, 1 shift and 2 dp4a, against ~20 ops for
// the bf16 / fp32 paths, so the arithmetic stays far under the SM's issue rate at HBM speed (the
// fp32 GEMV above reads x from shared memory 4 bytes per weight and is bound by that). Each block
// quantises the x chunks its warps need into shared memory first (the first weight loads already
// in flight), laid out per 8 k as [x0 x2 x4 x6][x1 x3 x5 x7] to match a word's low / high nibbles.
// Warp: RT tiles of 8 rows (lane g: row g of each), its k range chunk by chunk, U chunks per load
// batch, the next batch's loads issued before the current one computes. Scales tiled too: the 8
// rows of (tile, chunk) in 16 contiguous bytes.
__global__ void repack_scales_tiled(const bf16* src, bf16* dst, int64_t n, int64_t chunks) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * chunks; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks, c = i % chunks;
    dst[((r / 8) * chunks + c) * 8 + r % 8] = src[i];
  }
}

constexpr int kDpWarps = 8;

template <int RT, int U>
__global__ void __launch_bounds__(kDpWarps * 32) gemv_dp4a(const uint4* w, const bf16* sct, const bf16* x, float* y32,
                                                         int64_t n, int64_t k, int splits) {
  extern __shared__ __align__(16) unsigned char dsm[];
  const int64_t chunks = k / kChunk;
  int8_t* xq = reinterpret_cast<int8_t*>(dsm);           // [k]
  float* sx = reinterpret_cast<float*>(dsm + k);          // [chunks]
  int* xs32 = reinterpret_cast<int*>(sx + chunks);        // [chunks * 4]: sum of xq over each lane quarter
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
  const int64_t groups = n / (8 * RT), per = (chunks + splits - 1) / splits;
  const int64_t gw = int64_t(blockIdx.x) * kDpWarps + warp, cg = gw % groups, sp = gw / groups;
  const int64_t c0 = sp * per, c1 = std::min<int64_t>(chunks, c0 + per);
  const bool ok = sp < splits && c0 < c1;
  uint4 wa[U][RT];
  bf16 sa[U][RT];
  auto load = [&](uint4 (&wv)[U][RT], bf16 (&sv)[U][RT], int64_t c) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const int64_t cc = std::min<int64_t>(c + u, c1 - 1), tile = cg * RT + r;
        wv[u][r] = ld_stream16(w + (tile * chunks + cc) * 32 + lane);
        sv[u][r] = sct[(tile * chunks + cc) * 8 + g];
      }
  };
  if (ok) load(wa, sa, c0);
  {  // x -> int8 for the chunks of this block's warps
    const int64_t gw0 = int64_t(blockIdx.x) * kDpWarps, gw1 = gw0 + kDpWarps - 1;
    const int64_t q0 = (gw0 / groups) * per, q1 = std::min<int64_t>(chunks, (gw1 / groups + 1) * per);
    for (int64_t grp = q0 + warp; grp < q1; grp += kDpWarps) {
      const int kk = lane * 4;
      const uint2 raw = *reinterpret_cast<const uint2*>(x + grp * kChunk + kk);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
      const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
      const float v[4] = {a.x, a.y, b.x, b.y};
      float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
      for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      const float s = amax > 0.f ? amax / 127.f : 1.f, inv = 1.f / s;
      int sum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int q = __float2int_rn(v[i] * inv), o = (kk + i) % 8;
        xq[grp * kChunk + ((kk + i) / 8) * 8 + (o % 2) * 4 + o / 2] = int8_t(q);
        sum += q;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      if (lane % 8 == 0) xs32[grp * 4 + lane / 8] = sum;
      if (lane == 0) sx[grp] = s;
    }
  }
  __syncthreads();
  if (!ok) return;
  float acc[RT] = {};
  for (int64_t c = c0; c < c1; c += U) {
    uint4 wb[U][RT];
    bf16 sb[U][RT];
    const bool more = c + U < c1;
    if (more) load(wb, sb, c + U);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t cc = c + u;
      if (cc < c1) {
        const int64_t kb = cc * kChunk + 32 * t;
        const uint4 xa = *reinterpret_cast<const uint4*>(xq + kb), xb = *reinterpret_cast<const uint4*>(xq + kb + 16);
        const float sxc = sx[cc];
        const int xsum8 = 8 * xs32[cc * 4 + t];
#pragma unroll
        for (int r = 0; r < RT; ++r) {
          const uint4 q = wa[u][r];
          int s = 0;
          s = __dp4a(int(q.x & 0x0F0F0F0Fu), int(xa.x), s);
          s = __dp4a(int((q.x >> 4) & 0x0F0F0F0Fu), int(xa.y), s);
          s = __dp4a(int(q.y & 0x0F0F0F0Fu), int(xa.z), s);
          s = __dp4a(int((q.y >> 4) & 0x0F0F0F0Fu), int(xa.w), s);
          s = __dp4a(int(q.z & 0x0F0F0F0Fu), int(xb.x), s);
          s = __dp4a(int((q.z >> 4) & 0x0F0F0F0Fu), int(xb.y), s);
          s = __dp4a(int(q.w & 0x0F0F0F0Fu), int(xb.z), s);
          s = __dp4a(int((q.w >> 4) & 0x0F0F0F0Fu), int(xb.w), s);
          acc[r] = fmaf(float(s - xsum8), __bfloat162float(sa[u][r]) * sxc, acc[r]);
        }
      }
    }
    if (more) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < RT; ++r) wa[u][r] = wb[u][r], sa[u][r] = sb[u][r];
    }
  }
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    float a = acc[r];
    a += __shfl_xor_sync(0xffffffffu, a, 1);
    a += __shfl_xor_sync(0xffffffffu, a, 2);
    if (t == 0) atomicAdd(y32 + (cg * RT + r) * 8 + g, a);
  }
}

// Microseconds per call: `reps` calls captured into one CUDA graph (gpu::CapturedGraph, the profiler's), the
// median of 20 replays after 3 warm-up ones.
double graph_us(cudaStream_t st, int reps, const std::function<void(int)>& call) {
  call(0);  // outside the capture: lazy module loads, the v5 runner's first-call set-up
  CUDA_CHECK(cudaStreamSynchronize(st));
  gpu::CapturedGraph graph;
  graph.capture(st, [&] {
    for (int r = 0; r < reps; ++r) call(r);
  });
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < 23; ++i) {
    CUDA_CHECK(cudaEventRecord(a, st));
    graph.launch(st);
    CUDA_CHECK(cudaEventRecord(b, st));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) t.push_back(ms * 1e3 / reps);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

__global__ void stream_read(const uint4* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = ld_stream16(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

int main() {
  int dev = 0, sms = 0, l2 = 0;
  CUDA_CHECK(cudaSetDevice(dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreate(&st));
  uint32_t* sink;
  CUDA_CHECK(cudaMalloc(&sink, 4));
  // The yardstick: a grid-stride streaming read of 4 GiB.
  const size_t bw_units = (size_t(4) << 30) / 16;
  uint4* bw_buf;
  CUDA_CHECK(cudaMalloc(&bw_buf, bw_units * 16));
  fill_words<<<4 * sms, 256, 0, st>>>(reinterpret_cast<uint32_t*>(bw_buf), bw_units * 4, 7);
  CUDA_CHECK_LAUNCH("fill_words");
  const double bw_us = graph_us(st, 2, [&](int) {
    stream_read<<<unsigned(4 * sms), 512, 0, st>>>(bw_buf, bw_units, sink);
    CUDA_CHECK_LAUNCH("stream_read");
  });
  const double bw = double(bw_units) * 16 / (bw_us * 1e-6);
  CUDA_CHECK(cudaFree(bw_buf));
  std::printf("streaming read: %.0f GB/s (4 GiB in %.1f us); %d SMs, L2 %d MB\n", bw / 1e9, bw_us, sms, l2 >> 20);
  std::printf("%-8s %9s %9s | %10s %10s %10s %10s %8s | %s\n", "GEMM", "MB", "floor us", "read-std", "read-tiled",
              "gemv-tiled", "v5", "memset", "gemv-tiled vs v5: max |diff| / max |y|");
  const struct {
    const char* name;
    int64_t n, k;
  } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  double sum[5] = {0, 0, 0, 0, 0};
  std::vector<double> dp_sum[8];
  for (const auto& sh : shapes) {
    const int64_t n = sh.n, k = sh.k, chunks = k / kChunk, words = n * k / 8, nscales = n * chunks;
    const double bytes = double(words) * 4 + double(nscales) * 2;
    const int copies = int(std::clamp(std::ceil(4.0 * l2 / bytes), 1.0, 16.0));
    uint32_t *w, *wt;
    bf16 *sc, *x, *y;
    float *y32, *ws;
    CUDA_CHECK(cudaMalloc(&w, size_t(words) * 4 * copies));
    CUDA_CHECK(cudaMalloc(&wt, size_t(words) * 4 * copies));
    CUDA_CHECK(cudaMalloc(&sc, size_t(nscales) * 2 * copies));
    CUDA_CHECK(cudaMalloc(&x, size_t(k) * 2));
    CUDA_CHECK(cudaMalloc(&y, size_t(n) * 2));
    CUDA_CHECK(cudaMalloc(&y32, size_t(n) * 4));
    fill_words<<<4 * sms, 256, 0, st>>>(w, size_t(words) * copies, 11);
    fill_bf16<<<4 * sms, 256, 0, st>>>(sc, size_t(nscales) * copies, 12, 0.002f, 0.02f);
    fill_bf16<<<sms, 256, 0, st>>>(x, size_t(k), 13, -1.f, 1.f);
    CUDA_CHECK_LAUNCH("fill");
    for (int c = 0; c < copies; ++c)
      repack_tiled<<<4 * sms, 256, 0, st>>>(reinterpret_cast<const uint4*>(w + size_t(c) * words),
                                            reinterpret_cast<uint4*>(wt + size_t(c) * words), n, k);
    CUDA_CHECK_LAUNCH("repack_tiled");
    const int64_t groups = n / 32;
    const int splits = int(std::clamp<int64_t>((16 * int64_t(sms) + groups - 1) / groups, 1, chunks));
    const unsigned blocks = unsigned((groups * splits + kWarpsPerBlock - 1) / kWarpsPerBlock);
    const size_t smem = size_t(k + k / 32) * 4;
    CUDA_CHECK(cudaFuncSetAttribute(gemv_tiled, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    const int reps = copies * std::max(1, (16 + copies - 1) / copies);
    auto wc = [&](uint32_t* base, int r) { return reinterpret_cast<const uint4*>(base + size_t(r % copies) * words); };
    const double t_std = graph_us(st, reps, [&](int r) {
      read_kernel<false><<<blocks, kWarpsPerBlock * 32, 0, st>>>(wc(w, r), n, k, splits, sink);
    });
    const double t_tiled = graph_us(st, reps, [&](int r) {
      read_kernel<true><<<blocks, kWarpsPerBlock * 32, 0, st>>>(wc(wt, r), n, k, splits, sink);
    });
    const double t_memset = graph_us(st, reps, [&](int) { CUDA_CHECK(cudaMemsetAsync(y32, 0, size_t(n) * 4, st)); });
    const double t_gemv = graph_us(st, reps, [&](int r) {
      CUDA_CHECK(cudaMemsetAsync(y32, 0, size_t(n) * 4, st));
      gemv_tiled<<<blocks, kWarpsPerBlock * 32, smem, st>>>(wc(wt, r), sc + size_t(r % copies) * nscales, x, y32, n, k,
                                                            splits);
    });
    kernels::w4a16_set_variant(5);
    const size_t wsb = kernels::w4a16_workspace_bytes(1, n, k, sms);
    CUDA_CHECK(cudaMalloc(&ws, std::max<size_t>(wsb, 16)));
    CUDA_CHECK(cudaMemset(ws, 0, std::max<size_t>(wsb, 16)));
    kernels::W4A16Gemm a;
    a.x = x, a.y = y, a.workspace = ws, a.M = 1, a.n = n, a.k = k;
    const double t_v5 = graph_us(st, reps, [&](int r) {
      a.w = w + size_t(r % copies) * words;
      a.scales = sc + size_t(r % copies) * nscales;
      kernels::w4a16_gemm(a, sms, st);
    });
    // Same weights (copy 0) through both: the tiled GEMV against the production kernel.
    a.w = w, a.scales = sc;
    kernels::w4a16_gemm(a, sms, st);
    CUDA_CHECK(cudaMemsetAsync(y32, 0, size_t(n) * 4, st));
    gemv_tiled<<<blocks, kWarpsPerBlock * 32, smem, st>>>(reinterpret_cast<const uint4*>(wt), sc, x, y32, n, k, splits);
    CUDA_CHECK_LAUNCH("gemv_tiled");
    std::vector<bf16> hy(static_cast<size_t>(n));
    std::vector<float> hy32(static_cast<size_t>(n));
    CUDA_CHECK(cudaMemcpyAsync(hy.data(), y, size_t(n) * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(hy32.data(), y32, size_t(n) * 4, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    double maxy = 0, maxd = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double ref = __bfloat162float(hy[size_t(i)]);
      maxy = std::max(maxy, std::abs(ref));
      maxd = std::max(maxd, std::abs(ref - double(hy32[size_t(i)])));
    }
    const double floor_us = bytes / bw * 1e6;
    // gemv-dp4a configurations: tiles per warp x chunks per load batch, warps per SM targeted by the split.
    {
      bf16* sct;
      CUDA_CHECK(cudaMalloc(&sct, size_t(nscales) * 2 * copies));
      for (int c = 0; c < copies; ++c)
        repack_scales_tiled<<<4 * sms, 256, 0, st>>>(sc + size_t(c) * nscales, sct + size_t(c) * nscales, n, chunks);
      CUDA_CHECK_LAUNCH("repack_scales_tiled");
      auto run_dp = [&](auto kern, int rt, int u, int target, std::vector<double>& out) {
        const int64_t groups_dp = n / (8 * rt);
        const int sp = int(std::clamp<int64_t>((int64_t(target) * sms + groups_dp - 1) / groups_dp, 1,
                                               std::max<int64_t>(1, chunks / u)));
        const unsigned nb = unsigned((groups_dp * sp + kDpWarps - 1) / kDpWarps);
        const size_t sm_dp = size_t(k) + size_t(chunks) * 4 + size_t(chunks) * 16;
        CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sm_dp)));
        const double tt = graph_us(st, reps, [&](int r) {
          CUDA_CHECK(cudaMemsetAsync(y32, 0, size_t(n) * 4, st));
          kern<<<nb, kDpWarps * 32, sm_dp, st>>>(wc(wt, r), sct + size_t(r % copies) * nscales, x, y32, n, k, sp);
        });
        CUDA_CHECK(cudaMemsetAsync(y32, 0, size_t(n) * 4, st));
        kern<<<nb, kDpWarps * 32, sm_dp, st>>>(reinterpret_cast<const uint4*>(wt), sct, x, y32, n, k, sp);
        CUDA_CHECK_LAUNCH("gemv_dp4a");
        std::vector<float> o(static_cast<size_t>(n));
        CUDA_CHECK(cudaMemcpyAsync(o.data(), y32, size_t(n) * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        double my = 0, md = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double ref = __bfloat162float(hy[size_t(i)]);
          my = std::max(my, std::abs(ref));
          md = std::max(md, std::abs(ref - double(o[size_t(i)])));
        }
        out.push_back(tt - t_memset);
        std::printf("    dp4a %dx%d @%2d warps/SM (splits %2d): %7.2f us net (%.2fx floor)  %.2e %s\n", rt, u, target, sp,
                    tt - t_memset, (tt - t_memset) / floor_us, my > 0 ? md / my : 0.0,
                    my > 0 && md / my < 2e-2 ? "ok" : "MISMATCH");
      };
      for (int target : {16, 32}) {
        run_dp(gemv_dp4a<4, 2>, 4, 2, target, dp_sum[target == 16 ? 0 : 4]);
        run_dp(gemv_dp4a<2, 4>, 2, 4, target, dp_sum[target == 16 ? 1 : 5]);
        run_dp(gemv_dp4a<4, 4>, 4, 4, target, dp_sum[target == 16 ? 2 : 6]);
        run_dp(gemv_dp4a<1, 8>, 1, 8, target, dp_sum[target == 16 ? 3 : 7]);
      }
      CUDA_CHECK(cudaFree(sct));
    }
    std::printf("%-8s %9.1f %9.2f | %10.2f %10.2f %10.2f %10.2f %8.2f | %.2e (%s)\n", sh.name, bytes / 1e6, floor_us, t_std,
                t_tiled, t_gemv, t_v5, t_memset, maxy > 0 ? maxd / maxy : 0.0,
                maxy > 0 && maxd / maxy < 2e-2 ? "ok" : "MISMATCH");
    const double row[5] = {floor_us, t_std, t_tiled, t_gemv - t_memset, t_v5};
    for (int i = 0; i < 5; ++i) sum[i] += row[i];
    for (void* p : {static_cast<void*>(w), static_cast<void*>(wt), static_cast<void*>(sc), static_cast<void*>(x),
                    static_cast<void*>(y), static_cast<void*>(y32), static_cast<void*>(ws)})
      CUDA_CHECK(cudaFree(p));
  }
  std::printf("four GEMMs: floor %.1f us; read-std %.1f (%.2fx), read-tiled %.1f (%.2fx), gemv-tiled (net of the "
              "memset) %.1f (%.2fx), v5 %.1f (%.2fx)\n",
              sum[0], sum[1], sum[1] / sum[0], sum[2], sum[2] / sum[0], sum[3], sum[3] / sum[0], sum[4], sum[4] / sum[0]);
  const char* dp_names[8] = {"4x2@16", "2x4@16", "4x4@16", "1x8@16", "4x2@32", "2x4@32", "4x4@32", "1x8@32"};
  for (int i = 0; i < 8; ++i) {
    double t = 0;
    for (double v : dp_sum[i]) t += v;
    std::printf("four GEMMs, gemv-dp4a %s: %.1f us (%.2fx floor)\n", dp_names[i], t, t / sum[0]);
  }
  return 0;
}
