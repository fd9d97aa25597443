// An iteration with several prefill chunks is priced by its shape (pf_seqs chunks of the mean
// length at one context): the shape's context must make the compiled attention op do the work of
// the iteration's own chunks. 2026-12-04, Llama-3.1-8B, 64k-100k-token prompts on one H200: with the
// mean context, the iteration that ends one prompt (1674 tokens over 99 978) and starts the next
// (6518 tokens over 6518) was priced at 2.24x its attention work, +209 ms of 592 ms; one such
// iteration ends every gap between two first tokens, which the simulator predicted 2-6 % long.
#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/sim/scheduler.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;

namespace {

Request req(int64_t id, int64_t prompt, int64_t out) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = out;
  return r;
}

// Causal (query, key) pairs of the iteration's own prefill chunks: token i of a chunk of n ending
// at context c attends to c - n + i + 1 keys.
double chunk_pairs(const Iteration& it) {
  double w = 0;
  for (const SeqWork& s : it.seqs)
    if (s.prefill) w += double(s.new_tokens) * (double(s.context) - double(s.new_tokens - 1) / 2.0);
  return w;
}

struct Llama8b {
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine machine = load_machine(resolve_machine_path("hgx-h100x8"));
  Plan plan;
  Llama8b() {
    PlanStage s;
    s.gpus = {0};
    s.layer_begin = 0;
    s.layer_end = cfg.layers;
    s.embeddings = s.lm_head = true;
    plan.name = "single[0]";
    plan.stages = {s};
  }
  // (query, key) pairs the compiled graph's first prefill attention op computes.
  double priced_pairs(const BatchShape& b) const {
    OpGraph g = compile_iteration(plan, cfg, fig, machine, b);
    const double per_pair = 2.0 * double(cfg.heads) * double(2 * cfg.head_dim);  // QK^T and PV
    for (const Op& op : g.ops)
      if (op.kind == OpKind::Attention && op.attn_prefill) return op.flops / per_pair;
    return 0;
  }
};

}  // namespace

TEST(PrefillWork, ThePromptTailBesideTheNextPromptsHeadIsPricedAtItsOwnWork) {
  // The validation's iteration 145: request A (99 978 tokens) in chunks of 8192, request B
  // (82 166) arriving meanwhile. A's 13th chunk is its 1674-token tail; the budget's other 6518
  // tokens start B. Priced at the mean context (53 248) as two chunks of 4096 it was 419 M pairs
  // instead of 187 M.
  SchedulerConfig c;
  c.max_num_seqs = 7;
  c.max_batched_tokens = 8192;
  c.chunked_prefill = true;
  Scheduler s(c);
  s.add_request(req(1, 99978, 100));
  std::optional<Iteration> it;
  for (int k = 0; k < 12; ++k) {
    it = s.next_iteration();
    ASSERT_TRUE(it);
    ASSERT_EQ(it->seqs.size(), 1u);
    if (k == 5) s.add_request(req(2, 82166, 72));
    s.complete_iteration(*it);
  }
  it = s.next_iteration();
  ASSERT_TRUE(it);
  ASSERT_EQ(it->seqs.size(), 2u);
  EXPECT_EQ(it->seqs[0].new_tokens, 1674);
  EXPECT_EQ(it->seqs[0].context, 99978);
  EXPECT_EQ(it->seqs[1].new_tokens, 6518);
  EXPECT_EQ(it->seqs[1].context, 6518);
  EXPECT_EQ(it->shape.prefill_seqs, 2);
  EXPECT_EQ(it->shape.prefill_tokens, 8192);

  Llama8b m;
  const double own = chunk_pairs(*it), priced = m.priced_pairs(it->shape);
  EXPECT_NEAR(own, 187.2e6, 0.1e6);
  EXPECT_NEAR(priced / own, 1.0, 1e-3) << "priced " << priced << " pairs, the chunks attend to " << own
                                       << " (shape context " << it->shape.prefill_context << ")";
}

TEST(PrefillWork, WholePromptsOfUnequalLengthArePricedAtTheirWork) {
  // Without chunked prefill, prompts of 100 and 900 tokens prefill together: 5 050 + 405 450 pairs.
  // Two chunks of 500 at the mean context 500 would be 250 250 (0.61x).
  SchedulerConfig c;
  c.max_batched_tokens = 4096;
  Scheduler s(c);
  s.add_request(req(1, 100, 4));
  s.add_request(req(2, 900, 4));
  auto it = s.next_iteration();
  ASSERT_TRUE(it);
  ASSERT_EQ(it->shape.prefill_seqs, 2);
  Llama8b m;
  const double own = chunk_pairs(*it);
  EXPECT_DOUBLE_EQ(own, 5050.0 + 405450.0);
  EXPECT_NEAR(m.priced_pairs(it->shape) / own, 1.0, 2e-3);
}

TEST(PrefillWork, OneChunkOrEqualChunksKeepTheirOwnContext) {
  // One chunk: its own context, as before (every single-prefill iteration is priced unchanged).
  SchedulerConfig c;
  c.max_batched_tokens = 16;
  c.chunked_prefill = true;
  Scheduler s(c);
  s.add_request(req(1, 40, 2));
  auto it = s.next_iteration();
  s.complete_iteration(*it);
  it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_context, 32) << "the second chunk of 16 attends to 32 tokens";
  // Equal chunks at equal contexts: that context.
  SchedulerConfig c2;
  c2.max_batched_tokens = 64;
  Scheduler s2(c2);
  for (int i = 0; i < 4; ++i) s2.add_request(req(i, 16, 2));
  it = s2.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_seqs, 4);
  EXPECT_EQ(it->shape.prefill_context, 16);
}
