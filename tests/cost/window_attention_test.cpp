// Sliding-window attention priced as windows (issue 18): Mistral-7B-v0.1's every layer has a 4096
// window, so its attention at a 32k context costs what it costs at 4k, not 8x that; a prefill chunk
// is priced at its band's work (planner/cost/attention_window.hpp). Synthetic grids of a plausible
// kernel (as attention_grid_test.cpp), Mistral's 32 query / 8 KV heads, head_dim 128.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/cost/attention_window.hpp"
#include "planner/cost/compute_cost.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/fitted_compute.hpp"
#include "planner/plan/plan.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/strategy/test_fixtures.hpp"

using namespace peerplan;

namespace {

// Decode: 6 us floor, HBM 4 TB/s approached at large batch x context (time grows with the bytes read).
double decode_time(int64_t b, int64_t c) {
  const double bytes = double(b) * double(c) * 8 * 128 * 2 * 2;
  return 6e-6 + bytes / (4e12 * (1.0 - 0.7 / std::sqrt(double(b) * double(c) / 4096.0 + 1.0)));
}
// Prefill: 8 us floor, 600 TFLOP/s at large q, less with few query tiles.
double prefill_time(int64_t q, int64_t c) {
  AttentionShape s;
  s.prefill = true, s.batch = 1, s.q_len = q, s.context = c;
  return 8e-6 + 4.0 * 32 * 128 * attention_work(s) / (600e12 * (1.0 - 0.6 / std::sqrt(double(q) / 64.0 + 1.0)));
}

AttentionTime point(const char* phase, int64_t b, int64_t q, int64_t c, double t) {
  AttentionTime a;
  a.phase = phase;
  a.batch = b, a.q_len = q, a.context = c;
  a.heads = 32, a.kv_heads = 8, a.head_dim = 128;
  a.time.median = t;
  return a;
}

std::vector<AttentionTime> grid() {
  std::vector<AttentionTime> t;
  for (int64_t b = 1; b <= 64; b *= 2)
    for (int64_t c = 256; c <= 32768; c *= 2) t.push_back(point("decode", b, 1, c, decode_time(b, c)));
  for (int64_t q = 16; q <= 8192; q *= 2)
    for (int64_t c = 256; c <= 32768; c *= 2) {
      const int64_t cc = std::max(c, q);
      t.push_back(point("prefill", 1, q, cc, prefill_time(q, cc)));
    }
  return t;
}

Plan one_gpu(int64_t layers) {
  Plan p;
  p.name = "single";
  PlanStage s;
  s.gpus = {0};
  s.tp = 1;
  s.layer_begin = 0;
  s.layer_end = layers;
  s.embeddings = s.lm_head = true;
  p.stages.push_back(s);
  return p;
}

// The layer-0 attention op of one iteration of `m` on one GPU.
Op attention_op(const peerplan::testing::ModelFix& m, const BatchShape& b) {
  auto topo = peerplan::testing::machine("nvswitch-8");
  OpGraph g = compile_iteration(one_gpu(m.cfg.layers), m.cfg, m.fig, topo->machine(), b);
  for (const Op& o : g.ops)
    if (o.kind == OpKind::Attention && o.layer == 0) return o;
  ADD_FAILURE() << "no attention op in layer 0";
  return Op{};
}

double priced(const Op& op) {
  static const std::vector<AttentionTime> table = grid();
  auto p = attention_from_table(table, 0, op);
  EXPECT_TRUE(p.has_value()) << op.name;
  return p ? p->seconds : 0.0;
}

BatchShape decode(int64_t batch, int64_t ctx) {
  BatchShape b;
  b.decode_seqs = batch, b.decode_context = ctx;
  return b;
}
BatchShape chunk(int64_t q, int64_t ctx) {
  BatchShape b;
  b.prefill_seqs = 1, b.prefill_tokens = q, b.prefill_context = ctx;
  return b;
}

}  // namespace

TEST(WindowAttention, Mistral7bDecodeAt32kIsPricedAsItsWindowOf4k) {
  auto mistral = peerplan::testing::model("mistral-7b");  // v0.1: sliding_window 4096 on every layer
  ASSERT_EQ(mistral.cfg.window_of(0), 4096);
  auto full = mistral;
  full.cfg.layer_window.clear();  // v0.2 / v0.3: sliding_window null, full attention
  full.fig = derive_figures(full.cfg);
  for (int64_t batch : {1, 8, 32}) {
    const Op w32 = attention_op(mistral, decode(batch, 32768)), w4 = attention_op(mistral, decode(batch, 4096));
    const Op f32 = attention_op(full, decode(batch, 32768));
    EXPECT_EQ(w32.attn_window, 4096);
    EXPECT_EQ(w32.attn_context, 4096) << "the new token reads the last 4096 tokens";
    const double t32 = priced(w32), t4 = priced(w4), tf = priced(f32);
    EXPECT_NEAR(t32 / t4, 1.0, 0.01) << "batch " << batch << ": 32k priced " << t32 * 1e6 << " us vs 4k " << t4 * 1e6;
    // Both are measured grid points: the window's is the 4k point, full attention's the 32k one
    // (3.5x to 8x the 4k time on this kernel, whose bandwidth grows with the bytes read).
    EXPECT_NEAR(t32 / decode_time(batch, 4096), 1.0, 1e-6) << "batch " << batch;
    EXPECT_NEAR(tf / decode_time(batch, 32768), 1.0, 1e-6) << "batch " << batch;
    EXPECT_GT(tf / t32, 3.0) << "batch " << batch << ": full attention at 32k (" << tf * 1e6
                             << " us) must cost several times the window (" << t32 * 1e6 << " us)";
    EXPECT_NEAR(w32.mem_bytes, w4.mem_bytes, 1.0) << "KV bytes read: the window's";
  }
}

TEST(WindowAttention, Mistral7bPrefillChunkIsPricedAtTheBandsWork) {
  auto mistral = peerplan::testing::model("mistral-7b");
  auto full = mistral;
  full.cfg.layer_window.clear();
  full.fig = derive_figures(full.cfg);
  // A 2k chunk over a 32k context: every token sees 4096 keys, against ~31k without the window.
  const Op w = attention_op(mistral, chunk(2048, 32768)), f = attention_op(full, chunk(2048, 32768));
  EXPECT_EQ(w.attn_window, 4096);
  EXPECT_DOUBLE_EQ(w.flops / f.flops, attended_pairs(2048, 32768, 4096) / attended_pairs(2048, 32768, 0));
  const double tw = priced(w), tf = priced(f);
  // The band of 2048 x 4096 pairs is priced at the chunk (2048, 5120)'s efficiency: about the
  // time of that causal chunk (same mean keys per token), far below the full chunk.
  EXPECT_NEAR(tw / prefill_time(2048, 5120), 1.0, 0.03) << "windowed chunk priced " << tw * 1e6 << " us";
  EXPECT_LT(tw / tf, 0.2) << "band " << tw * 1e6 << " us vs full " << tf * 1e6 << " us";
  // A window that does not bind (context <= window) is priced exactly as full attention.
  const Op ws = attention_op(mistral, chunk(1024, 4096)), fs = attention_op(full, chunk(1024, 4096));
  EXPECT_DOUBLE_EQ(priced(ws), priced(fs));
  // A prompt longer than its window: the band's work at the causal prompt's efficiency.
  const Op wp = attention_op(mistral, chunk(8192, 8192)), fp = attention_op(full, chunk(8192, 8192));
  EXPECT_NEAR(priced(wp) / priced(fp), attended_pairs(8192, 8192, 4096) / attended_pairs(8192, 8192, 0), 1e-9);
}

TEST(WindowAttention, PricedShapeKeepsRowsAndBoundsTheContext) {
  AttentionShape s;
  s.prefill = true, s.batch = 2, s.q_len = 512, s.context = 20000, s.heads = 32, s.kv_heads = 8, s.head_dim = 128;
  double f = 0;
  AttentionShape e = window_priced_shape(s, 4096, &f);
  EXPECT_EQ(e.q_len, 512);
  EXPECT_EQ(e.context, 4096 + 256) << "mean keys per token 4096: a causal chunk of 512 over 4096 + 511/2";
  EXPECT_NEAR(f * attention_work(e), 2 * attended_pairs(512, 20000, 4096), 1e-6);
  AttentionShape d;
  d.batch = 4, d.q_len = 1, d.context = 100000;
  EXPECT_EQ(window_priced_shape(d, 128, &f).context, 128);  // gpt-oss's 128-token window
  EXPECT_EQ(f, 1.0);
  EXPECT_EQ(window_priced_shape(d, 0, &f).context, 100000);
}

TEST(WindowAttention, FittedFallbackPricesTheSameBand) {
  // A profile without this head shape's grid prices attention from a fit over other points
  // (fitted_compute.hpp); a windowed chunk goes through the same equivalent shape and factor.
  Measurements meas;
  meas.attention = grid();
  const FittedCompute fit(meas, 989e12, 4.8e12);
  auto mistral = peerplan::testing::model("mistral-7b");
  auto full = mistral;
  full.cfg.layer_window.clear();
  full.fig = derive_figures(full.cfg);
  const Op w = attention_op(mistral, chunk(2048, 32768)), f = attention_op(full, chunk(2048, 32768));
  Op eq = f;
  eq.attn_context = 5120;  // the band's equivalent causal chunk
  const auto tw = fitted_attention_windowed_s(fit, w), tf = fitted_attention_windowed_s(fit, f),
             te = fit.attention_s(eq);
  ASSERT_TRUE(tw && tf && te);
  AttentionShape es;
  es.prefill = true, es.batch = 1, es.q_len = 2048, es.context = 5120;
  EXPECT_NEAR(*tw, *te * attended_pairs(2048, 32768, 4096) / attention_work(es), 1e-12);
  EXPECT_LT(*tw / *tf, 0.25) << "windowed " << *tw * 1e6 << " us vs full " << *tf * 1e6 << " us";
  const Op d = attention_op(mistral, decode(8, 32768)), d4 = attention_op(full, decode(8, 4096));
  EXPECT_DOUBLE_EQ(*fitted_attention_windowed_s(fit, d), *fit.attention_s(d4)) << "decode: the 4k context";
}

// gpt-oss alternates sliding-window (128) and full layers of the same matrices. The pricer compiles one
// representative per layer kind; before session 31 the window was not part of the kind, so layer 0's window
// priced all 24 layers and gpt-oss-20b's decode price did not grow with context (H100, session 31 D: priced
// 2.561 ms at every context from 512 to 16384 while the GPU ran 2.594 -> 2.780 ms).
TEST(WindowAttention, GptOssReducedPricerKeepsItsFullLayers) {
  auto oss = peerplan::testing::model("gpt-oss-20b");
  ASSERT_GT(oss.cfg.window_of(0), 0);
  ASSERT_EQ(oss.cfg.window_of(1), 0);
  const Topology topo(load_machine(resolve_machine_path("h200x2-nvlink")));
  const CostModel cost(topo);
  const Plan plan = one_gpu(oss.cfg.layers);
  PricerOptions exact;
  exact.reuse_layers = false;
  PlanPricer reduced(plan, oss.cfg, oss.fig, cost), per_layer(plan, oss.cfg, oss.fig, cost, exact);
  for (int64_t batch : {1, 4}) {
    double prev = 0;
    for (int64_t ctx : {512, 4096, 16384}) {
      const double r = reduced.price(decode(batch, ctx)).total_s(), e = per_layer.price(decode(batch, ctx)).total_s();
      EXPECT_NEAR(r / e, 1.0, 1e-6) << "batch " << batch << " context " << ctx;
      EXPECT_GT(r, prev) << "batch " << batch << ": the full layers' attention grows with the context " << ctx;
      prev = r;
    }
  }
}
