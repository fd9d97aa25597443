// Which decode GEMMs take the bf16 GEMV rather than cuBLASLt (profiler/common/gemv_rule.hpp): every matrix at 1-2
// tokens; at 3-8 tokens only small ones (MoE routers, Qwen-MoE's shared-expert gate, MLA's kv_a), where cuBLASLt's
// kernels cost 4-6 us whatever the bytes; PEERPLAN_SMALL_GEMV=0 turns the second rule off.
#include <gtest/gtest.h>

#include <string>

#include "planner/core/error.hpp"
#include "profiler/common/gemv_rule.hpp"

namespace kn = peerplan::kernels;

TEST(GemvRule, AnyMatrixAtOneOrTwoTokens) {
  EXPECT_TRUE(kn::dense_gemv_supports(1, 128256, 4096)) << "an LM head";
  EXPECT_TRUE(kn::dense_gemv_supports(2, 4096, 14336));
  EXPECT_FALSE(kn::dense_gemv_supports(3, 60, 2048)) << "the first rule stops at 2";
  EXPECT_FALSE(kn::dense_gemv_supports(1, 64, 2044)) << "k must be a multiple of 8 (16-byte loads)";
}

TEST(GemvRule, SmallMatricesAtThreeToEightTokens) {
  // Routers (gpt-oss-20b / -120b, Qwen1.5-MoE, DeepSeek-V2-Lite, Mixtral), Qwen's shared-expert gate, MLA's kv_a.
  for (auto [n, k] : {std::pair{32, 2880}, {128, 2880}, {60, 2048}, {64, 2048}, {8, 4096}, {1, 2048}, {576, 2048}})
    for (int m = 3; m <= 8; ++m) EXPECT_TRUE(kn::dense_gemv_small_supports(m, n, k)) << n << " x " << k << " M " << m;
  EXPECT_TRUE(kn::dense_gemv_small_supports(8, 1024, 4096)) << "the largest it takes: 1024 rows, 4 Mi weights";
}

TEST(GemvRule, LargeMatricesAndOtherTokenCountsStayOnCublas) {
  EXPECT_FALSE(kn::dense_gemv_small_supports(4, 6144, 4096)) << "Llama-3.1-8B's qkv streams near HBM on cuBLASLt";
  EXPECT_FALSE(kn::dense_gemv_small_supports(4, 3072, 2048)) << "DeepSeek-V2-Lite's q: no gain measured at M 4";
  EXPECT_FALSE(kn::dense_gemv_small_supports(4, 1025, 64)) << "over 1024 rows";
  EXPECT_FALSE(kn::dense_gemv_small_supports(4, 1024, 4104)) << "over 4 Mi weights";
  EXPECT_FALSE(kn::dense_gemv_small_supports(2, 60, 2048)) << "M <= 2 is the first rule's";
  EXPECT_FALSE(kn::dense_gemv_small_supports(9, 60, 2048)) << "past 8 tokens";
  EXPECT_FALSE(kn::dense_gemv_small_supports(4, 60, 2044)) << "k not a multiple of 8";
  EXPECT_FALSE(kn::dense_gemv_small_supports(4, 0, 2048));
}

TEST(GemvRule, AllTakesEveryMatrixTheKernelRunsForABRuns) {
  EXPECT_TRUE(kn::dense_gemv_small_supports(4, 6144, 4096, true));
  EXPECT_TRUE(kn::dense_gemv_small_supports(8, 151936, 2048, true)) << "an LM head";
  EXPECT_FALSE(kn::dense_gemv_small_supports(9, 60, 2048, true)) << "the kernel's tiles stop at 8 tokens";
  EXPECT_FALSE(kn::dense_gemv_small_supports(2, 60, 2048, true)) << "M <= 2 is the first rule's";
  EXPECT_FALSE(kn::dense_gemv_kernel_supports(4, 60, 2044));
}

TEST(GemvRule, SwitchNamesItsVariableAndValues) {
  EXPECT_EQ(kn::small_gemv_parse_env(nullptr), kn::kSmallGemvRule);
  EXPECT_EQ(kn::small_gemv_parse_env(""), kn::kSmallGemvRule);
  EXPECT_EQ(kn::small_gemv_parse_env("1"), kn::kSmallGemvRule);
  EXPECT_EQ(kn::small_gemv_parse_env("0"), kn::kSmallGemvOff);
  EXPECT_EQ(kn::small_gemv_parse_env("all"), kn::kSmallGemvAll);
  try {
    kn::small_gemv_parse_env("off");
    ADD_FAILURE() << "accepted PEERPLAN_SMALL_GEMV=off";
  } catch (const peerplan::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_SMALL_GEMV=off: expected 0, 1 or all"), std::string::npos) << e.what();
  }
}
