#include "profiler/gpu/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "profiler/common/pdl_switch.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/elementwise.hpp"

namespace peerplan::gpu {

// Descriptors and the chosen algorithm of one shape. Owned here so their lifetime is the runner's.
struct GemmRunner::Plan {
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

GemmRunner::GemmRunner(int device, size_t ws) : device_(device), handle_(device), workspace_(device, ws) {}
GemmRunner::~GemmRunner() = default;
GemmRunner::GemmRunner(GemmRunner&&) noexcept = default;
GemmRunner& GemmRunner::operator=(GemmRunner&&) noexcept = default;

std::unique_ptr<GemmRunner::Plan> GemmRunner::describe(int64_t M, int64_t n, int64_t k, int64_t batch) const {
  auto p = std::make_unique<Plan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // A = W: stored k x n column-major (ld k), used transposed -> n x k.
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, uint64_t(k), uint64_t(n), k));
  // B = x: k x M column-major (ld k).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, uint64_t(k), uint64_t(M), k));
  // C = y: n x M column-major (ld n).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, uint64_t(n), uint64_t(M), n));
  if (batch > 1) {  // one strided-batched call: each matrix's products packed back to back
    const int32_t count = int32_t(batch);
    const int64_t stride_a = n * k, stride_b = M * k, stride_c = M * n;
    for (auto [layout, stride] : {std::pair{p->a, stride_a}, std::pair{p->b, stride_b}, std::pair{p->c, stride_c}}) {
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  return p;
}

const GemmRunner::Plan& GemmRunner::plan_for(int64_t M, int64_t n, int64_t k, int64_t batch, uint32_t align) {
  auto key = std::make_tuple(M, n, k, batch, align);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  std::unique_ptr<Plan> p = describe(M, n, k, batch);

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = workspace_.bytes();
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (align < 256)
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  CUBLAS_CHECK(st);
  if (found == 0)
    throw CublasError("cuBLAS", "cublasLtMatmulAlgoGetHeuristic", "no algorithm", 0, device_,
                      "cuBLASLt found no bf16 algorithm for y[" + std::to_string(M) + "," + std::to_string(n) +
                          "] = x[" + std::to_string(M) + "," + std::to_string(k) + "] W^T (batch " +
                          std::to_string(batch) + ") on device " + std::to_string(device_));
  p->algo = res.algo;
  auto& ref = *p;
  plans_.emplace(key, std::move(p));
  return ref;
}

uint64_t GemmRunner::prepare(int64_t M, int64_t n, int64_t k, int64_t batch) {
  ScopedDevice d(device_);
  const Plan& p = plan_for(M, n, k, std::max<int64_t>(1, batch));
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the opaque algorithm words
  for (uint64_t w : p.algo.data) h = (h ^ w) * 1099511628211ull;
  return h;
}

const GemmRunner::Plan& GemmRunner::plan_for_any_m(int64_t M, int64_t n, int64_t k, uint32_t align) {
  auto key = std::make_tuple(M, n, k, align);
  auto it = any_m_.find(key);
  if (it != any_m_.end()) return *it->second;
  int64_t bucket = 64;
  while (bucket < M) bucket *= 2;
  const Plan& ref = plan_for(bucket, n, k, 1, align);  // the one heuristic query of the bucket
  std::unique_ptr<Plan> p = describe(M, n, k, 1);
  p->algo = ref.algo;
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t st = cublasLtMatmulAlgoCheck(handle_, p->op, p->a, p->b, p->c, p->c, &p->algo, &check);
  if (st != CUBLAS_STATUS_SUCCESS || check.workspaceSize > workspace_.bytes())
    p->algo = plan_for(M, n, k, 1, align).algo;  // this M's own lookup (checked there)
  auto& out = *p;
  any_m_.emplace(key, std::move(p));
  return out;
}

void GemmRunner::run_any_m(const void* x, const void* w, void* y, int64_t M, int64_t n, int64_t k, cudaStream_t stream) {
  ScopedDevice d(device_);
  uint32_t align = 256;  // the largest power of two (at most 256) dividing every operand's address
  for (const void* ptr : {x, w, static_cast<const void*>(y)}) {
    const auto a = reinterpret_cast<uintptr_t>(ptr);
    if (a) align = uint32_t(std::min<uintptr_t>(align, a & (~a + 1)));
  }
  const Plan& p = plan_for_any_m(M, n, k, align);
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                              workspace_.get(), workspace_.bytes(), stream));
}

void GemmRunner::run(const void* x, const void* w, void* y, int64_t M, int64_t n, int64_t k, cudaStream_t stream,
                     int64_t batch) {
  ScopedDevice d(device_);
  // With PDL on (the default; PEERPLAN_PDL=0 off) a decode GEMV joins the programmatic launch chain (kernels/dense_gemv.hpp):
  // cuBLASLt's kernels would break it at every projection.
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  // Small matrices at 3-8 tokens too (routers, gates, MLA's kv_a: cuBLASLt's 4-6 us floor; common/gemv_rule.hpp).
  const int mode = kernels::small_gemv_mode();
  const bool small = mode != kernels::kSmallGemvOff &&
                     kernels::dense_gemv_small_supports(M, n, k, mode == kernels::kSmallGemvAll);
  if (batch == 1 && kernels::pdl::enabled() && aligned && (kernels::dense_gemv_supports(M, n, k) || small)) {
    kernels::dense_gemv(static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                        static_cast<__nv_bfloat16*>(y), M, n, k, stream);
    return;
  }
  const Plan& p = plan_for(M, n, k, std::max<int64_t>(1, batch));
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                              workspace_.get(), workspace_.bytes(), stream));
}

bool GemmRunner::fuses_act(int64_t M, int64_t n, int64_t k) const {
  return kernels::pdl::enabled() && kernels::dense_gemv_supports(M, n, k) && n % 2 == 0;
}

void GemmRunner::run_gate_up_act(const void* x, const void* w, void* scratch, void* act, int64_t M, int64_t n,
                                 int64_t k, cudaStream_t stream) {
  ScopedDevice d(device_);
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(act)) & 15) == 0;
  if (aligned && fuses_act(M, n, k))
    return kernels::dense_gemv(static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                               static_cast<__nv_bfloat16*>(act), M, n, k, stream, true);
  run(x, w, scratch, M, n, k, stream);
  kernels::silu_mul(static_cast<const __nv_bfloat16*>(scratch), static_cast<__nv_bfloat16*>(act), M, n / 2, stream);
}

}  // namespace peerplan::gpu
