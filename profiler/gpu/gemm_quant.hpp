#pragma once
// Quantized-weight GEMMs of peerplan (issue 15): the executor runs them and the profiler times
// them through this one runner, as gemm.hpp does for bf16.
//
//   y[M, n] = x[M, k] . W^T      x, y bf16 row-major; W [n, k] in its stored format with scales
//
// FP8 (W8A8, e4m3): x is quantized to e4m3 first (a kernel of its own, included in the time),
// then one cuBLASLt FP8 matmul, fp32 accumulation, bf16 out. Scalings (cuBLASLt 12.9+, all on
// Hopper sm_90; cuBLAS 12.9 release notes and NVIDIA's "Boosting Matrix Multiplication Speed and
// Flexibility with cuBLAS 12.9": channel- and block-scaled FP8 on Hopper):
//   PerTensor  one scale for W, one static scale for x (SCALAR_32F), torch._scaled_mm's default
//   PerChannel one scale per output channel of W, one dynamic scale per token of x (OUTER_VEC_32F)
//   Block128   one scale per 128x128 block of W (BLK128x128_32F), one per token and 128 k of x
//              (VEC128_32F): DeepSeek-V3 / Qwen3-FP8 checkpoints ("weight_block_size": [128, 128])
// Scale orders cuBLASLt 13.0 reads on Hopper (the self-test's probe of all four, H200 2026-12-03):
// W's 128x128 block (nb, kb) at nb * ceil(k/128) + kb (row-major [n/128][k/128], as DeepSeek-V3's
// weight_scale_inv is stored), x's group (m, kb) at kb * M + m (M-major); each scale row padded to a
// multiple of 4 floats (16 bytes): W's leading dimension fp8_block_scale_ld(k), x's round_up(M, 4)
// (a k of 3 blocks failed unpadded, H200 2026-12-03, while 4 blocks passed).
// INT8 (W8A8): x quantized per token (dynamic), cuBLASLt int8 x int8 -> int32 (IMMA), then an
// epilogue kernel y = acc * x_scale[m] * w_scale[n] in bf16 (per-channel weight scales).
// INT4 (W4A16): profiler/kernels/w4a16.hpp; M <= 64 runs its tensor-core GEMV, larger M
// dequantises W to bf16 in slabs of columns (64 MiB of scratch) and runs cuBLASLt bf16 on each.
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "planner/core/dtype.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/raii.hpp"

namespace peerplan::kernels {
struct MoeGemmArgs;
}

namespace peerplan::gpu {

enum class Fp8Scaling { PerTensor, PerChannel, Block128 };
const char* to_string(Fp8Scaling s);

// One quantized weight matrix on one device: codes and scales in the formats above.
struct QuantWeight {
  DType dtype = DType::FP8_E4M3;  // FP8_E4M3, INT8 or INT4
  Fp8Scaling scaling = Fp8Scaling::PerTensor;  // FP8 only
  int64_t n = 0, k = 0;
  DeviceBuffer codes;   // fp8 / int8: [n][k] bytes; int4 / mxfp4: n*k/8 uint32 (int4: kernels::w4a16_layout() order;
                        // mxfp4, routed experts only: mxfp4_expert_layout.hpp)
  DeviceBuffer scales;  // fp32 (fp8: 1, n or ceil(k/128)*ceil(n/128); int8: n); int4: bf16 [n][k/128]; mxfp4: e8m0
                        // bytes [n][k/32]
  DeviceBuffer x_scale;  // fp32 static activation scale (FP8 PerTensor)
};
// Bytes of the stored weight (codes + scales) in that format: what a GEMM streams at decode.
size_t quant_weight_bytes(DType dtype, Fp8Scaling scaling, int64_t n, int64_t k);
// Floats per row of W's 128x128 block scales (ceil(k/128) rounded up to 4) and their count.
int64_t fp8_block_scale_ld(int64_t k);
int64_t fp8_block_scale_count(int64_t n, int64_t k);
// Synthetic weights of the format (random codes, scales around 1/64), on `stream`.
QuantWeight make_random_quant_weight(int device, DType dtype, Fp8Scaling scaling, int64_t n, int64_t k, uint64_t seed,
                                     cudaStream_t stream);
// Throws InputError-like RuntimeError naming the shape when the format cannot run it (k, n
// multiples of 16 for FP8/INT8; k of 128 and n of 8 for INT4).
void check_quant_shape(DType dtype, int64_t n, int64_t k);

class QuantGemmRunner {
 public:
  explicit QuantGemmRunner(int device, size_t workspace_bytes = kGemmWorkspaceBytes);
  ~QuantGemmRunner();
  QuantGemmRunner(QuantGemmRunner&&) noexcept;
  QuantGemmRunner& operator=(QuantGemmRunner&&) noexcept;

  // Enqueues y = x W^T on `stream`. x, y: bf16 device pointers. Scratch (quantized x, scales, the
  // int32 accumulator, the int4 dequant slab) grows on first use of a larger shape, so run each
  // shape once before capturing it into a CUDA graph (the engine does).
  void run(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream);
  // A gated MLP's gate_up with its activation, as GemmRunner::run_gate_up_act: fused into the epilogue of
  // the int8 GEMV (M <= 2) or of W4A16 v7 (M <= 2) where fuses_act, else run() into `scratch` and silu_mul.
  bool fuses_act(DType dtype, int64_t M, int64_t n, int64_t k) const;
  void run_gate_up_act(const void* x, const QuantWeight& w, void* scratch, void* act, int64_t M, cudaStream_t stream);
  // Looks up (and caches) the cuBLASLt algorithm of the shape; returns a fingerprint of the kernel
  // configuration (equal fingerprints of one (n, k) share a kernel), as GemmRunner::prepare.
  uint64_t prepare(DType dtype, Fp8Scaling scaling, int64_t M, int64_t n, int64_t k);
  // FP8 per-tensor with x already e4m3 codes at w.x_scale (an engine that fuses the quantization
  // into the kernel before, as vLLM's fused RMSNorm-quant): the matmul alone. bench/quant uses it
  // beside run() to show what the separate quantize kernel costs.
  void run_fp8_prequantized(const void* xq, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream);
  // FP8 per-channel W8A8 of consecutive row groups against weights of their own, as a grouped GEMM's
  // experts on kernels/moe_expert_gemm.hpp's cuBLAS path: rows [off[g], off[g+1]) of x times group g's
  // [n][k] codes (codes + g n k) with its n channel scales (scales + g n), into the same rows of y.
  // x's rows are quantized per token once (one kernel, as an engine quantizes a fused-MoE input once),
  // their scales re-laid so each group's start is 16-byte aligned (kernels::pad_group_scales), then
  // one cuBLASLt FP8 matmul per non-empty group. off_host and off_dev: the groups + 1 offsets (off[0]
  // = 0) on the host and on the device.
  void run_fp8_channel_groups(const void* x, const int* off_host, const int* off_dev, int groups, int64_t n,
                              int64_t k, const uint8_t* codes, const float* scales, void* y, cudaStream_t stream);
  // int8 experts, the same groups, W8A8 as the dense int8 GEMM: x's rows quantized per token once, then
  // per non-empty group one cuBLASLt int8 matmul (IMMA, int32 out) and its dequantisation with the
  // group's channel scales (scales + g n) into the same rows of y.
  void run_int8_channel_groups(const void* x, const int* off_host, int groups, int64_t n, int64_t k,
                               const int8_t* codes, const float* scales, void* y, cudaStream_t stream);
  // int4 (W4A16) or MXFP4 experts (experts.w_int4 or w_mxfp4), the same groups: each non-empty group's
  // expert dequantized to bf16 in slabs of its rows (64 MiB of scratch, kernels::moe_int4_dequant or
  // moe_mxfp4_dequant), then a cuBLASLt bf16 matmul per slab into its columns of y (ldc = n): what the
  // dense int4 path does past its GEMV sizes, per expert. `experts`: the grouped GEMM's arguments (the
  // codes and scales, n, k); x [off[groups]][k], y [off[groups]][n].
  void run_4bit_expert_groups(const void* x, const int* off_host, int groups, const kernels::MoeGemmArgs& experts,
                              void* y, cudaStream_t stream);
  // Largest M that runs the W4A16 GEMV kernel (default kernels::kW4GemvMaxM); larger M dequantise
  // + cuBLASLt. A bench sets it to time both paths at the same M.
  void set_int4_gemv_max_m(int64_t m) { int4_gemv_max_m_ = m; }
  int64_t int4_gemv_max_m() const { return int4_gemv_max_m_; }
  // Storage order of the FP8 128x128 block scales (W) and 1x128 group scales (x): outer-dimension
  // major (false) or k-major (true). Default: W k-major, x outer-major, the order cuBLASLt reads
  // (the self-test's probe tries all four when a block-scaled case fails).
  void set_block_scale_layout(bool w_kmajor, bool x_kmajor) { block_w_kmajor_ = w_kmajor, block_x_kmajor_ = x_kmajor; }
  bool block_w_kmajor() const { return block_w_kmajor_; }
  int device() const { return device_; }
  int sm_count() const { return sms_; }

 private:
  struct Plan;
  // ldc: the output's row stride (n, or the whole matrix's n for an int4 slab's bf16 GEMM).
  const Plan& plan_for(DType dtype, Fp8Scaling scaling, int64_t M, int64_t n, int64_t k, int64_t ldc);
  void* scratch(int which, size_t bytes, cudaStream_t stream);
  void run_fp8(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream);
  // x quantized as `scaling` asks (per token, or per token and 128 k) into scratch: codes and scales.
  struct QuantizedRows {
    const uint8_t* codes;
    const float* scales;
  };
  QuantizedRows quantize_x_rows(const void* x, Fp8Scaling scaling, int64_t M, int64_t k, cudaStream_t stream);
  // One FP8 matmul of M quantized rows (xq, x scales xs) against codes / w_scales.
  void matmul_fp8_scaled(const uint8_t* xq, const float* xs, const uint8_t* codes, const float* w_scales,
                         Fp8Scaling scaling, int64_t n, int64_t k, void* y, int64_t M, cudaStream_t stream);
  void run_int8(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream);
  void run_int4(const void* x, const QuantWeight& w, void* y, int64_t M, cudaStream_t stream, bool act = false);
  int device_ = -1;
  int sms_ = 132;
  int64_t int4_gemv_max_m_ = 32;  // GEMV kernel up to here (H200 2026-12-02: even with dequant + cuBLASLt at 64)
  bool block_w_kmajor_ = true, block_x_kmajor_ = false;  // measured: see the top of this file
  CublasLtHandle handle_;
  DeviceBuffer workspace_;
  // 0: quantized x, 1: x scales, 2: int32 acc, 3: int4 bf16 slab, 4: int4 split-K (v1..v6: one slice
  // per split, written whole), 5: int4 split-K of v7 (summed by atomics: zero between calls, so no
  // other kernel may share it), 6: x scales padded per row group (run_fp8_channel_groups).
  DeviceBuffer scratch_[7];
  std::vector<DeviceBuffer> retired_;  // outgrown scratch that captured graphs may still use
  std::map<std::tuple<int, int, int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
};

}  // namespace peerplan::gpu
