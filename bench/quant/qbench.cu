// Quantized-GEMM bench (issue 15), through the executor's own calls (profiler/gpu/gemm_quant.hpp):
//  1. HBM read bandwidth (a streaming read kernel), the yardstick of weight-bound decode;
//  2. the decode GEMM stack of Llama-3.1-8B and -70B (qkv, o, gate_up, down of 16 layers, scaled
//     to the model's layer count, CUDA graph replay, median of 30), at batch 1/8/32/64 with
//     M = max(batch, 16), as .gpu-ref/torch_moe_fp8_ref.py times torch._scaled_mm: bf16, fp8
//     per-tensor (with and without the x-quantize kernel), fp8 per-channel, fp8 128x128 blocks,
//     int8 (W8A8) and int4 (W4A16);
//  3. W4A16 at batch 1: each GEMM's time against its packed bytes (codes + scales) over the
//     measured bandwidth (target: within 1.3x), and GEMV kernel vs dequantise + cuBLASLt over M.
//     These time the SAME weight 20 times: the 8B shapes (8-14 MB) then sit in the 50 MB L2.
//  4. W4A16 as decode reads it: weights rotating over copies that together exceed 4x the L2, every
//     kernel variant (PEERPLAN_W4A16, w4a16.hpp) at M = 1..64, in a CUDA graph, eager, and eager
//     behind a gate (the profiler's old way); per GEMM and the four GEMMs' sum per model.
// QB_W4_ONLY=1 skips 2 and 3 (self-test, bandwidth and 4 only).
// Writes OUT/qbench.json and prints the figures. Build: bench/quant/build.sh. Run: qbench OUTDIR
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
#include "profiler/kernels/w4a16.hpp"

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

// The profiler's eager timing (profiler/gpu/timing.hpp): a spin kernel holds the stream on a
// host-mapped flag while the calls are enqueued, so the GPU sees them back to back with no CPU
// launch gaps, as profiler/measure/gemm.cpp timed W4A16 rows before they moved into a graph.
__global__ void spin_kernel(volatile int* flag) {
  long long t0 = clock64();
  while (*flag == 0 && clock64() - t0 < 20000000000ll) {
  }
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
  // Eager calls behind a gate (the launches enqueued while a spin kernel holds the stream).
  double gated_ms(const std::function<void()>& f, int n = 30) {
    static int* flag = nullptr;
    static int* dflag = nullptr;
    if (!flag) {
      CUDA_CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
      CUDA_CHECK(cudaHostGetDevicePointer(&dflag, flag, 0));
    }
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    f();
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> t;
    for (int i = 0; i < n + 2; ++i) {
      *reinterpret_cast<volatile int*>(flag) = 0;
      spin_kernel<<<1, 1, 0, s>>>(dflag);
      CUDA_CHECK(cudaEventRecord(a, s));
      f();
      CUDA_CHECK(cudaEventRecord(b, s));
      *reinterpret_cast<volatile int*>(flag) = 1;
      CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      if (i >= 2) t.push_back(ms);
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
  std::printf("qbench on %s (driver API %d), W4A16 default variant %s\n", prop.name, driver,
              kernels::w4a16_variant_name(kernels::w4a16_variant()));
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
    const bool w4_only = std::getenv("QB_W4_ONLY") && *std::getenv("QB_W4_ONLY") && std::getenv("QB_W4_ONLY")[0] != '0';
    for (const Variant& v : variants) {
      if (w4_only) break;
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
      if (w4_only) break;
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
    if (!w4_only) jm["int4_b1"] = {{"per_gemm", jw}, {"ratio_sum", sum_t / sum_floor}};
    if (!w4_only) std::printf("%s int4 b=1 four GEMMs: %.1f us vs bytes/BW %.1f us: %.2fx (target <= 1.3)\n", m.name.c_str(),
                sum_t * 1e3, sum_floor * 1e3, sum_t / sum_floor);
    // 4. W4A16 as a decode step reads it: weights rotating over copies that together exceed 4x the
    // L2 (every call streams its weight from HBM), per kernel variant and M, inside a CUDA graph, and
    // the same calls eager (plain launches: CPU launch gaps included) and eager behind a gate (the
    // profiler's former timing of int4 rows).
    {
      const int v_default = kernels::w4a16_variant();
      const int64_t gemv_default = q.int4_gemv_max_m();
      q.set_int4_gemv_max_m(kernels::kW4GemvMaxM);
      const std::vector<int64_t> Ms = {1, 2, 4, 8, 16, 32, 64};
      std::map<std::pair<int, int64_t>, std::array<double, 4>> sums;  // (variant, M) -> graph, eager, gated, floor
      nlohmann::json jr;
      for (auto [n, k] : shapes) {
        const double b = double(gpu::quant_weight_bytes(DType::INT4, gpu::Fp8Scaling::PerTensor, n, k));
        const double l2 = double(prop.l2CacheSize);
        const int copies = int(std::max<double>(1, std::ceil(4 * l2 / b)));
        const int reps = copies * ((20 + copies - 1) / copies);
        std::vector<gpu::QuantWeight> ws;
        for (int c = 0; c < copies; ++c)
          ws.push_back(gpu::make_random_quant_weight(dev, DType::INT4, gpu::Fp8Scaling::PerTensor, n, k, 900 + c, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        const double floor_us = b / bw * 1e6;
        for (int v = 1; v <= kernels::kW4Variants; ++v) {
          // QB_W4_VARIANTS=5,7 times only those variants (default: every one).
          if (const char* only = std::getenv("QB_W4_VARIANTS"); only && *only) {
            const std::string list = std::string(",") + only + ",";
            if (list.find("," + std::to_string(v) + ",") == std::string::npos) continue;
          }
          kernels::w4a16_set_variant(v);
          for (int64_t M : Ms) {
            auto f = [&] { for (int r = 0; r < reps; ++r) q.run(x.get(), ws[size_t(r % copies)], y.get(), M, s); };
            const double tg = T.graph_ms(f) / reps * 1e3, te = T.median_ms(f) / reps * 1e3,
                         tq = T.gated_ms(f) / reps * 1e3;
            auto& sm = sums[{v, M}];
            sm[0] += tg, sm[1] += te, sm[2] += tq, sm[3] += floor_us;
            std::printf("%s int4 rot v%d M=%-2ld n=%-6ld k=%-6ld graph %7.1f us  eager %7.1f  gated %7.1f | bytes/BW "
                        "%6.1f us: %.2fx graph (x%d copies, %.0f MB)\n",
                        m.name.c_str(), v, long(M), long(n), long(k), tg, te, tq, floor_us, tg / floor_us, copies,
                        b * copies / 1e6);
            jr["v" + std::to_string(v)][std::to_string(n) + "x" + std::to_string(k)][std::to_string(M)] = {
                {"graph_us", tg}, {"eager_us", te}, {"gated_us", tq}, {"bytes_over_bw_us", floor_us},
                {"copies", copies}};
          }
        }
      }
      for (auto& [key, sm] : sums) {
        std::printf("%s int4 rot v%d M=%-2ld four GEMMs: graph %.1f us eager %.1f gated %.1f vs bytes/BW %.1f us: "
                    "%.2fx graph, %.2fx gated (target <= 1.3 at M=1)\n",
                    m.name.c_str(), key.first, long(key.second), sm[0], sm[1], sm[2], sm[3], sm[0] / sm[3],
                    sm[2] / sm[3]);
        jr["v" + std::to_string(key.first)]["four_gemms"][std::to_string(key.second)] = {
            {"graph_us", sm[0]}, {"eager_us", sm[1]}, {"gated_us", sm[2]}, {"bytes_over_bw_us", sm[3]}};
      }
      jm["int4_rotating"] = jr;
      // bf16 (cuBLASLt) the same three ways plus the profiler's bf16 timing (one weight, eager
      // behind a gate): does the profiler's bf16 row carry the same L2 / eager bias?
      nlohmann::json jb;
      for (const auto& nk : shapes) {
        const int64_t n = nk.first, k = nk.second;  // (lambdas capture these; not structured bindings)
        const double b = double(n * k) * 2;
        const int copies = int(std::max<double>(1, std::ceil(4 * double(prop.l2CacheSize) / b)));
        const int reps = copies * ((20 + copies - 1) / copies);
        std::vector<gpu::DeviceBuffer> wb;
        for (int c = 0; c < copies; ++c) {
          wb.emplace_back(dev, size_t(n * k) * 2);
          kernels::fill_random(wb.back().as<bf16>(), n * k, 300 + c, 0.02f, s);
        }
        CUDA_CHECK(cudaStreamSynchronize(s));
        const double floor_us = b / bw * 1e6;
        for (int64_t M : {1, 16, 64}) {
          auto rot = [&] { for (int r = 0; r < reps; ++r) bf.run(x.get(), wb[size_t(r % copies)].get(), y.get(), M, n, k, s); };
          auto same = [&] { for (int r = 0; r < reps; ++r) bf.run(x.get(), wb[0].get(), y.get(), M, n, k, s); };
          const double tg = T.graph_ms(rot) / reps * 1e3, tq = T.gated_ms(rot) / reps * 1e3,
                       ts = T.gated_ms(same) / reps * 1e3, tsg = T.graph_ms(same) / reps * 1e3;
          std::printf("%s bf16 M=%-2ld n=%-6ld k=%-6ld rotating: graph %7.1f us gated %7.1f | one weight: graph %7.1f "
                      "gated %7.1f (profiler's bf16 row) | bytes/BW %6.1f us\n",
                      m.name.c_str(), long(M), long(n), long(k), tg, tq, tsg, ts, floor_us);
          jb[std::to_string(n) + "x" + std::to_string(k)][std::to_string(M)] = {
              {"rot_graph_us", tg}, {"rot_gated_us", tq}, {"same_graph_us", tsg}, {"same_gated_us", ts},
              {"bytes_over_bw_us", floor_us}, {"copies", copies}};
        }
      }
      jm["bf16_rotating"] = jb;
      kernels::w4a16_set_variant(v_default);
      q.set_int4_gemv_max_m(gemv_default);
    }
    J[m.name] = jm;
    std::fflush(stdout);
  }
  FILE* f = std::fopen((out_dir + "/qbench.json").c_str(), "w");
  if (f) {
    std::fputs(J.dump(1).c_str(), f);
    std::fclose(f);
  }
  return 0;
}
