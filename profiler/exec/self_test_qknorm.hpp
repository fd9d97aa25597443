#pragma once
// Kernel self-test cases of Qwen3's per-head QK-norm (issue 23; profiler/kernels/qk_norm.hpp)
// against an fp64 CPU reference: self_test_qknorm.cpp. Internal to profiler/exec.
#include <random>
#include <vector>

#include "planner/validate/gpu_backend.hpp"

namespace peerplan::exec::selftest {

// Qwen3-8B's and Qwen3-30B-A3B's head shards (head_dim 128), head_dims 64, 80, 96 and 256, a grid
// whose last block is partly idle, and one run captured in a CUDA graph and replayed. Each case
// checks the whole qkv row: q and k heads normalised, v untouched.
void qk_norm_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng);

}  // namespace peerplan::exec::selftest
