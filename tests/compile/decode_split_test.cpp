// The decode kernel's split plan as the pricer reads it (planner/model/decode_split.hpp, the header the
// kernel itself launches with) and the effective context a batch of unequal or padded contexts is
// priced at.
#include "planner/model/decode_split.hpp"

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/compile/graph_batch.hpp"
#include "planner/compile/op_graph.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;
namespace ds = peerplan::decode_split;

namespace {
constexpr int kSms = 132;  // H200
// Llama-3.1-8B on one GPU: 8 kv heads, 4 query heads each, head_dim 128.
int64_t eff(int64_t real, int64_t padded, int64_t mean, int64_t cmin, int64_t cmax) {
  return ds::effective_context(real, padded, mean, cmin, cmax, 8, 4, 128, kSms);
}
}  // namespace

TEST(DecodeSplit, PlanFillsOneWaveAndTrimsAFullOneOverLongChunks) {
  const ds::Shape sh = ds::shape(4, 128);
  EXPECT_EQ(sh.blocks_per_sm, 4);
  EXPECT_EQ(sh.quantum, 64);
  // Batch 1 x 8 kv heads: 528 / 8 = 66 splits fill the wave exactly, so over chunks >= 8192 one
  // fewer; capped at one per 64 tokens of the context.
  EXPECT_EQ(ds::plan(1, 8, 1 << 20, kSms, true, sh).splits, 65);
  EXPECT_EQ(ds::plan(1, 8, 1 << 20, kSms, true, sh, ds::FullWave::Keep).splits, 66);
  EXPECT_EQ(ds::plan(1, 8, 640, kSms, true, sh).splits, 10);
  // Batch 11 x 8 kv heads x 6 splits = 528 blocks, a full wave, chunks of 65k / 6 >= 8192: one split fewer.
  EXPECT_EQ(ds::plan(11, 8, 65536, kSms, true, sh).splits, 5);
  EXPECT_EQ(ds::plan(11, 8, 65536, kSms, true, sh, ds::FullWave::Keep).splits, 6);
  // Batch 4 x 8 kv heads = 32 pairs: a cluster of 8 splits.
  const ds::Plan p4 = ds::plan(4, 8, 26000, kSms, true, sh);
  EXPECT_TRUE(p4.cluster);
  EXPECT_EQ(p4.splits, 8);
  // Dim tile 256 with 16 query heads per kv head: two blocks per kv head, 2 blocks per SM, quantum 32.
  const ds::Shape wide = ds::shape(16, 256);
  EXPECT_TRUE(wide.wide);
  EXPECT_EQ(wide.blocks_per_kv_head, 2);
  EXPECT_EQ(wide.quantum, 32);
}

TEST(DecodeSplit, AUniformBatchIsPricedAtItsOwnContext) {
  EXPECT_EQ(eff(4, 4, 20000, 20000, 20000), 20000);
  EXPECT_EQ(eff(1, 1, 777, 777, 777), 777);
  // Unknown spread (0): the mean, as before.
  EXPECT_EQ(eff(0, 4, 20000, 0, 0), 20000);
}

TEST(DecodeSplit, PaddingAndUnequalContextsCostMoreThanTheirMean) {
  // Three sequences at 26.8k in a graph of 4 (one padding row of one token): the mean over the four
  // rows is 20.1k, but the kernel's blocks are the three sequences' (session 10 E: such steps ran
  // 1.11-1.15x the price of the diluted mean). Priced between the diluted mean and the real context.
  const int64_t diluted = (3 * 26800 + 1 + 3) / 4;
  const int64_t c3 = eff(3, 4, diluted, 26800, 26800);
  EXPECT_GT(c3, diluted * 103 / 100);
  EXPECT_LT(c3, 26800);
  // Unequal contexts, unpadded: the longest sequence's blocks outlast the others'.
  const int64_t mean = (4000 + 8000 + 16000 + 32000) / 4;
  EXPECT_GT(eff(4, 4, mean, 4000, 32000), mean);
  // More spread at the same mean costs more.
  EXPECT_GT(eff(4, 4, mean, 1000, 50000), eff(4, 4, mean, 10000, 20000));
}

TEST(DecodeSplit, ThePricerSeesTheRealSequencesOfAPaddedStep) {
  BatchShapeSum sum;
  for (int64_t c : {6000, 9000, 12000}) sum.add_decode(c);
  const BatchShape b = sum.shape();
  EXPECT_EQ(b.decode_context_min, 6000);
  EXPECT_EQ(b.decode_context_max, 12000);
  EXPECT_EQ(b.decode_real_seqs, 3);
  const BatchShape p = graph_padded(b);
  EXPECT_EQ(p.decode_seqs, 4);
  EXPECT_EQ(p.decode_real_seqs, 3);
  EXPECT_EQ(p.decode_context_max, 12000);
  // The compiled decode attention op is priced at the effective context; its work stays the mean's.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  const OpGraph g = compile_iteration(test_plans::tp({0}, 32, "single"), cfg, fig, m, p);
  bool seen = false;
  for (const Op& op : g.ops)
    if (op.name == "L0.attn_decode") {
      seen = true;
      EXPECT_EQ(op.attn_batch, 4);
      EXPECT_GT(op.attn_context, p.decode_context);
      EXPECT_LE(op.attn_context, 12000);
      const double per_token = 2.0 * 32 * (128 + 128);
      EXPECT_DOUBLE_EQ(op.flops, per_token * 4 * double(p.decode_context));
    }
  EXPECT_TRUE(seen);
}
