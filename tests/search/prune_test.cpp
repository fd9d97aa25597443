// Cheap bounds before simulation (planner/search/prune.hpp): known answers for each bound, and
// that each one is a bound (the simulator never beats it).
#include "planner/search/prune.hpp"

#include <gtest/gtest.h>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;

namespace {

std::string card(const std::string& name) { return std::string(PEERPLAN_SOURCE_DIR) + "/models/llm/" + name + "/config.json"; }

Plan tp_plan(std::vector<int> gpus, int64_t layers) {
  Plan p;
  p.name = "tp";
  PlanStage s;
  s.gpus = gpus;
  s.tp = int(gpus.size());
  s.layer_begin = 0;
  s.layer_end = layers;
  s.embeddings = s.lm_head = true;
  p.stages = {s};
  return p;
}

Plan pp_plan(int stages, int per_stage, int64_t layers) {
  Plan p;
  p.name = "pp";
  for (int i = 0; i < stages; ++i) {
    PlanStage s;
    for (int k = 0; k < per_stage; ++k) s.gpus.push_back(i * per_stage + k);
    s.tp = per_stage;
    s.layer_begin = layers * i / stages;
    s.layer_end = layers * (i + 1) / stages;
    p.stages.push_back(s);
  }
  return p;
}

struct Fixture {
  ModelConfig cfg = load_model_config(card("llama-3.1-70b"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Workload w = load_workload(resolve_workload_path("chat"));
};

}  // namespace

TEST(PruneRate, RequiredDecodeRateKnownAnswers) {
  // Two requests at t=0 and t=1, 11 output tokens each (10 decoded), TTFT SLO 1 s, TPOT 0.1 s:
  // deadlines 2 s and 3 s. All must meet: max(10/2, 20/3) = 6.67 tokens/s.
  std::vector<Request> r(2);
  r[0].arrival_s = 0;
  r[1].arrival_s = 1;
  r[0].output_tokens = r[1].output_tokens = 11;
  EXPECT_NEAR(required_decode_rate(r, 1.0, 0.1, 1.0), 20.0 / 3, 1e-9);
  // Half may miss: the largest work is dropped at every T: max(0/2, 10/3).
  EXPECT_NEAR(required_decode_rate(r, 1.0, 0.1, 0.5), 10.0 / 3, 1e-9);
  // One-token answers need no decoding.
  r[0].output_tokens = r[1].output_tokens = 1;
  EXPECT_EQ(required_decode_rate(r, 1.0, 0.1, 1.0), 0);
  EXPECT_EQ(required_decode_rate({}, 1.0, 0.1, 1.0), 0);
}

TEST(PruneTpot, DecodeStepLowerBoundIsWeightsOverHbm) {
  Fixture f;
  PruneContext ctx = prune_context(f.cfg, f.fig, f.m, f.w, 0.99, true);
  // 70B in bf16 over 8 x 3.35 TB/s: ~140 GB of decoder weights read per step, ~5.2 ms; half the
  // GPUs, twice the time; a pipeline's stages add up (one token crosses all of them).
  double tp8 = decode_step_lower_bound_s(tp_plan({0, 1, 2, 3, 4, 5, 6, 7}, 80), ctx, 1);
  double tp4 = decode_step_lower_bound_s(tp_plan({0, 1, 2, 3}, 80), ctx, 1);
  double pp2tp4 = decode_step_lower_bound_s(pp_plan(2, 4, 80), ctx, 1);
  EXPECT_GT(tp8, 4.5e-3);
  EXPECT_LT(tp8, 6.0e-3);
  EXPECT_NEAR(tp4, 2 * tp8, 1e-9);
  EXPECT_NEAR(pp2tp4, tp4, 1e-9) << "each stage reads half the weights at half the bandwidth";
  // Batch b adds b sequences' KV reads.
  EXPECT_GT(decode_step_lower_bound_s(tp_plan({0, 1, 2, 3}, 80), ctx, 64), tp4);
}

TEST(PruneTpot, MoeReadsOnlyTheActiveExperts) {
  ModelConfig cfg = load_model_config(card("deepseek-v3"));
  ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Workload w = load_workload(resolve_workload_path("chat"));
  PruneContext ctx = prune_context(cfg, fig, m, w, 0.99, true);
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  double step = decode_step_lower_bound_s(tp_plan(all, cfg.layers), ctx, 1);
  double all_weights = double(fig.weight_bytes) / (8 * 3350e9);
  EXPECT_GT(step, 0);
  EXPECT_LT(step, all_weights / 10) << "8 of 256 experts per token";
}

TEST(PruneVerdicts, MemoryThenTpotThenRate) {
  Fixture f;
  Plan tp4 = tp_plan({0, 1, 2, 3}, 80);
  MemoryReport fits;
  MemoryReport too_big;
  too_big.fits = false;
  too_big.why = "GPU 0 needs 150 GB";
  PruneContext ctx = prune_context(f.cfg, f.fig, f.m, f.w, 0.99, true);

  PruneVerdict v = prune_candidate(tp4, too_big, ctx);
  EXPECT_FALSE(v.keep);
  EXPECT_EQ(v.bound, "memory");
  EXPECT_EQ(v.why, "GPU 0 needs 150 GB");

  v = prune_candidate(tp4, fits, ctx);  // chat: TPOT 50 ms, 4 req/s
  EXPECT_TRUE(v.keep) << v.why;
  EXPECT_GT(v.step_lb_s, 0);
  EXPECT_GT(v.decode_tps_ub, ctx.required_decode_tps);

  Workload tight = f.w;
  tight.slo_tpot_s = 5e-3;  // under tp4's ~10 ms step bound
  v = prune_candidate(tp4, fits, prune_context(f.cfg, f.fig, f.m, tight, 0.99, true));
  EXPECT_FALSE(v.keep);
  EXPECT_EQ(v.bound, "tpot");
  EXPECT_NE(v.why.find("TPOT SLO"), std::string::npos) << v.why;
  // Not an SLO objective: only memory prunes.
  EXPECT_TRUE(prune_candidate(tp4, fits, prune_context(f.cfg, f.fig, f.m, tight, 0.99, false)).keep);

  Workload flood = f.w;
  // 4000 answers of ~200 tokens arriving within 0.2 s, each due within 0.5 s + 20 ms per token:
  // ~170k tokens/s wanted, several times what 4 GPUs can read weights for at batch 256.
  flood.rate_rps = 20000;
  flood.num_requests = 4000;
  flood.slo_tpot_s = 0.02;
  PruneContext fctx = prune_context(f.cfg, f.fig, f.m, flood, 0.99, true);
  v = prune_candidate(tp4, fits, fctx);
  EXPECT_FALSE(v.keep);
  EXPECT_EQ(v.bound, "rate");
  EXPECT_NE(v.why.find("tokens/s"), std::string::npos) << v.why;
  // Replicas multiply the bound.
  Plan two = tp4;
  two.replicas = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_NEAR(prune_candidate(two, fits, fctx).decode_tps_ub, 2 * v.decode_tps_ub, 1e-6 * v.decode_tps_ub);

  PruneTally t;
  t.add(prune_candidate(tp4, too_big, ctx));
  t.add(prune_candidate(tp4, fits, ctx));
  t.add(v);
  EXPECT_EQ(t.considered, 3);
  EXPECT_EQ(t.pruned(), 2);
  EXPECT_NE(t.summary().find("pruned 2 of 3"), std::string::npos) << t.summary();
}

TEST(PruneTpot, MachinesWithoutHbmFiguresGiveNoBound) {
  Fixture f;
  f.m.gpus[0].hbm_gbps = 0;
  PruneContext ctx = prune_context(f.cfg, f.fig, f.m, f.w, 0.99, true);
  EXPECT_EQ(decode_step_lower_bound_s(tp_plan({0, 1, 2, 3}, 80), ctx, 1), 0);
  EXPECT_TRUE(prune_candidate(tp_plan({0, 1, 2, 3}, 80), MemoryReport{}, ctx).keep);
}
