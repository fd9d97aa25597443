// The serving simulation's power state (planner/sim/power_state.hpp), with an H200's measured
// throttle (bench/power/clock_response.py, session 14: boost for ~50 ms, then 1.175x).
#include <string>

#include <gtest/gtest.h>

#include "planner/model/quantization.hpp"
#include "planner/sim/power_state.hpp"

using namespace peerplan;

namespace {
PowerThrottle h200() {
  PowerThrottle p;
  p.onset_s = 0.050;
  p.factor = 1.175;
  return p;
}
BatchShape prefill(int64_t tokens) {
  BatchShape s;
  s.prefill_seqs = 1, s.prefill_tokens = tokens, s.prefill_context = tokens;
  return s;
}
}  // namespace

TEST(PowerState, OnlyPrefillSizedWorkDrawsTheCap) {
  EXPECT_TRUE(draws_power_cap(prefill(8192)));
  EXPECT_FALSE(draws_power_cap(prefill(100))) << "a short prompt's GEMMs are graph-sized";
  BatchShape decode;
  decode.decode_seqs = 256, decode.decode_context = 1000;
  EXPECT_FALSE(draws_power_cap(decode));
}

TEST(PowerState, ShortBurstsRunAtBoostLongOnesPayPastTheOnset) {
  PowerState a(h200());
  EXPECT_DOUBLE_EQ(a.run(1.0, 0.014, true), 0.014) << "a chat prefill: within the budget";
  PowerState b(h200());
  EXPECT_NEAR(b.run(1.0, 0.250, true), 0.050 + 0.200 * 1.175, 1e-12) << "an 8k chunk from rest";
  EXPECT_DOUBLE_EQ(b.budget_s(), 0.0);
  const double end = 1.0 + 0.050 + 0.200 * 1.175;
  EXPECT_NEAR(b.run(end, 0.250, true), 0.250 * 1.175, 1e-12) << "the next chunk right after: throttled throughout";
}

TEST(PowerState, RestRefillsTheBudgetIdleFasterThanDecode) {
  PowerState p(h200());
  p.run(0.0, 0.100, true);  // spent
  EXPECT_DOUBLE_EQ(p.budget_s(), 0.0);
  p.run(0.050 + 0.050 * 1.175 + 0.020, 0.010, false);  // 50 ms at boost + 50 throttled, 20 ms idle, a 10 ms decode step
  EXPECT_NEAR(p.budget_s(), 0.020 + 0.010 * PowerState::kLightRefill, 1e-12);
  PowerState q(h200());
  q.run(0.0, 0.100, true);
  q.run(10.0, 0.010, false);
  EXPECT_DOUBLE_EQ(q.budget_s(), 0.050) << "never more than the onset";
}

// End to end: the shipped H200 profile marked as paced (duty 0.5, with a throttle) against the same
// profile as it was timed (back to back). Long prompts slow past the onset; short ones do not; the
// prediction says which rule priced it.
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/machine.hpp"
#include "tests/plan_fixtures.hpp"

namespace {

struct SimRun {
  double ttft_p50 = 0;
  bool power_noted = false;
  std::string moe_dispatch;  // provenance.power.moe_dispatch
};

// `grouped` (an MoE model's dispatch mixes, the model's own shape filled in): a paced profile's only.
SimRun simulate_h200(bool paced, double factor, int64_t prompt, std::vector<ThrottleMix> mixes = {},
                     const std::string& model = "llama-3.1-8b", std::vector<ThrottleMix> grouped = {}) {
  const ModelConfig cfg = load_model_config(resolve_model_path(model));
  const ModelFigures fig = derive_figures(cfg);
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  if (paced) {
    m.meta["profile"]["options"]["duty"] = 0.5;
    PowerThrottle t;
    t.onset_s = 0.050, t.factor = factor;
    t.mixes = std::move(mixes);
    if (!grouped.empty()) {
      GroupedThrottle g;
      g.model = cfg.name, g.hidden = cfg.hidden, g.intermediate = cfg.expert_intermediate;
      g.experts = cfg.experts, g.topk = cfg.experts_per_token, g.tokens = 2048;
      g.mixes = std::move(grouped);
      t.grouped.push_back(g);
    }
    m.measurements->power_throttle = t;
  }
  const Topology topo{m};
  const Plan p = test_plans::tp({0}, int(cfg.layers), "single[0]");
  Workload w;
  w.name = "one-by-one";
  w.max_num_seqs = 8;
  w.max_batched_tokens = 8192;
  w.chunked_prefill = true;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back({i, 5.0 * i, prompt, 8});  // far apart: each from rest
  const Simulation sim = simulate_plan(p, cfg, fig, topo, w, reqs, SimulateOptions{});
  const nlohmann::json& prov = sim.metrics.provenance;
  return {sim.metrics.ttft.p50, prov.contains("power"),
          prov.contains("power") ? prov["power"].value("moe_dispatch", std::string()) : std::string()};
}

}  // namespace

TEST(PowerState, APacedProfileSlowsLongPrefillsOnlyAndSaysSo) {
  const SimRun b2b = simulate_h200(false, 1, 16384), flat = simulate_h200(true, 1.0, 16384),
            hot = simulate_h200(true, 1.2, 16384);
  EXPECT_FALSE(b2b.power_noted);
  EXPECT_TRUE(hot.power_noted);
  // 16k tokens are two 8192 chunks of ~0.3 s: all but the first 50 ms at 1.2x.
  EXPECT_GT(hot.ttft_p50, flat.ttft_p50 * 1.15);
  EXPECT_LT(hot.ttft_p50, flat.ttft_p50 * 1.2);
  const SimRun short_flat = simulate_h200(true, 1.0, 200), short_hot = simulate_h200(true, 1.2, 200);
  EXPECT_DOUBLE_EQ(short_hot.ttft_p50, short_flat.ttft_p50) << "a chat prompt stays within the boost budget";
}

namespace {
// Session 16's long-chunk figures (H200): GEMMs alone 1.19x; at a 75 % attention mix attention
// 1.18x, GEMMs 1.11x, elementwise 1.05x.
PowerThrottle h200_by_class() {
  PowerThrottle p = h200();
  p.factor = 1.186;
  p.mixes = {{0.0, 1.186, 1.25, 1.06}, {0.75, 1.11, 1.18, 1.05}, {1.0, 1.10, 1.17, 1.05}};
  return p;
}
}  // namespace

TEST(PowerState, ClassFactorsAtTheIterationsMix) {
  const PowerThrottle p = h200_by_class();
  EXPECT_DOUBLE_EQ(throttle_factor(p, {1.0, 0.0, 0.0}), 1.186) << "GEMMs alone: the GEMM-only mix";
  EXPECT_NEAR(throttle_factor(p, {0.25, 0.75, 0.0}), 0.25 * 1.11 + 0.75 * 1.18, 1e-12) << "a measured mix";
  // Half attention: each class linear between shares 0 and 0.75 (2/3 of the way).
  const double g = 1.186 + (1.11 - 1.186) * 2 / 3, a = 1.25 + (1.18 - 1.25) * 2 / 3;
  const double e = 1.06 + (1.05 - 1.06) * 2 / 3;
  EXPECT_NEAR(throttle_factor(p, {0.4, 0.4, 0.2}), 0.4 * g + 0.4 * a + 0.2 * e, 1e-12);
  EXPECT_NEAR(throttle_factor(p, {0.0, 2.0, 0.0}), 1.17, 1e-12) << "attention alone: the share-1 mix";
  EXPECT_DOUBLE_EQ(throttle_factor(p, {0, 0, 0}), 1.186) << "no compute priced: the throttle's one factor";
  PowerThrottle one = h200();
  EXPECT_DOUBLE_EQ(throttle_factor(one, {0.3, 0.6, 0.1}), 1.175) << "a profile without mixes: one factor for all";
}

TEST(PowerState, AnAttentionHeavyChunkSlowsLessThanTheGemmFactor) {
  // The 64k-100k chunks of session 16: the GEMM factor priced them 3-4 % slow.
  PowerThrottle p = h200_by_class();
  PowerState one(p), by_class(p);
  const ClassSeconds chunk{0.06, 0.18, 0.01};
  const double priced = chunk.gemm + chunk.attention + chunk.elementwise;
  const double d1 = one.run(10.0, priced, true, p.factor);
  const double d2 = by_class.run(10.0, priced, true, chunk, 8192);
  EXPECT_NEAR(d1, 0.050 + (priced - 0.050) * 1.186, 1e-12);
  EXPECT_LT(d2, d1);
  EXPECT_NEAR(d2, 0.050 + (priced - 0.050) * throttle_factor(p, chunk), 1e-12);
}

TEST(PowerState, TheSimulationSlowsEachClassByItsOwnFactor) {
  // Every class at 1.2 is the one factor 1.2: the stage's class seconds cover its compute.
  const std::vector<ThrottleMix> even = {{0.0, 1.2, 1.2, 1.2}, {1.0, 1.2, 1.2, 1.2}};
  const SimRun one = simulate_h200(true, 1.2, 32768), by_class = simulate_h200(true, 1.2, 32768, even);
  EXPECT_NEAR(by_class.ttft_p50, one.ttft_p50, 1e-9 * one.ttft_p50);
  // Attention not slowed: a 32k prompt (attention a large share of its chunks) lands between.
  const std::vector<ThrottleMix> gemm_only = {{0.0, 1.2, 1.0, 1.0}, {1.0, 1.2, 1.0, 1.0}};
  const SimRun flat = simulate_h200(true, 1.0, 32768), part = simulate_h200(true, 1.2, 32768, gemm_only);
  EXPECT_GT(part.ttft_p50, flat.ttft_p50 * 1.03);
  EXPECT_LT(part.ttft_p50, one.ttft_p50 * 0.97);
}

// The MoE dispatch's own mixes (session 20): Mixtral's long prefills ran 1.06x their boost price
// where the dense mixes priced ~1.17x (session 19 E).
TEST(PowerState, GroupedSecondsSlowByTheDispatchMixesBlendedByTheirShare) {
  const PowerThrottle p = h200_by_class();
  const std::vector<ThrottleMix> moe = {{0.0, 1.04, 1.06, 1.02}, {0.75, 1.03, 1.05, 1.01}};
  ClassSeconds c;
  c.gemm = 0.1, c.grouped = 0.3, c.attention = 0.0, c.elementwise = 0.05;
  ClassSeconds as_gemm = c;
  as_gemm.gemm += as_gemm.grouped, as_gemm.grouped = 0;
  EXPECT_DOUBLE_EQ(throttle_factor(p, c), throttle_factor(p, as_gemm)) << "no dispatch table: grouped is GEMM";
  EXPECT_DOUBLE_EQ(throttle_factor(p, c, &p.mixes), throttle_factor(p, as_gemm)) << "a table equal to the dense one";
  // Share 0: dense figure (0.4 * 1.186 + 0.05 * 1.06) / 0.45, dispatch figure (0.4 * 1.04 + 0.05 * 1.02) / 0.45,
  // blended 1/4 : 3/4 (grouped seconds over GEMM seconds).
  const double dense = (0.4 * 1.186 + 0.05 * 1.06) / 0.45, disp = (0.4 * 1.04 + 0.05 * 1.02) / 0.45;
  EXPECT_NEAR(throttle_factor(p, c, &moe), 0.25 * dense + 0.75 * disp, 1e-12);
  ClassSeconds dense_only;
  dense_only.gemm = 0.4, dense_only.elementwise = 0.05;
  EXPECT_DOUBLE_EQ(throttle_factor(p, dense_only, &moe), throttle_factor(p, dense_only)) << "no grouped seconds";
  GroupedThrottle table;
  table.tokens = 2048, table.mixes = moe;
  PowerState with(p, {table}), without(p);
  EXPECT_LT(with.run(10.0, 0.45, true, c, 2048), without.run(10.0, 0.45, true, c, 2048));
}

TEST(PowerState, TheDispatchTableIsTheServedModelsNearestItsTokens) {
  PowerThrottle p = h200_by_class();
  const ModelConfig mixtral = load_model_config(resolve_model_path("mixtral-8x7b"));
  const ModelConfig qwen = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  const ModelConfig dense = load_model_config(resolve_model_path("llama-3.1-8b"));
  for (int64_t tokens : {4096, 2048}) {
    GroupedThrottle g;
    g.model = "mixtral-8x7b", g.hidden = mixtral.hidden, g.intermediate = mixtral.expert_intermediate;
    g.experts = mixtral.experts, g.topk = mixtral.experts_per_token, g.tokens = tokens;
    g.mixes = {{0.0, tokens == 2048 ? 1.04 : 1.08, 1.06, 1.02}};
    p.grouped.push_back(g);
  }
  const std::vector<GroupedThrottle> m = grouped_throttles_for(p, mixtral);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].tokens, 2048) << "ascending by tokens";
  EXPECT_DOUBLE_EQ(nearest_grouped_mixes(m, 1024)->front().gemm, 1.04) << "below the first: the first";
  EXPECT_DOUBLE_EQ(nearest_grouped_mixes(m, 2800)->front().gemm, 1.04) << "nearer 2048 in log tokens";
  EXPECT_DOUBLE_EQ(nearest_grouped_mixes(m, 3000)->front().gemm, 1.08) << "nearer 4096";
  EXPECT_DOUBLE_EQ(nearest_grouped_mixes(m, 8192)->front().gemm, 1.08);
  EXPECT_EQ(nearest_grouped_mixes({}, 2048), nullptr);
  EXPECT_TRUE(grouped_throttles_for(p, qwen).empty()) << "another expert shape: priced as dense GEMMs";
  EXPECT_TRUE(grouped_throttles_for(p, dense).empty());
}

TEST(PowerState, TheDispatchTableIsOfTheExpertsFormatElseBf16s) {
  // Mixtral int8's eager dispatch (quantize, IMMA, dequantize per expert) draws less than bf16's: a profile from
  // session 30 times each format it profiles; older ones (bf16 only) price every format from bf16's.
  PowerThrottle p = h200_by_class();
  ModelConfig bf16 = load_model_config(resolve_model_path("mixtral-8x7b"));
  ModelConfig int8 = bf16, fp8 = bf16;
  int8.quant = weights_override(DType::INT8);
  fp8.quant = weights_override(DType::FP8_E4M3);
  for (const char* dtype : {"bf16", "int8"}) {
    GroupedThrottle g;
    g.model = "mixtral-8x7b", g.hidden = bf16.hidden, g.intermediate = bf16.expert_intermediate;
    g.experts = bf16.experts, g.topk = bf16.experts_per_token, g.tokens = 2048, g.dtype = dtype;
    g.mixes = {{0.0, std::string(dtype) == "int8" ? 1.03 : 1.11, 1.10, 1.01}};
    p.grouped.push_back(g);
  }
  ASSERT_EQ(grouped_throttles_for(p, int8).size(), 1u);
  EXPECT_EQ(grouped_throttles_for(p, int8)[0].dtype, "int8");
  EXPECT_DOUBLE_EQ(grouped_throttles_for(p, int8)[0].mixes[0].gemm, 1.03);
  EXPECT_EQ(grouped_throttles_for(p, bf16)[0].dtype, "bf16");
  EXPECT_EQ(grouped_throttles_for(p, fp8)[0].dtype, "bf16") << "no fp8 table: bf16's, as every older profile";
  p.grouped.erase(p.grouped.begin());
  EXPECT_TRUE(grouped_throttles_for(p, bf16).empty()) << "an int8 table does not price bf16 experts";
}

TEST(PowerState, AnMoeModelsLongPromptsFollowItsDispatchTable) {
  // Qwen1.5-MoE's long prompts from the shipped profile marked paced: dense GEMMs at 1.2x; its
  // dispatch at 1.0x leaves only the dense share of the slowdown, at 1.2x it is the dense price.
  const std::vector<ThrottleMix> even = {{0.0, 1.2, 1.2, 1.2}, {1.0, 1.2, 1.2, 1.2}};
  auto run = [&](std::vector<ThrottleMix> dispatch) {
    return simulate_h200(true, 1.2, 32768, even, "qwen1.5-moe-a2.7b", std::move(dispatch));
  };
  const SimRun none = run({}), same = run(even), cool = run({{0.0, 1.0, 1.0, 1.0}, {1.0, 1.0, 1.0, 1.0}});
  EXPECT_NEAR(same.ttft_p50, none.ttft_p50, 1e-9 * none.ttft_p50) << "a dispatch table equal to the dense mixes";
  EXPECT_LT(cool.ttft_p50, none.ttft_p50 * 0.99) << "a dispatch that does not throttle: its seconds are not slowed";
  EXPECT_NE(none.moe_dispatch.find("slow as dense GEMMs"), std::string::npos) << none.moe_dispatch;
  EXPECT_NE(cool.moe_dispatch.find("this model's expert dispatch"), std::string::npos) << cool.moe_dispatch;
  EXPECT_TRUE(simulate_h200(true, 1.2, 32768, even).moe_dispatch.empty()) << "a dense model says nothing of experts";
}
