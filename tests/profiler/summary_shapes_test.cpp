#include <gtest/gtest.h>

#include "profiler/common/gemm_shapes.hpp"
#include "profiler/common/summary.hpp"
#include "fixture.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

TEST(Summary, ShowsMeasuredFiguresInReadableUnits) {
  auto s = summary_table(proftest::two_gpu_profile());
  EXPECT_NE(s.find("p2p_ce"), std::string::npos) << s;
  EXPECT_NE(s.find("390.0"), std::string::npos) << "1 GiB in 1 GiB/390e9 s is 390.0 GB/s:\n" << s;
  EXPECT_NE(s.find("342.0"), std::string::npos) << "all_reduce busBw at 2 GiB on 2 GPUs (factor 1):\n" << s;
  EXPECT_NE(s.find("0.80"), std::string::npos) << "pointer-chase latency in microseconds:\n" << s;
  EXPECT_NE(s.find("700 TFLOP/s"), std::string::npos) << s;
  EXPECT_NE(s.find("2.50 us"), std::string::npos) << "launch overhead:\n" << s;
  EXPECT_NE(s.find("ok r0"), std::string::npos) << "verified peer access with its rank:\n" << s;
}

TEST(Summary, ShowsThePowerThrottle) {
  auto m = proftest::two_gpu_profile();
  EXPECT_EQ(summary_table(m).find("Power throttle"), std::string::npos) << "not measured: not shown";
  PowerThrottle t;
  t.onset_s = 0.05, t.factor = 1.175, t.boost_s = 262e-6, t.sustained_s = 307.9e-6, t.m = 4096, t.n = 6144, t.k = 4096;
  m.measurements->power_throttle = t;
  const std::string s = summary_table(m);
  EXPECT_NE(s.find("262.0 us at boost, 307.9 us (1.18x) after 50 ms"), std::string::npos) << s;
}

TEST(Summary, BrokenPairIsShouted) {
  auto m = proftest::two_gpu_profile();
  m.p2p[0][1].functional = false;
  EXPECT_NE(summary_table(m).find("CAPABLE-BROKEN"), std::string::npos);
}

TEST(Summary, CurvePeakUsesLargestSizeAndBest) {
  std::vector<CurvePoint> pts = {proftest::point(1000, 1e-6), proftest::point(2000, 1e-6), proftest::point(4000, 4e-6)};
  auto p = curve_peak(pts);
  EXPECT_EQ(p.bytes, 4000);
  EXPECT_NEAR(p.gbps_at_max, 1.0, 1e-9);
  EXPECT_NEAR(p.gbps_best, 2.0, 1e-9);
}

namespace {
ModelConfig llama8b() {
  ModelConfig c;
  c.name = "llama-3.1-8b";
  c.hidden = 4096; c.layers = 32; c.heads = 32; c.kv_heads = 8; c.head_dim = 128;
  c.intermediate = 14336; c.vocab = 128256;
  return c;
}
}  // namespace

TEST(GemmShapes, TensorParallelSplitsColumnsAndRows) {
  auto shapes = weight_shapes(llama8b(), 2);
  auto find = [&](const std::string& name, int tp) -> WeightShape {
    for (const auto& s : shapes) if (s.name == name && s.tp == tp) return s;
    ADD_FAILURE() << "missing " << name << " tp" << tp;
    return {};
  };
  // qkv: (32 + 2*8) heads x 128 = 6144 outputs at TP1; TP2 halves q and kv heads: 3072.
  EXPECT_EQ(find("qkv", 1).n, 6144);
  EXPECT_EQ(find("qkv", 2).n, 3072);
  EXPECT_EQ(find("o", 2).k, 2048) << "row-parallel: the input features split";
  EXPECT_EQ(find("gate_up", 1).n, 2 * 14336) << "gate and up fused";
  EXPECT_EQ(find("down", 2).k, 7168);
  EXPECT_EQ(find("lm_head", 2).n, 64128);
}

TEST(GemmShapes, KvHeadsFewerThanTpAreReplicated) {
  auto c = llama8b();
  c.kv_heads = 1;  // MQA: at TP2 each rank still holds one KV head
  for (const auto& s : weight_shapes(c, 2))
    if (s.name == "qkv" && s.tp == 2) EXPECT_EQ(s.n, 16 * 128 + 2 * 128);
}

TEST(GemmShapes, OnlyTpDegreesDividingHeads) {
  auto c = llama8b();
  c.heads = 6;
  c.kv_heads = 6;
  EXPECT_EQ(tp_degrees(c, 8), (std::vector<int>{1, 2, 3, 6}));
}

TEST(GemmShapes, ProblemsAreDeduplicatedAcrossModels) {
  auto a = llama8b();
  auto b = llama8b();  // Mixtral shares Llama-8B's attention and per-expert dims: no double timing
  auto once = gemm_problems({a}, 2, {1, 8192});
  auto twice = gemm_problems({a, b}, 2, {1, 8192});
  EXPECT_EQ(once.size(), twice.size());
  EXPECT_EQ(once.size(), 10u * 2u) << "5 matrices x 2 TP degrees x 2 token counts";
}

TEST(GemmShapes, MoeModelsTimeTheirExperts) {
  auto c = llama8b();
  c.experts = 8;
  c.experts_per_token = 2;
  c.expert_intermediate = 14336;
  c.intermediate = 0;
  bool expert = false;
  for (const auto& s : weight_shapes(c, 1)) expert |= s.name == "expert.gate_up" && s.n == 2 * 14336;
  EXPECT_TRUE(expert);
}
