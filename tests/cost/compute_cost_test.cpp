#include "planner/cost/compute_cost.hpp"

#include <cmath>

#include <gtest/gtest.h>

using namespace peerplan;

namespace {
GemmTime g(int gpu, int64_t m, int64_t n, int64_t k, double t) {
  GemmTime x;
  x.gpu = gpu;
  x.m = m;
  x.n = n;
  x.k = k;
  x.time.median = t;
  return x;
}
}  // namespace

TEST(ComputeCost, RooflineTakesTheSlowerOfFlopsAndBytes) {
  EXPECT_DOUBLE_EQ(roofline_s(1e12, 1e9, 1e15, 1e12), 1e-3) << "1 TFLOP at 1 PFLOP/s = 1 ms > 1 GB at 1 TB/s = 1 ms";
  EXPECT_DOUBLE_EQ(roofline_s(1e12, 4e9, 1e15, 1e12), 4e-3) << "memory-bound";
  EXPECT_DOUBLE_EQ(roofline_s(0, 0, 1e15, 1e12), 0.0);
}

TEST(ComputeCost, GemmTablePicksTheSameTpShapeAndInterpolatesInM) {
  // Two TP shards of one matrix: n=8192 (TP1) and n=4096 (TP2). Only the op's (n,k) may be used.
  std::vector<GemmTime> t = {g(0, 1, 8192, 8192, 40e-6), g(0, 64, 8192, 8192, 50e-6),
                             g(0, 1, 4096, 8192, 22e-6), g(0, 64, 4096, 8192, 30e-6)};
  auto exact = gemm_from_table(t, 0, 64, 4096, 8192);
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(exact->seconds, 30e-6);
  auto mid = gemm_from_table(t, 0, 33, 4096, 8192);
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->source, CostSource::Interpolated);
  EXPECT_NEAR(mid->seconds, 22e-6 + 8e-6 * 32.0 / 63.0, 1e-12) << "linear in m between m=1 (22 us) and m=64 (30 us)";
  auto above = gemm_from_table(t, 0, 128, 4096, 8192);
  EXPECT_EQ(above->source, CostSource::Extrapolated);
  EXPECT_NEAR(above->seconds, 60e-6, 1e-12) << "compute-bound beyond the table: scales with m";
  EXPECT_FALSE(gemm_from_table(t, 0, 64, 1024, 8192)) << "no such (n,k): caller falls back to the roofline";
}

TEST(ComputeCost, GemmTableFallsBackToAnotherGpuOfTheProfile) {
  std::vector<GemmTime> t = {g(0, 16, 1024, 1024, 5e-6)};
  auto other = gemm_from_table(t, 1, 16, 1024, 1024);
  ASSERT_TRUE(other) << "GPU 1 was not measured; GPU 0 of the same profile stands in";
  EXPECT_DOUBLE_EQ(other->seconds, 5e-6);
}

TEST(ComputeCost, AttentionTableInterpolatesInWork) {
  AttentionTime a;
  a.phase = "decode";
  a.batch = 1;
  a.q_len = 1;
  a.context = 1024;
  a.heads = 32;
  a.kv_heads = 8;
  a.head_dim = 128;
  a.time.median = 10e-6;
  AttentionTime b = a;
  b.context = 4096;
  b.time.median = 34e-6;
  Op op;
  op.kind = OpKind::Attention;
  op.attn_batch = 1;
  op.attn_q_len = 1;
  op.attn_context = 2048;
  op.attn_heads = 32;
  op.attn_kv_heads = 8;
  op.attn_head_dim = 128;
  auto p = attention_from_table({a, b}, 0, op);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->source, CostSource::Interpolated);
  // Time per unit of work interpolated in log space (planner/cost/attention_grid.hpp): halfway
  // between 1024 and 4096 in log context, the geometric mean of the two efficiencies.
  EXPECT_NEAR(p->seconds, 2048 * std::sqrt(10e-6 / 1024 * 34e-6 / 4096), 1e-12);
  op.attn_heads = 16;
  EXPECT_FALSE(attention_from_table({a, b}, 0, op)) << "another head count is another kernel shape";
}
