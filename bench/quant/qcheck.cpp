// The issue-15 self-test cases (profiler/exec/self_test_quant.cpp) for the stand-alone bench, so
// one bench binary checks the kernels it times: prints each case and returns the failures.
#include <cstdio>
#include <random>

#include <cuda_runtime.h>

#include "profiler/exec/self_test_util.hpp"
#include "profiler/kernels/attention.hpp"

// The stand-alone bench links no cuDNN (prefill_dispatch.cpp): its prefill calls take the
// executor's own kernel (an FP8 KV cache always does; prefill_attention.cu asks cuDNN only for
// bf16 caches).
namespace peerplan::kernels {
bool prefill_attention_cudnn(const PrefillAttention&, cudaStream_t) { return false; }
std::string prefill_attention_last_path() { return "own kernel (the quant bench links no cuDNN)"; }
AttentionPath prefill_attention_path(bool kv_fp8) {
  AttentionPath p;
  p.kv_fp8 = kv_fp8;
  p.cudnn = false;
  p.no_cudnn_why = "the quant bench links no cuDNN";
  return p;
}
}  // namespace peerplan::kernels

int run_quant_selftest(int dev, unsigned long long seed) {
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  std::mt19937_64 rng(seed);
  std::vector<peerplan::SelfTestResult> out;
  peerplan::exec::selftest::quant_cases(out, dev, sms, rng);
  std::vector<peerplan::SelfTestResult> probe;
  peerplan::exec::selftest::fp8_block_layout_probe(probe, dev, rng);
  for (const auto& r : probe)
    std::printf("probe %-40s rel_err %.2e (%s)\n", r.kernel.c_str(), r.rel_error, r.pass() ? "this order" : "not it");
  int failed = 0;
  for (const auto& r : out) {
    std::printf("%s %-26s %-44s rel_err %.2e (tol %.0e)\n", r.pass() ? "PASS" : "FAIL", r.kernel.c_str(),
                r.shape.c_str(), r.rel_error, r.tolerance);
    failed += !r.pass();
  }
  return failed;
}
