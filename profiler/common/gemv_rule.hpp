#pragma once
// Which decode GEMMs take the bf16 GEMV (kernels/dense_gemv.hpp) rather than cuBLASLt: host-only, so the rule is
// tested on CPU (tests/profiler/gemv_rule_test.cpp).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "planner/core/error.hpp"

namespace peerplan::kernels {

inline constexpr int64_t kDenseGemvMaxM = 2;

// M in [1, kDenseGemvMaxM], k a positive multiple of 8, n positive with its blocks of 4 rows within
// the grid's x limit (pointers 16-byte aligned).
inline bool dense_gemv_supports(int64_t M, int64_t n, int64_t k) {
  return M >= 1 && M <= kDenseGemvMaxM && n > 0 && (n + 3) / 4 <= int64_t(0x7fffffff) && k > 0 && k % 8 == 0;
}

// Small matrices at M 3..8 take the GEMV too: the MoE routers, Qwen-MoE's shared-expert gate and MLA's kv_a, where
// cuBLASLt's kernels cost 4-6 us whatever the bytes (one H100, session 32 R: gpt-oss-20b's 32 x 2880 router 2.36 us
// at M = 2 on this GEMV, 5.75 at M = 4 on cuBLASLt; Qwen1.5-MoE's 60 x 2048 router 1.81 -> 6.07). Up to 1024 rows and
// 4 Mi weights (8 MiB): there a GEMV is a few waves of its ramp, where larger matrices at M >= 3 stream near the
// HBM rate on cuBLASLt. PEERPLAN_SMALL_GEMV=0 keeps them on cuBLASLt, =all runs every matrix at M 3..8 on the GEMV
// (both A/B settings, to measure the rule; a profile prices the default). `all` measured (one H100, session 33 W, two
// rounds): a few 2048-row GEMMs gain at 4 tokens (2048 x 1408 5.06 -> 4.38 us) but every decode step loses at 4 and 8
// (Llama-3.1-8B 6.38 -> 6.48 and 6.66 -> 9.74 ms, Qwen1.5-MoE 4.11 -> 4.25 and 6.13 -> 6.93, gpt-oss-20b 4.86 -> 4.97
// and 6.62 -> 7.45): past ~2 tokens a large matrix is instruction-bound on the GEMV. So the rule stays as it is.
inline constexpr int64_t kSmallGemvMaxM = 8, kSmallGemvMaxN = 1024, kSmallGemvMaxWeights = int64_t(1) << 22;
inline constexpr int kSmallGemvOff = 0, kSmallGemvRule = 1, kSmallGemvAll = 2;
inline int small_gemv_parse_env(const char* v) {
  if (!v || !*v || std::string(v) == "1") return kSmallGemvRule;
  if (std::string(v) == "0") return kSmallGemvOff;
  if (std::string(v) == "all") return kSmallGemvAll;
  throw RuntimeError("PEERPLAN_SMALL_GEMV=" + std::string(v) + ": expected 0, 1 or all (the decode GEMV at 3-8 tokens: "
                     "1 for matrices of at most 1024 rows (the default), all for every matrix, 0 never)");
}
inline int small_gemv_mode() {
  static const int mode = small_gemv_parse_env(std::getenv("PEERPLAN_SMALL_GEMV"));
  return mode;
}
inline bool small_gemv_enabled() { return small_gemv_mode() != kSmallGemvOff; }
// What the kernel can run (any matrix at up to kSmallGemvMaxM tokens; the activation epilogue at M <= 2 only).
inline bool dense_gemv_kernel_supports(int64_t M, int64_t n, int64_t k) {
  return M >= 1 && M <= kSmallGemvMaxM && n > 0 && (n + 3) / 4 <= int64_t(0x7fffffff) && k > 0 && k % 8 == 0;
}
// Where the rule takes it at M 3..8 (`all`: every matrix the kernel runs).
inline bool dense_gemv_small_supports(int64_t M, int64_t n, int64_t k, bool all = false) {
  return M > kDenseGemvMaxM && dense_gemv_kernel_supports(M, n, k) &&
         (all || (n <= kSmallGemvMaxN && n * k <= kSmallGemvMaxWeights));
}

}  // namespace peerplan::kernels
