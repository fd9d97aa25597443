// A gated MLP's activation in the gate_up GEMV's epilogue (planner/compile/act_fusion.hpp): which ops the
// compiler marks for which kernels, that a profile's meta decides it (old profiles keep the activation op
// their runs were validated with), and that the price drops by exactly the activation ops it no longer has.
#include <string>

#include <gtest/gtest.h>

#include "planner/compile/act_fusion.hpp"
#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/quantization.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/topology/executor_launch.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "planner/validate/preflight.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

using test_plans::decode;

Machine profile(bool fused, const char* launch = "pdl") {
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  m.meta[kFusedActKey] = fused;
  m.meta[kExecutorLaunchKey] = launch;
  return m;
}

testing::ModelFix model(const std::string& name, DType weights = DType::BF16) {
  testing::ModelFix m = testing::model(name);
  if (weights != DType::BF16) {
    m.cfg.quant = weights_override(weights);
    m.fig = derive_figures(m.cfg);
  }
  return m;
}

OpGraph graph(const Machine& machine, const testing::ModelFix& m, const BatchShape& b, int fused_act = -1,
              int pdl = -1) {
  CompileOptions o;
  o.fused_act = fused_act;
  o.pdl = pdl;
  return compile_iteration(test_plans::tp({0}, int(m.cfg.layers)), m.cfg, m.fig, machine, b, o);
}

std::string short_name(const Op& op) { return op.name.substr(op.name.find('.') + 1); }

// Activation ops, and gate_up ops marked act_epilogue, of one graph.
struct Count {
  int act = 0, fused = 0, gate_up = 0;
};
Count count(const OpGraph& g) {
  Count c;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::Elementwise && op.ew == EwKind::Act) ++c.act;
    const std::string n = short_name(op);
    if (n == "gate_up" || n == "shared.gate_up" || n == "expert.gate_up") ++c.gate_up, c.fused += op.act_epilogue;
  }
  return c;
}

TEST(ActEpilogue, TheRuleIsTheKernelsTheExecutorHas) {
  // bf16: the PDL GEMV only (M <= 2, with PDL); int4: v7 (n % 32, k % 128); int8: the W8A16 GEMV (k % 16), only
  // with `all` (measured slower fused: session 31 A).
  EXPECT_TRUE(gate_up_act_fuses(DType::BF16, 1, 2 * 14336, 4096, true));
  EXPECT_TRUE(gate_up_act_fuses(DType::BF16, 2, 2 * 14336, 4096, true));
  EXPECT_FALSE(gate_up_act_fuses(DType::BF16, 3, 2 * 14336, 4096, true));
  EXPECT_FALSE(gate_up_act_fuses(DType::BF16, 1, 2 * 14336, 4096, false));  // cuBLASLt without PDL
  EXPECT_FALSE(gate_up_act_fuses(DType::BF16, 1, 2001, 4096, true));        // no halves
  EXPECT_FALSE(gate_up_act_fuses(DType::INT8, 1, 2 * 5632, 2048, false));
  EXPECT_TRUE(gate_up_act_fuses(DType::INT8, 1, 2 * 5632, 2048, false, true));
  EXPECT_FALSE(gate_up_act_fuses(DType::INT8, 1, 2 * 5632, 2056, false, true));
  EXPECT_TRUE(gate_up_act_fuses(DType::INT4, 2, 2 * 14336, 4096, true));
  EXPECT_FALSE(gate_up_act_fuses(DType::INT4, 1, 2 * 1000, 4096, true));
  EXPECT_FALSE(gate_up_act_fuses(DType::FP8_E4M3, 1, 2 * 14336, 4096, true));  // cuBLASLt's FP8 kernels
  // Routed experts: bf16 on the gemv (busiest expert 1..4 rows), only with `all` (measured slower fused).
  EXPECT_FALSE(grouped_gate_up_act_fuses(DType::BF16, 1, 2816));
  EXPECT_TRUE(grouped_gate_up_act_fuses(DType::BF16, 1, 2816, true));
  EXPECT_TRUE(grouped_gate_up_act_fuses(DType::BF16, 4, 2816, true));
  EXPECT_FALSE(grouped_gate_up_act_fuses(DType::BF16, 5, 2816, true));
  EXPECT_FALSE(grouped_gate_up_act_fuses(DType::FP8_E4M3, 1, 2816, true));
}

TEST(ActEpilogue, TheProfileSaysWhetherTheCompilerFuses) {
  const Machine shipped = load_machine(resolve_machine_path("h200x2-nvlink"));
  EXPECT_FALSE(fused_gate_up_act(shipped));  // timed before the epilogue existed
  EXPECT_TRUE(fused_gate_up_act(profile(true)));
  EXPECT_FALSE(fused_gate_up_act(profile(false)));
  Machine spec = profile(true);
  spec.measurements.reset();
  EXPECT_FALSE(fused_gate_up_act(spec));
  const auto m = model("llama-3.1-8b");
  const Count old = count(graph(shipped, m, decode(1)));
  EXPECT_EQ(old.act, int(m.cfg.layers));
  EXPECT_EQ(old.fused, 0);
  const Count on = count(graph(profile(true), m, decode(1)));
  EXPECT_EQ(on.act, 0);
  EXPECT_EQ(on.fused, int(m.cfg.layers));
  // The executor's PEERPLAN_FUSED_ACT overrides the profile both ways.
  EXPECT_EQ(count(graph(profile(true), m, decode(1), 0)).act, int(m.cfg.layers));
  // (The shipped profile predates executor_launch: "serial", so bf16 fuses with the executor's own pdl.)
  EXPECT_EQ(count(graph(shipped, m, decode(1), 1)).act, int(m.cfg.layers));
  EXPECT_EQ(count(graph(shipped, m, decode(1), 1, 1)).act, 0);
}

TEST(ActEpilogue, DenseDecodeAtOneOrTwoRowsOnly) {
  const Machine on = profile(true);
  const auto m = model("llama-3.1-8b");
  EXPECT_EQ(count(graph(on, m, decode(2))).act, 0);
  EXPECT_EQ(count(graph(on, m, decode(3))).act, int(m.cfg.layers));
  EXPECT_EQ(count(graph(on, m, decode(1), 1)).fused, int(m.cfg.layers));
  // A prefill-only iteration: cuBLASLt, the activation kernel after it.
  BatchShape pf;
  pf.prefill_seqs = 1, pf.prefill_tokens = pf.prefill_context = 512;
  EXPECT_EQ(count(graph(on, m, pf)).act, int(m.cfg.layers));
  // bf16 takes the GEMV only with PDL: a serially launched executor keeps the kernel; the executor says
  // how it launches (CompileOptions::pdl) over the profile.
  EXPECT_EQ(count(graph(profile(true, "serial"), m, decode(1))).act, int(m.cfg.layers));
  EXPECT_EQ(count(graph(profile(true, "serial"), m, decode(1), -1, 1)).act, 0);
  // int4 (v7) fuses with or without PDL; int8 (W8A16 GEMV) only with `all`, where it also needs no PDL; FP8
  // runs cuBLASLt and does not.
  EXPECT_EQ(count(graph(profile(true, "serial"), model("llama-3.1-8b", DType::INT8), decode(1))).act, int(m.cfg.layers));
  EXPECT_EQ(count(graph(profile(true, "serial"), model("llama-3.1-8b", DType::INT8), decode(1), kActEverywhere)).act, 0);
  EXPECT_EQ(count(graph(profile(true, "serial"), model("llama-3.1-8b", DType::INT4), decode(2))).act, 0);
  EXPECT_EQ(count(graph(on, model("llama-3.1-8b", DType::FP8_E4M3), decode(1))).act, int(m.cfg.layers));
  // The marked op writes half its outputs.
  const OpGraph plain = graph(profile(false), m, decode(1)), fused = graph(on, m, decode(1));
  for (size_t i = 0; i < fused.ops.size(); ++i) {
    if (!fused.ops[i].act_epilogue) continue;
    const Op& f = fused.ops[i];
    for (const Op& p : plain.ops)
      if (p.name == f.name) EXPECT_DOUBLE_EQ(p.mem_bytes - f.mem_bytes, double(f.m * f.n / 2 * 2)) << f.name;
  }
}

TEST(ActEpilogue, RoutedAndSharedExpertsAtDecode) {
  const Machine on = profile(true);
  const auto q = model("qwen1.5-moe-a2.7b");
  const int L = int(q.cfg.layers);
  const Count one = count(graph(on, q, decode(1)));
  EXPECT_EQ(one.act, L) << "the shared experts' GEMV fuses at batch 1, the routed experts' gemv only with `all`";
  EXPECT_EQ(one.fused, L);
  const Count all = count(graph(on, q, decode(1), kActEverywhere));
  EXPECT_EQ(all.act, 0) << "routed (gemv) and shared (GEMV) experts both fuse at batch 1 with `all`";
  EXPECT_EQ(all.fused, 2 * L);
  // 64 tokens over 60 experts: the busiest expert holds more than 4 rows, past the gemv.
  EXPECT_EQ(count(graph(on, q, decode(64), kActEverywhere)).act, 2 * L);
  // FP8 experts: the grouped kernels do not fuse (the shared experts are FP8 too: neither does the GEMV).
  EXPECT_EQ(count(graph(on, model("qwen1.5-moe-a2.7b", DType::FP8_E4M3), decode(1))).act, 2 * L);
}

TEST(ActEpilogue, ThePriceDropsByTheActivationOpsItNoLongerRuns) {
  const auto m = model("llama-3.1-8b");
  const Plan plan = test_plans::tp({0}, int(m.cfg.layers));
  for (int64_t batch : {1, 2}) {
    const Machine off = profile(false), on = profile(true);
    const Topology toff(off), ton(on);
    const CostModel coff(toff), con(ton);
    PlanPricer poff(plan, m.cfg, m.fig, coff), pon(plan, m.cfg, m.fig, con);
    double act_s = 0;
    for (const Op& op : graph(off, m, decode(batch)).ops)
      if (op.kind == OpKind::Elementwise && op.ew == EwKind::Act) {
        const OpCost& c = coff.price(op, true);
        act_s += c.seconds + c.launch_s;  // the kernel and its launch (graph gap where its table lacks one)
      }
    ASSERT_GT(act_s, 0);
    const double saved = poff.price(decode(batch)).total_s() - pon.price(decode(batch)).total_s();
    // One stream, every op after the one before: the step loses the activation ops' prices (the gate_up
    // rows are the same: the profile times the GEMV, whose epilogue costs no measurable time).
    EXPECT_NEAR(saved, act_s, 0.02 * act_s) << "batch " << batch;
  }
}

TEST(ActEpilogue, ValidateWarnsWhenTheExecutorIsForcedTheOtherWay) {
  EXPECT_EQ(fused_act_mismatch(profile(true), -1), "");
  EXPECT_EQ(fused_act_mismatch(profile(true), 1), "");
  EXPECT_EQ(fused_act_mismatch(profile(false), 0), "");
  const std::string w = fused_act_mismatch(profile(false), 1);
  EXPECT_NE(w.find("PEERPLAN_FUSED_ACT=1"), std::string::npos) << w;
  EXPECT_NE(w.find("faster"), std::string::npos) << w;
  EXPECT_NE(fused_act_mismatch(profile(true), 0).find("slower"), std::string::npos);
  // `all` fuses what no profile prices fused: always a warning.
  EXPECT_NE(fused_act_mismatch(profile(true), kActEverywhere).find("PEERPLAN_FUSED_ACT=all"), std::string::npos);
  EXPECT_NE(fused_act_mismatch(profile(false), kActEverywhere).find("A/B"), std::string::npos);
}

}  // namespace
}  // namespace peerplan
