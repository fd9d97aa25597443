// Quantized-GEMM bench (issue 15), through the executor's own calls (profiler/gpu/gemm_quant.hpp):
//  1. HBM read bandwidth (a streaming read kernel), the yardstick of weight-bound decode;
//  2. the decode GEMM stack of Llama-3.1-8B and -70B (qkv, o, gate_up, down of 16 layers, scaled
//     to the model's layer count, CUDA graph replay, median of 30), at batch 1/8/32/64 with
//     M = max(batch, 16), as .gpu-ref/torch_moe_fp8_ref.py times torch._scaled_mm: bf16, fp8
//     per-tensor (with and without the x-quantize kernel), fp8 per-channel, fp8 128x128 blocks,
//     int8 (W8A8) and int4 (W4A16);
//  3. W4A16 at batch 1: each GEMM's time against its packed bytes (codes + scales) over the
//     measured bandwidth (target: within 1.3x), and GEMV kernel vs dequantise + cuBLASLt over M.
// Writes OUT/qbench.json and prints the figures. Build: bench/quant/build.sh. Run: qbench OUTDIR
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/quant.hpp"

using namespace peerplan;

int run_quant_selftest(int dev, unsigned long long seed);  // qcheck.cpp
using bf16 = __nv_bfloat16;

__global__ void read_kernel(const uint4* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads; almost never stores
}

struct Timer {
  cudaStream_t s;
  double median_ms(const std::function<void()>& f, int n = 30) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) f();
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> t;
    for (int i = 0; i < n; ++i) {
      CUDA_CHECK(cudaEventRecord(a, s));
      f();
      CUDA_CHECK(cudaEventRecord(b, s));
      CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  // f captured once into a CUDA graph, the replay timed.
  double graph_ms(const std::function<void()>& f) {
    f();  // plans, scratch
    CUDA_CHECK(cudaStreamSynchronize(s));
    cudaGraph_t g;
    cudaGraphExec_t e;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    f();
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
    const double ms = median_ms([&] { CUDA_CHECK(cudaGraphLaunch(e, s)); });
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    return ms;
  }
};

struct Model {
  std::string name;
  int64_t h, L, nh, kv, I;
};

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  const int dev = 0;
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  int driver = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  Timer T{s};
  nlohmann::json J;
  J["gpu"] = prop.name;
  J["cuda_driver"] = driver;
  std::printf("qbench on %s (driver API %d)\n", prop.name, driver);
  const int failed = run_quant_selftest(dev, 20261202);
  std::printf("%s quantized-kernel self-test: %d failed\n", failed ? "FAIL" : "PASS", failed);
  J["selftest_failed"] = failed;

  // 1. HBM read bandwidth over 4 GiB.
  const size_t bw_bytes = size_t(4) << 30;
  gpu::DeviceBuffer big(dev, bw_bytes), sink(dev, 64);
  CUDA_CHECK(cudaMemset(big.get(), 1, bw_bytes));
  const double bw_ms = T.median_ms([&] {
    read_kernel<<<prop.multiProcessorCount * 8, 512, 0, s>>>(big.as<uint4>(), bw_bytes / 16, sink.as<uint32_t>());
  });
  const double bw = double(bw_bytes) / (bw_ms * 1e-3);
  big = gpu::DeviceBuffer();
  J["hbm_read_gbps"] = bw / 1e9;
  std::printf("HBM read: %.0f GB/s\n", bw / 1e9);

  gpu::GemmRunner bf(dev);
  gpu::QuantGemmRunner q(dev);
  const std::vector<Model> models = {{"llama-3.1-8b", 4096, 32, 32, 8, 14336}, {"llama-3.1-70b", 8192, 80, 64, 8, 28672}};
  const int layers_timed = 16;
  for (const Model& m : models) {
    const int64_t hd = m.h / m.nh;
    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {(m.nh + 2 * m.kv) * hd, m.h}, {m.h, m.nh * hd}, {2 * m.I, m.h}, {m.h, m.I}};  // (n, k)
    int64_t max_k = 0, max_n = 0;
    for (auto [n, k] : shapes) max_k = std::max(max_k, k), max_n = std::max(max_n, n);
    const int64_t maxM = 256;  // x, y rows: the largest M timed
    gpu::DeviceBuffer x(dev, size_t(maxM * max_k) * 2), y(dev, size_t(maxM * max_n) * 2), xq(dev, size_t(maxM * max_k));
    kernels::fill_random(x.as<bf16>(), maxM * max_k, 7, 1.f, s);
    const float xs = 1.f / 64;
    {
      gpu::DeviceBuffer one(dev, 4);
      kernels::fill_f32(one.as<float>(), 1, xs, s);
      kernels::quantize_fp8_per_tensor(x.as<bf16>(), xq.as<uint8_t>(), maxM * max_k, one.as<float>(), s);
      CUDA_CHECK(cudaStreamSynchronize(s));
    }
    const double scale = double(m.L) / layers_timed;
    nlohmann::json jm;
    struct Variant {
      std::string tag;
      DType dt;
      gpu::Fp8Scaling sc;
      bool preq;
    };
    const std::vector<Variant> variants = {
        {"bf16", DType::BF16, gpu::Fp8Scaling::PerTensor, false},
        {"fp8_tensor", DType::FP8_E4M3, gpu::Fp8Scaling::PerTensor, false},
        {"fp8_tensor_prequant", DType::FP8_E4M3, gpu::Fp8Scaling::PerTensor, true},
        {"fp8_channel", DType::FP8_E4M3, gpu::Fp8Scaling::PerChannel, false},
        {"fp8_block", DType::FP8_E4M3, gpu::Fp8Scaling::Block128, false},
        {"int8", DType::INT8, gpu::Fp8Scaling::PerTensor, false},
        {"int4", DType::INT4, gpu::Fp8Scaling::PerTensor, false},
    };
    for (const Variant& v : variants) {
      // 16 layers of distinct weights (bf16: one buffer per weight; quantized: QuantWeight).
      std::vector<gpu::DeviceBuffer> wb;
      std::vector<gpu::QuantWeight> wq;
      double bytes = 0;
      try {
        for (int l = 0; l < layers_timed; ++l)
          for (auto [n, k] : shapes) {
            if (v.dt == DType::BF16) {
              wb.emplace_back(dev, size_t(n * k) * 2);
              kernels::fill_random(wb.back().as<bf16>(), n * k, 100 + wb.size(), 0.02f, s);
              bytes += double(n * k) * 2;
            } else {
              wq.push_back(gpu::make_random_quant_weight(dev, v.dt, v.sc, n, k, 100 + wq.size(), s));
              bytes += double(gpu::quant_weight_bytes(v.dt, v.sc, n, k));
            }
          }
        CUDA_CHECK(cudaStreamSynchronize(s));
        nlohmann::json jv;
        for (int B : {1, 8, 32, 64}) {
          const int64_t M = std::max(B, 16);
          auto stack = [&] {
            size_t i = 0;
            for (int l = 0; l < layers_timed; ++l)
              for (auto [n, k] : shapes) {
                if (v.dt == DType::BF16) bf.run(x.get(), wb[i].get(), y.get(), M, n, k, s);
                else if (v.preq) q.run_fp8_prequantized(xq.get(), wq[i], y.get(), M, s);
                else q.run(x.get(), wq[i], y.get(), M, s);
                ++i;
              }
          };
          const double ms = T.graph_ms(stack) * scale;
          jv["b" + std::to_string(B)] = ms;
          std::printf("%s %-20s b=%-2d M=%-2ld stack %.3f ms (weights %.2f GB/model -> %.0f%% of HBM read)\n",
                      m.name.c_str(), v.tag.c_str(), B, long(M), ms, bytes * scale / 1e9,
                      100.0 * (bytes * scale / (ms * 1e-3)) / bw);
        }
        jv["weight_bytes_model"] = bytes * scale;
        jm[v.tag] = jv;
      } catch (const std::exception& e) {
        jm[v.tag] = {{"error", e.what()}};
        std::printf("%s %s: error: %s\n", m.name.c_str(), v.tag.c_str(), e.what());
      }
    }
    // 3. W4A16 at batch 1, per GEMM: time vs packed bytes / bandwidth; kernel vs dequant over M.
    nlohmann::json jw;
    double sum_t = 0, sum_floor = 0;
    for (auto [n, k] : shapes) {
      gpu::QuantWeight w = gpu::make_random_quant_weight(dev, DType::INT4, gpu::Fp8Scaling::PerTensor, n, k, 5, s);
      const double b = double(gpu::quant_weight_bytes(DType::INT4, gpu::Fp8Scaling::PerTensor, n, k));
      const double t = T.graph_ms([&] { for (int r = 0; r < 20; ++r) q.run(x.get(), w, y.get(), 1, s); }) / 20;
      const double floor_ms = b / bw * 1e3;
      sum_t += t, sum_floor += floor_ms;
      nlohmann::json js = {{"n", n}, {"k", k}, {"us", t * 1e3}, {"bytes_over_bw_us", floor_ms * 1e3}, {"ratio", t / floor_ms}};
      std::printf("%s int4 b=1 n=%-6ld k=%-6ld %.1f us vs bytes/BW %.1f us: %.2fx\n", m.name.c_str(), long(n), long(k),
                  t * 1e3, floor_ms * 1e3, t / floor_ms);
      nlohmann::json jm2;
      const int64_t gemv_default = q.int4_gemv_max_m();
      for (int64_t M : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
        nlohmann::json row;
        for (int gemv : {1, 0}) {
          if (gemv && M > 64) continue;
          q.set_int4_gemv_max_m(gemv ? 64 : 0);
          const double tm = T.graph_ms([&] { for (int r = 0; r < 5; ++r) q.run(x.get(), w, y.get(), M, s); }) / 5;
          row[gemv ? "gemv_us" : "dequant_cublas_us"] = tm * 1e3;
        }
        q.set_int4_gemv_max_m(gemv_default);
        jm2[std::to_string(M)] = row;
      }
      js["by_m"] = jm2;
      jw.push_back(js);
    }
    jm["int4_b1"] = {{"per_gemm", jw}, {"ratio_sum", sum_t / sum_floor}};
    std::printf("%s int4 b=1 four GEMMs: %.1f us vs bytes/BW %.1f us: %.2fx (target <= 1.3)\n", m.name.c_str(),
                sum_t * 1e3, sum_floor * 1e3, sum_t / sum_floor);
    J[m.name] = jm;
  }
  FILE* f = std::fopen((out_dir + "/qbench.json").c_str(), "w");
  if (f) {
    std::fputs(J.dump(1).c_str(), f);
    std::fclose(f);
  }
  return 0;
}
