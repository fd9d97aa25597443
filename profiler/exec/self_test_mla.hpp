#pragma once
// Kernel self-test cases of multi-head latent attention (DeepSeek-V2/V3, Kimi K2; issues 14, 23;
// profiler/kernels/mla.hpp) against fp64 CPU references: self_test_mla.cpp. Internal to profiler/exec.
#include <random>
#include <vector>

#include "planner/validate/gpu_backend.hpp"

namespace peerplan::exec::selftest {

// The absorbed decode attention (batch 1 at contexts 1, 37, 1024, 9000; a mixed batch of 8 over a
// slot table; heads 16, 32, 64, 128 with every head tile, 8 and 40 (partly empty head groups); a
// prefill chunk run as decode rows of one
// slot; a large batch without split-K; one capture in a CUDA graph replayed, then replayed again
// after the contexts grew), the cache write + rope (plain rope and DeepSeek-V2-Lite's YaRN, a kv row
// inside a fused projection row, positions near 160k, no query, 192-wide q_b heads, a graph
// replay), MLA prefill by expansion through prefill_attention at head_dim 192, and the YaRN host
// helpers against their closed forms. PEERPLAN_SELFTEST_ONLY=mla runs these alone.
void mla_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng);

}  // namespace peerplan::exec::selftest
