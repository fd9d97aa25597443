// When the executor's routed-expert GEMM runs cuBLASLt per expert (profiler/common/moe_cublas_rule.hpp):
// eager calls only, the tiled kernel's range only, by the mean FLOPs per touched expert against the
// threshold, PEERPLAN_MOE_CUBLAS_MIN_GFLOP overriding it. The S3 shapes (H200, 2026-12-04) the default
// was read from must fall on the side where they measured faster.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "planner/core/error.hpp"
#include "profiler/common/moe_cublas_rule.hpp"

using namespace peerplan;
using namespace peerplan::kernels;

namespace {

// Sets (or unsets, value nullptr) the variable for one test and restores it after.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvGuard() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

constexpr const char* kVar = "PEERPLAN_MOE_CUBLAS_MIN_GFLOP";

MoeExpertLoad load(int64_t rows, int64_t touched, int64_t max_rows, int64_t n, int64_t k) {
  return MoeExpertLoad{rows, touched, max_rows, n, k};
}

}  // namespace

TEST(MoeCublasRule, S3ShapesFallWhereTheyMeasuredFaster) {
  EnvGuard env(kVar, nullptr);
  EXPECT_DOUBLE_EQ(moe_cublas_min_gflop(), kMoeCublasMinGflop);
  // Mixtral (8 experts): every prefill group from 256 tokens (64 rows per expert) was 1.4-3x faster
  // in cuBLAS, gate_up (n 28672, k 4096) and down (n 4096, k 14336).
  EXPECT_TRUE(moe_use_cublas(load(512, 8, 77, 28672, 4096), true));
  EXPECT_TRUE(moe_use_cublas(load(512, 8, 77, 4096, 14336), true));
  EXPECT_TRUE(moe_use_cublas(load(4096, 8, 560, 28672, 4096), true));
  // Qwen1.5-MoE (60 experts): gate_up (n 2816, k 2048) ours up to 2048 tokens (8192 rows: 447 vs
  // 533 us), cuBLAS from 4096 (16384 rows: 774 vs 646); down (n 2048, k 1408) even at 4096 tokens.
  EXPECT_FALSE(moe_use_cublas(load(8192, 60, 180, 2816, 2048), true));
  EXPECT_TRUE(moe_use_cublas(load(16384, 60, 330, 2816, 2048), true));
  EXPECT_FALSE(moe_use_cublas(load(16384, 60, 330, 2048, 1408), true));
  EXPECT_TRUE(moe_use_cublas(load(32768, 60, 620, 2048, 1408), true));
  EXPECT_NEAR(moe_gflop_per_expert(load(8192, 60, 180, 2816, 2048)), 1.575, 0.01);
}

TEST(MoeCublasRule, NeverInGraphsNorOnStreamKernelSizesNorOffAlignment) {
  EnvGuard env(kVar, nullptr);
  EXPECT_FALSE(moe_use_cublas(load(4096, 8, 560, 28672, 4096), false));  // capturing: never
  // Mixtral at 64 tokens: 16 rows per expert (3.8 GFLOP) but the busiest holds 21: the stream kernel.
  EXPECT_FALSE(moe_use_cublas(load(128, 8, 21, 28672, 4096), true));
  EXPECT_TRUE(moe_use_cublas(load(128, 8, 40, 28672, 4096), true));
  EXPECT_TRUE(moe_use_cublas(load(128, 8, 0, 28672, 4096), true));  // busiest unknown: the tiled kernel's range
  // n or k off 128: each expert's rows would start off cuBLASLt's 256-byte alignment.
  EXPECT_FALSE(moe_use_cublas(load(16384, 8, 2100, 4096, 7100), true));
  EXPECT_FALSE(moe_use_cublas(load(16384, 8, 2100, 4160, 7168), true));
  EXPECT_FALSE(moe_use_cublas(load(0, 0, 0, 4096, 4096), true));
}

TEST(MoeCublasRule, ThresholdFromTheCallerOrTheEnvironment) {
  {
    EnvGuard env(kVar, "0");
    EXPECT_DOUBLE_EQ(moe_cublas_min_gflop(), 0);
    EXPECT_TRUE(moe_use_cublas(load(5, 5, 1, 256, 384), true));  // 0: always when eager, any rows
    EXPECT_FALSE(moe_use_cublas(load(5, 5, 1, 256, 384), false));
    EXPECT_FALSE(moe_use_cublas(load(5, 5, 1, 200, 384), true));  // alignment still holds
    EXPECT_NE(moe_cublas_rule_text().find("always"), std::string::npos);
  }
  {
    EnvGuard env(kVar, "1e30");
    EXPECT_FALSE(moe_use_cublas(load(16384, 8, 2100, 28672, 4096), true));  // never
    EXPECT_TRUE(moe_use_cublas(load(16384, 8, 2100, 28672, 4096), true, 1.0));  // the caller's own threshold wins
  }
  {
    EnvGuard env(kVar, "1.5");
    EXPECT_TRUE(moe_use_cublas(load(8192, 60, 180, 2816, 2048), true));  // 1.575 GFLOP
    EXPECT_NE(moe_cublas_rule_text().find(">= 1.5 GFLOP"), std::string::npos);
  }
  for (const char* bad : {"abc", "-1", "2x", "nan", "inf"}) {
    EnvGuard env(kVar, bad);
    EXPECT_THROW(moe_cublas_min_gflop(), InputError) << bad;
  }
  EnvGuard env(kVar, "");
  EXPECT_DOUBLE_EQ(moe_cublas_min_gflop(), kMoeCublasMinGflop);  // empty: the default
}
