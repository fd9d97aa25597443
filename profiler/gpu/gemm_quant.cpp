#include "profiler/gpu/gemm_quant.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "profiler/common/quant_shapes.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/quant.hpp"
#include "profiler/kernels/w4a16.hpp"

namespace peerplan::gpu {

namespace kn = peerplan::kernels;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Rows of W per int4 dequant slab: 64 MiB of bf16 at most, whole 128-row multiples.
int64_t int4_slab_rows(int64_t n, int64_t k) {
  const int64_t rows = std::max<int64_t>(128, (int64_t(32) << 20) / k / 128 * 128);
  return std::min(n, rows);
}
std::string shape_text(int64_t M, int64_t n, int64_t k) {
  return "y[" + std::to_string(M) + "," + std::to_string(n) + "] = x[" + std::to_string(M) + "," + std::to_string(k) +
         "] W^T";
}

}  // namespace

int64_t fp8_block_scale_ld(int64_t k) { return (ceil_div(k, 128) + 3) / 4 * 4; }
int64_t fp8_block_scale_count(int64_t n, int64_t k) { return ceil_div(n, 128) * fp8_block_scale_ld(k); }

const char* to_string(Fp8Scaling s) {
  switch (s) {
    case Fp8Scaling::PerTensor: return "per-tensor";
    case Fp8Scaling::PerChannel: return "per-channel";
    case Fp8Scaling::Block128: return "block-128x128";
  }
  return "?";
}

size_t quant_weight_bytes(DType dtype, Fp8Scaling scaling, int64_t n, int64_t k) {
  switch (dtype) {
    case DType::FP8_E4M3: {
      const int64_t s = scaling == Fp8Scaling::PerTensor    ? 1
                        : scaling == Fp8Scaling::PerChannel ? n
                                                            : fp8_block_scale_count(n, k);
      return size_t(n * k + 4 * s);
    }
    case DType::INT8: return size_t(n * k + 4 * n);
    case DType::INT4: return size_t(n * k / 2 + 2 * n * (k / kn::kW4Group));
    case DType::MXFP4: return size_t(n * k / 2 + n * (k / 32));
    default: return size_t(n * k * 2);
  }
}

void check_quant_shape(DType dtype, int64_t n, int64_t k) {
  // MXFP4 weights are routed experts only (their [experts x n][k] rows): the grouped kernels' rule.
  const bool mx = dtype == DType::MXFP4;
  const bool quantized = dtype == DType::INT4 || dtype == DType::FP8_E4M3 || dtype == DType::INT8 || mx;
  if (!quantized || !(mx ? kn::quant_grouped_shape_ok(dtype, n, k) : kn::quant_gemm_shape_ok(dtype, n, k)))
    throw RuntimeError(std::string("quantized GEMM: ") + dtype_name(dtype) + " weights [" + std::to_string(n) + "," +
                       std::to_string(k) + "] do not run here (" +
                       (quantized ? dtype_name(dtype) + std::string(": ") + kn::quant_shape_rule(dtype, mx)
                                  : std::string("not a quantized weight format")) +
                       ")");
}

QuantWeight make_random_quant_weight(int device, DType dtype, Fp8Scaling scaling, int64_t n, int64_t k, uint64_t seed,
                                     cudaStream_t stream) {
  check_quant_shape(dtype, n, k);
  ScopedDevice d(device);
  QuantWeight w;
  w.dtype = dtype;
  w.scaling = scaling;
  w.n = n;
  w.k = k;
  // Codes span e4m3's range (|v| up to 448) or int8's; scales bring weights near 0.02-0.05.
  if (dtype == DType::FP8_E4M3) {
    w.codes = DeviceBuffer(device, size_t(n * k));
    kn::fill_random_fp8(w.codes.as<uint8_t>(), n * k, seed, stream);
    const int64_t ns = scaling == Fp8Scaling::PerTensor    ? 1
                       : scaling == Fp8Scaling::PerChannel ? n
                                                           : fp8_block_scale_count(n, k);
    w.scales = DeviceBuffer(device, size_t(ns) * 4);
    kn::fill_random_f32(w.scales.as<float>(), ns, seed ^ 0x5ca1e, 1.f / 8192, 1.f / 4096, stream);
    w.x_scale = DeviceBuffer(device, 4);
    kn::fill_f32(w.x_scale.as<float>(), 1, 1.f / 64, stream);  // x in [-1, 1] -> codes up to 64
  } else if (dtype == DType::INT8) {
    w.codes = DeviceBuffer(device, size_t(n * k));
    kn::fill_random_int8(w.codes.as<int8_t>(), n * k, seed, stream);
    w.scales = DeviceBuffer(device, size_t(n) * 4);
    kn::fill_random_f32(w.scales.as<float>(), n, seed ^ 0x5ca1e, 1.f / 4096, 1.f / 2048, stream);
  } else if (dtype == DType::MXFP4) {  // any e2m1 codes, scales 2^-9 .. 2^-6 (one byte per row and 32 k)
    w.codes = DeviceBuffer(device, size_t(n * k / 2));
    kn::fill_random_u32(w.codes.as<uint32_t>(), n * k / 8, seed, stream);
    w.scales = DeviceBuffer(device, size_t(n * (k / 32)));
    kn::fill_random_e8m0(w.scales.as<uint8_t>(), n * (k / 32), seed ^ 0x5ca1e, stream);
  } else {
    w.codes = DeviceBuffer(device, size_t(n * k / 2));
    kn::fill_random_u32(w.codes.as<uint32_t>(), n * k / 8, seed, stream);
    const int64_t ns = n * (k / kn::kW4Group);
    w.scales = DeviceBuffer(device, size_t(ns) * 2);
    kn::fill_random(w.scales.as<__nv_bfloat16>(), ns, seed ^ 0x5ca1e, 1.f / 256, stream);  // |s| <= 1/256
  }
  return w;
}

struct QuantGemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

QuantGemmRunner::QuantGemmRunner(int device, size_t ws) : device_(device), handle_(device), workspace_(device, ws) {
  CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
}
QuantGemmRunner::~QuantGemmRunner() = default;
QuantGemmRunner::QuantGemmRunner(QuantGemmRunner&&) noexcept = default;
QuantGemmRunner& QuantGemmRunner::operator=(QuantGemmRunner&&) noexcept = default;

void* QuantGemmRunner::scratch(int which, size_t bytes, cudaStream_t stream) {
  DeviceBuffer& b = scratch_[which];
  if (b.bytes() < bytes) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &st));
    if (st != cudaStreamCaptureStatusNone)
      throw RuntimeError("QuantGemmRunner: scratch must grow to " + std::to_string(bytes) +
                         " bytes during CUDA-graph capture; run the shape once eagerly first");
    CUDA_CHECK(cudaStreamSynchronize(stream));  // the old buffer may still be in use
    // Keep the old buffer alive: CUDA graphs captured with it (the engine's decode graphs of a
    // smaller batch) still read and write it on every replay. Freeing it here made a W4A16 run
    // fault with an illegal address once a larger decode batch grew the split-K workspace.
    if (b.bytes() > 0) retired_.push_back(std::move(b));
    b = DeviceBuffer(device_, std::max<size_t>(bytes, 256));
    CUDA_CHECK(cudaMemsetAsync(b.get(), 0, b.bytes(), stream));  // the W4A16 split-K counters start at 0
  }
  return b.get();
}

// In cuBLAS's column-major terms, as GemmRunner: C(n x M) = op(A) B, A = W (k x n, transposed),
// B = x (k x M), "TN" (FP8 and IMMA kernels need exactly this layout).
const QuantGemmRunner::Plan& QuantGemmRunner::plan_for(DType dtype, Fp8Scaling scaling, int64_t M, int64_t n,
                                                       int64_t k, int64_t ldc) {
  auto key = std::make_tuple(int(dtype), int(scaling), M, n, k, ldc);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const bool int8 = dtype == DType::INT8;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F,
                                        int8 ? CUDA_R_32I : CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cudaDataType_t ab = CUDA_R_16BF, cd = CUDA_R_16BF;
  if (dtype == DType::FP8_E4M3) {
    ab = CUDA_R_8F_E4M3;
    int32_t am = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, bm = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    if (scaling == Fp8Scaling::PerChannel) am = bm = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if (scaling == Fp8Scaling::Block128) {
      am = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    }
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof(am)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof(bm)));
    // Scale pointers are set per call (cublasLtMatmulDescSetAttribute is host-only and cheap);
    // a placeholder here lets the heuristic see the scaling in force.
    const void* dummy = workspace_.get();
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dummy, sizeof(dummy)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dummy, sizeof(dummy)));
  } else if (int8) {
    ab = CUDA_R_8I;
    cd = CUDA_R_32I;
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, ab, uint64_t(k), uint64_t(n), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, ab, uint64_t(k), uint64_t(M), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, cd, uint64_t(n), uint64_t(M), ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = workspace_.bytes();
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw CublasError("cuBLAS", "cublasLtMatmulAlgoGetHeuristic", found == 0 ? "no algorithm" : "error", int(st),
                      device_,
                      std::string("cuBLASLt found no ") + dtype_name(dtype) +
                          (dtype == DType::FP8_E4M3 ? std::string(" (") + to_string(scaling) + ")" : std::string()) +
                          " algorithm for " + shape_text(M, n, k) + " on device " + std::to_string(device_) +
                          " (status " + std::to_string(int(st)) + ")");
  p->algo = res.algo;
  auto& ref = *p;
  plans_.emplace(key, std::move(p));
  return ref;
}

uint64_t QuantGemmRunner::prepare(DType dtype, Fp8Scaling scaling, int64_t M, int64_t n, int64_t k) {
  ScopedDevice d(device_);
  check_quant_shape(dtype, n, k);
  if (dtype == DType::INT4 && M <= std::min(int4_gemv_max_m_, kn::kW4GemvMaxM)) return M <= 16 ? 1 : M <= 32 ? 2 : 4;  // the kernel's variant
  const Plan& p = dtype == DType::INT4 ? plan_for(DType::BF16, Fp8Scaling::PerTensor, M, int4_slab_rows(n, k), k, n)
                                       : plan_for(dtype, scaling, M, n, k, n);
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : p.algo.data) h = (h ^ w) * 1099511628211ull;
  return h;
}

void QuantGemmRunner::run(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream) {
  ScopedDevice d(device_);
  if (M <= 0) return;
  switch (w.dtype) {
    case DType::FP8_E4M3: return run_fp8(x, w, y, M, stream);
    case DType::INT8: return run_int8(x, w, y, M, stream);
    case DType::INT4: return run_int4(x, w, y, M, stream);
    default: throw RuntimeError(std::string("QuantGemmRunner: ") + dtype_name(w.dtype) + " is not a quantized format");
  }
}

bool QuantGemmRunner::fuses_act(DType dtype, int64_t M, int64_t n, int64_t k) const {
  if (n % 2 != 0) return false;
  if (dtype == DType::INT8) return kn::dense_gemv_int8_supports(M, n, k);
  if (dtype == DType::INT4) return M <= std::min(int4_gemv_max_m_, kn::kW4GemvMaxM) && kn::w4a16_fuses_act(M, n);
  return false;
}

void QuantGemmRunner::run_gate_up_act(const void* x, const QuantWeight& w, void* scratch, void* act, int64_t M,
                                      cudaStream_t stream) {
  ScopedDevice d(device_);
  if (M <= 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w.codes.get()) |
                         reinterpret_cast<uintptr_t>(act)) & 15) == 0;
  if (aligned && fuses_act(w.dtype, M, w.n, w.k)) {
    if (w.dtype == DType::INT8)
      return kn::dense_gemv_int8(static_cast<const __nv_bfloat16*>(x), w.codes.as<int8_t>(), w.scales.as<float>(),
                                 static_cast<__nv_bfloat16*>(act), M, w.n, w.k, stream, true);
    return run_int4(x, w, act, M, stream, true);
  }
  run(x, w, scratch, M, stream);
  kn::silu_mul(static_cast<const __nv_bfloat16*>(scratch), static_cast<__nv_bfloat16*>(act), M, w.n / 2, stream);
}

void QuantGemmRunner::run_fp8(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream) {
  if (w.scaling == Fp8Scaling::PerTensor) {
    auto* xq = static_cast<uint8_t*>(scratch(0, size_t(M * w.k), stream));
    kn::quantize_fp8_per_tensor(static_cast<const __nv_bfloat16*>(x), xq, M * w.k, w.x_scale.as<float>(), stream);
    return run_fp8_prequantized(xq, w, y, M, stream);
  }
  const QuantizedRows q = quantize_x_rows(x, w.scaling, M, w.k, stream);
  matmul_fp8_scaled(q.codes, q.scales, w.codes.as<uint8_t>(), w.scales.as<float>(), w.scaling, w.n, w.k, y, M, stream);
}

void QuantGemmRunner::run_fp8_channel_groups(const void* x, const int* off_host, const int* off_dev, int groups,
                                             int64_t n, int64_t k, const uint8_t* codes, const float* scales, void* y,
                                             cudaStream_t stream) {
  ScopedDevice d(device_);
  if (groups <= 0 || off_host[groups] <= 0) return;
  check_quant_shape(DType::FP8_E4M3, n, k);
  const int64_t M = off_host[groups];
  const QuantizedRows q = quantize_x_rows(x, Fp8Scaling::PerChannel, M, k, stream);
  auto* padded = static_cast<float*>(scratch(6, size_t(M + 3 * int64_t(groups)) * 4, stream));
  kn::pad_group_scales(q.scales, off_dev, groups, padded, stream);
  int64_t start = 0;  // this group's first padded scale, as pad_group_scales lays them out
  for (int g = 0; g < groups; ++g) {
    const int64_t r0 = off_host[g], rows = off_host[g + 1] - r0;
    if (rows > 0)
      matmul_fp8_scaled(q.codes + r0 * k, padded + start, codes + int64_t(g) * n * k, scales + int64_t(g) * n,
                        Fp8Scaling::PerChannel, n, k, static_cast<__nv_bfloat16*>(y) + r0 * n, rows, stream);
    start += kn::padded_group_rows(rows);
  }
}

void QuantGemmRunner::run_int8_channel_groups(const void* x, const int* off_host, int groups, int64_t n, int64_t k,
                                              const int8_t* codes, const float* scales, void* y, cudaStream_t stream) {
  ScopedDevice d(device_);
  if (groups <= 0 || off_host[groups] <= 0) return;
  check_quant_shape(DType::INT8, n, k);
  const int64_t M = off_host[groups];
  auto* xq = static_cast<int8_t*>(scratch(0, size_t(M * k), stream));
  auto* xs = static_cast<float*>(scratch(1, size_t(M) * 4, stream));
  auto* acc = static_cast<int32_t*>(scratch(2, size_t(M * n) * 4, stream));
  kn::quantize_int8_rows(static_cast<const __nv_bfloat16*>(x), xq, xs, M, k, stream);
  const int32_t alpha = 1, beta = 0;
  for (int g = 0; g < groups; ++g) {
    const int64_t r0 = off_host[g], rows = off_host[g + 1] - r0;
    if (rows <= 0) continue;
    const Plan& p = plan_for(DType::INT8, Fp8Scaling::PerTensor, rows, n, k, n);
    CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, codes + int64_t(g) * n * k, p.a, xq + r0 * k, p.b, &beta,
                                acc + r0 * n, p.c, acc + r0 * n, p.c, &p.algo, workspace_.get(), workspace_.bytes(),
                                stream));
    kn::dequant_int32(acc + r0 * n, xs + r0, scales + int64_t(g) * n, static_cast<__nv_bfloat16*>(y) + r0 * n, rows, n,
                      stream);
  }
}

void QuantGemmRunner::run_4bit_expert_groups(const void* x, const int* off_host, int groups,
                                             const kernels::MoeGemmArgs& e, void* y, cudaStream_t stream) {
  ScopedDevice d(device_);
  const int64_t n = e.n, k = e.k;
  const int64_t rows = int4_slab_rows(n, k);  // whole 128-row multiples, or n: inside the 16-row packing
  const float alpha = 1.0f, beta = 0.0f;
  auto* slab = static_cast<__nv_bfloat16*>(scratch(3, size_t(rows * k) * 2, stream));
  for (int g = 0; g < groups; ++g) {
    const int64_t m0 = off_host[g], M = off_host[g + 1] - m0;
    if (M <= 0) continue;
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t nr = std::min(rows, n - r0);
      if (e.w_mxfp4) kn::moe_mxfp4_dequant(e, g, r0, nr, slab, stream);
      else kn::moe_int4_dequant(e, g, r0, nr, slab, stream);
      const Plan& p = plan_for(DType::BF16, Fp8Scaling::PerTensor, M, nr, k, n);
      const void* xo = static_cast<const __nv_bfloat16*>(x) + m0 * k;
      void* yo = static_cast<__nv_bfloat16*>(y) + m0 * n + r0;
      CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, slab, p.a, xo, p.b, &beta, yo, p.c, yo, p.c, &p.algo,
                                  workspace_.get(), workspace_.bytes(), stream));
    }
  }
}

// Channel- or block-scaled FP8: x quantized per token (or per token and 128 k) into scratch 0, its
// scales into scratch 1 (each scale row padded to 16 bytes, see the top of gemm_quant.hpp).
QuantGemmRunner::QuantizedRows QuantGemmRunner::quantize_x_rows(const void* x, Fp8Scaling scaling, int64_t M,
                                                                int64_t k, cudaStream_t stream) {
  auto* xq = static_cast<uint8_t*>(scratch(0, size_t(M * k), stream));
  const int64_t group = scaling == Fp8Scaling::PerChannel ? k : 128;
  const int64_t ld = (M + 3) / 4 * 4;
  auto* s = static_cast<float*>(scratch(1, size_t(ld * (k / group)) * 4, stream));
  kn::quantize_fp8_rows(static_cast<const __nv_bfloat16*>(x), xq, s, M, k, group, ld, stream,
                        scaling == Fp8Scaling::Block128 && block_x_kmajor_);
  return {xq, s};
}

// One cuBLASLt FP8 matmul; xs and w_scales as `scaling` lays them out (scalars for PerTensor).
void QuantGemmRunner::matmul_fp8_scaled(const uint8_t* xq, const float* xs, const uint8_t* codes,
                                        const float* w_scales, Fp8Scaling scaling, int64_t n, int64_t k, void* y,
                                        int64_t M, cudaStream_t stream) {
  const Plan& p = plan_for(DType::FP8_E4M3, scaling, M, n, k, n);
  const void* ws = w_scales;
  const void* xsp = xs;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof(ws)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xsp, sizeof(xsp)));
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, codes, p.a, xq, p.b, &beta, y, p.c, y, p.c, &p.algo,
                              workspace_.get(), workspace_.bytes(), stream));
}

void QuantGemmRunner::run_fp8_prequantized(const void* xq, const QuantWeight& w, void* y, int64_t M,
                                           cudaStream_t stream) {
  ScopedDevice d(device_);
  if (w.dtype != DType::FP8_E4M3 || w.scaling != Fp8Scaling::PerTensor)
    throw RuntimeError("QuantGemmRunner::run_fp8_prequantized: per-tensor FP8 weights only");
  matmul_fp8_scaled(static_cast<const uint8_t*>(xq), w.x_scale.as<float>(), w.codes.as<uint8_t>(), w.scales.as<float>(),
                    Fp8Scaling::PerTensor, w.n, w.k, y, M, stream);
}

void QuantGemmRunner::run_int8(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream) {
  const int64_t n = w.n, k = w.k;
  // Decode at M <= 2: W8A16, one GEMV kernel reading the int8 bytes (kernels/dense_gemv.hpp) instead of
  // quantize + IMMA + dequantize, which left int8 behind fp8 at batch 1 (Qwen1.5-MoE 2.636 against 2.407 ms,
  // H100, session 25); TensorRT-LLM's int8 weight-only GEMV does the same at small batches.
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w.codes.get()) |
                         reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (aligned && kn::dense_gemv_int8_supports(M, n, k))
    return kn::dense_gemv_int8(static_cast<const __nv_bfloat16*>(x), w.codes.as<int8_t>(), w.scales.as<float>(),
                               static_cast<__nv_bfloat16*>(y), M, n, k, stream);
  auto* xq = static_cast<int8_t*>(scratch(0, size_t(M * k), stream));
  auto* xs = static_cast<float*>(scratch(1, size_t(M) * 4, stream));
  auto* acc = static_cast<int32_t*>(scratch(2, size_t(M * n) * 4, stream));
  kn::quantize_int8_rows(static_cast<const __nv_bfloat16*>(x), xq, xs, M, k, stream);
  const Plan& p = plan_for(DType::INT8, Fp8Scaling::PerTensor, M, n, k, n);
  const int32_t alpha = 1, beta = 0;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w.codes.get(), p.a, xq, p.b, &beta, acc, p.c, acc, p.c, &p.algo,
                              workspace_.get(), workspace_.bytes(), stream));
  kn::dequant_int32(acc, xs, w.scales.as<float>(), static_cast<__nv_bfloat16*>(y), M, n, stream);
}

void QuantGemmRunner::run_int4(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream,
                               bool act) {
  const int64_t n = w.n, k = w.k;
  if (M <= std::min(int4_gemv_max_m_, kn::kW4GemvMaxM)) {
    kn::W4A16Gemm a;
    a.x = static_cast<const __nv_bfloat16*>(x);
    a.w = w.codes.as<uint32_t>();
    a.scales = w.scales.as<__nv_bfloat16>();
    a.y = static_cast<__nv_bfloat16*>(y);
    a.act = act;
    a.M = M;
    a.n = n;
    a.k = k;
    const size_t wsb = kn::w4a16_workspace_bytes(M, n, k, sms_);
    const int slot = kn::w4a16_quantizes_x(M) ? 5 : 4;
    a.workspace = wsb ? static_cast<float*>(scratch(slot, wsb, stream)) : nullptr;  // zeroed when allocated
    return kn::w4a16_gemm(a, sms_, stream);
  }
  // Dequantise a slab of W's rows (= output columns), then y[:, slab] = x slab^T with ldc = n.
  const int64_t rows = int4_slab_rows(n, k);
  auto* slab = static_cast<__nv_bfloat16*>(scratch(3, size_t(rows * k) * 2, stream));
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t nr = std::min(rows, n - r0);
    kn::w4a16_dequant(w.codes.as<uint32_t>(), w.scales.as<__nv_bfloat16>(), slab, r0, nr, k, stream);
    const Plan& p = plan_for(DType::BF16, Fp8Scaling::PerTensor, M, nr, k, n);
    void* yo = static_cast<__nv_bfloat16*>(y) + r0;
    CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, slab, p.a, x, p.b, &beta, yo, p.c, yo, p.c, &p.algo,
                                workspace_.get(), workspace_.bytes(), stream));
  }
}

}  // namespace peerplan::gpu
