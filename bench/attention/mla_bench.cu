// MLA decode bench (profiler/kernels/mla.hpp): kernels::mla_decode over one layer's latent cache at
// batch x context, event-timed median of 30 launches, with the cache bytes it streams (batch x
// context x 1152) as TB/s and the tensor-core work (heads x (576 + 512) x 2 per token) as TFLOP/s.
// The H200's HBM is ~4.8 TB/s nominal (~4 in practice); at 16 heads (V2-Lite) the kernel should be
// near that, at 128 heads (V3) it is bound by mma.sync. Build: bench/attention/mla_build.sh.
// Run: ./mla_bench [HEADS,...]   (default 16,128; 128 also with the head tiles 32 and 16)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/kernels/mla.hpp"

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;

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
    uint32_t x = uint32_t(i) * 2654435761u ^ seed * 0x9E3779B9u;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    p[i] = __float2bfloat16(float(x & 0xffff) / 32768.f - 1.f);
  }
}

int main(int argc, char** argv) {
  std::vector<int> heads_list = {16, 128};
  if (argc > 1) {
    heads_list.clear();
    for (std::string s = argv[1]; !s.empty();) {
      const size_t c = s.find(',');
      heads_list.push_back(std::atoi(s.substr(0, c).c_str()));
      s = c == std::string::npos ? "" : s.substr(c + 1);
    }
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::vector<int> batches = {1, 4, 16, 64};
  const std::vector<int> contexts = {1024, 8192, 32768, 131072};
  const size_t budget = size_t(24) << 30;  // cache bytes at most (batch x max_ctx x 1152)
  std::printf("%6s %5s %5s %7s %6s %10s %8s %9s\n", "heads", "tile", "batch", "ctx", "splits", "us", "TB/s", "TFLOP/s");
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int heads : heads_list) {
    std::vector<int> tiles = {0};
    if (heads == 128) tiles = {0, 32, 16};
    for (int tile : tiles)
      for (int batch : batches)
        for (int ctx : contexts) {
          const size_t cache_elems = size_t(batch) * ctx * kn::kMlaRow;
          if (cache_elems * 2 > budget) continue;
          const int64_t qstride = int64_t(heads) * kn::kMlaRow;
          bf16 *cache = nullptr, *q = nullptr, *out = nullptr;
          int *lens = nullptr;
          float* ws = nullptr;
          const size_t wsb = std::max<size_t>(256, kn::mla_decode_workspace_bytes(batch, heads, ctx, sms));
          CK(cudaMalloc(&cache, cache_elems * 2));
          CK(cudaMalloc(&q, size_t(batch) * qstride * 2));
          CK(cudaMalloc(&out, size_t(batch) * heads * kn::kMlaLatent * 2));
          CK(cudaMalloc(&lens, size_t(batch) * 4));
          CK(cudaMalloc(&ws, wsb));
          fill<<<1024, 256>>>(cache, cache_elems, 1);
          fill<<<256, 256>>>(q, size_t(batch) * qstride, 2);
          std::vector<int> hl(size_t(batch), ctx);
          CK(cudaMemcpy(lens, hl.data(), hl.size() * 4, cudaMemcpyHostToDevice));
          kn::MlaDecode a;
          a.q = q;
          a.q_row_stride = qstride;
          a.cache = cache;
          a.seq_lens = lens;
          a.out = out;
          a.workspace = ws;
          a.batch = batch;
          a.heads = heads;
          a.max_ctx = ctx;
          a.scale = kn::mla_softmax_scale(128, 64, 40, 0.707);
          a.head_tile = tile;
          for (int i = 0; i < 3; ++i) kn::mla_decode(a, sms, nullptr);
          std::vector<float> ts;
          for (int i = 0; i < 30; ++i) {
            CK(cudaEventRecord(e0));
            kn::mla_decode(a, sms, nullptr);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms);
          }
          std::sort(ts.begin(), ts.end());
          const double s = ts[ts.size() / 2] * 1e-3;
          const double bytes = double(batch) * ctx * kn::kMlaRow * 2;
          const double flops = 2.0 * batch * ctx * heads * (kn::kMlaRow + kn::kMlaLatent);
          std::printf("%6d %5s %5d %7d %6d %10.1f %8.2f %9.1f\n", heads, tile ? std::to_string(tile).c_str() : "auto",
                      batch, ctx, kn::mla_decode_splits(batch, heads, ctx, sms, tile), s * 1e6, bytes / s / 1e12,
                      flops / s / 1e12);
          CK(cudaFree(cache));
          CK(cudaFree(q));
          CK(cudaFree(out));
          CK(cudaFree(lens));
          CK(cudaFree(ws));
        }
  }
  return 0;
}
