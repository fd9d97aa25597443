#pragma once
// THE bf16 GEMM of peerplan: the executor runs it and the profiler times it, through this one
// function, so the cost model's compute figures are of the very call the executor makes
// (same cuBLASLt algorithm choice, same layouts, same workspace).
//
//   y[M, n] = x[M, k] . W^T      x, y row-major; W stored [n, k] row-major (PyTorch Linear layout)
//   bf16 inputs and output, fp32 accumulation (CUBLAS_COMPUTE_32F), no bias, alpha 1, beta 0.
//
// In cuBLAS's column-major terms this is C(n x M) = op(A) B with A = W (k x n, transposed) and
// B = x (k x M): the "TN" layout, cuBLASLt's best-served case. The algorithm is the heuristic's
// first choice for (M, n, k) with the given workspace, looked up once per shape and cached.
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "profiler/gpu/raii.hpp"

namespace peerplan::gpu {

inline constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;  // cuBLAS's recommendation for Hopper

class GemmRunner {
 public:
  explicit GemmRunner(int device, size_t workspace_bytes = kGemmWorkspaceBytes);
  ~GemmRunner();
  GemmRunner(GemmRunner&&) noexcept;
  GemmRunner& operator=(GemmRunner&&) noexcept;

  // Enqueues y = x W^T on `stream` (which must belong to this runner's device). Pointers are bf16
  // device pointers (__nv_bfloat16*), 16-byte aligned. Throws GpuError (cuBLAS status, shape).
  // batch > 1: `batch` independent products in ONE strided-batched call (torch.bmm's; MLA's
  // absorbed per-head W_UK / W_UV products): product e reads x + e*M*k and w + e*n*k, writes
  // y + e*M*n.
  void run(const void* x, const void* w, void* y, int64_t M, int64_t n, int64_t k, cudaStream_t stream,
           int64_t batch = 1);
  // A gated MLP's gate_up ([gate; up], n = 2 x inter) with its activation: act [M][n / 2] = SiLU(x gate^T) *
  // (x up^T). Where fuses_act, one GEMV whose epilogue applies it (kernels::dense_gemv's act: the
  // compiler then emits no activation op, planner/compile/act_fusion.hpp); else run() into `scratch`
  // ([M][n]) and kernels::silu_mul from it. Same bits either way.
  bool fuses_act(int64_t M, int64_t n, int64_t k) const;
  void run_gate_up_act(const void* x, const void* w, void* scratch, void* act, int64_t M, int64_t n, int64_t k,
                       cudaStream_t stream);
  // Looks up and caches the algorithm of a shape without running it (an engine's start-up warm-up:
  // the heuristic query then never lands on the critical path of a serving iteration). Returns a
  // fingerprint of the chosen algorithm's configuration: shapes of one (n, k) with equal
  // fingerprints run the same kernel, so running one of them loads it for all.
  uint64_t prepare(int64_t M, int64_t n, int64_t k, int64_t batch = 1);
  // run() for row counts that keep changing (a routed expert's rows, issue 14): the algorithm is
  // looked up once per bucket of M (the next power of two, at least 64) and reused for every M in
  // it after cublasLtMatmulAlgoCheck accepts it (else M gets its own lookup). A heuristic query
  // costs ~0.2 ms: per expert, per layer and per new row count it would outweigh the GEMMs.
  // Operands less than 256-byte aligned (an expert's rows at an offset of rows x k elements) get an
  // algorithm chosen for their alignment (cuBLASLt's heuristic otherwise assumes 256 bytes).
  void run_any_m(const void* x, const void* w, void* y, int64_t M, int64_t n, int64_t k, cudaStream_t stream);
  int device() const { return device_; }

 private:
  struct Plan;
  const Plan& plan_for(int64_t M, int64_t n, int64_t k, int64_t batch, uint32_t align = 256);
  const Plan& plan_for_any_m(int64_t M, int64_t n, int64_t k, uint32_t align);
  std::unique_ptr<Plan> describe(int64_t M, int64_t n, int64_t k, int64_t batch) const;  // descriptors, no algorithm
  int device_ = -1;
  CublasLtHandle handle_;
  DeviceBuffer workspace_;
  // (M, n, k, batch, operands' alignment in bytes, at most 256)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, uint32_t>, std::unique_ptr<Plan>> plans_;
  std::map<std::tuple<int64_t, int64_t, int64_t, uint32_t>, std::unique_ptr<Plan>> any_m_;  // run_any_m's
};

}  // namespace peerplan::gpu
