// Elementwise ops carry what they compute and their [rows][cols] shape, so the executor runs the
// right kernel on the right shape without parsing names or re-deriving shapes from byte counts.
#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

// 1 prefill of 512 tokens + 16 decodes at context 1000: 528 tokens.
BatchShape mixed() {
  BatchShape b;
  b.prefill_seqs = 1, b.prefill_tokens = 512, b.prefill_context = 512, b.decode_seqs = 16, b.decode_context = 1000;
  return b;
}

const Op& named(const OpGraph& g, const std::string& name) {
  for (const auto& o : g.ops)
    if (o.name == name) return o;
  throw std::runtime_error("no op " + name);
}

TEST(ElementwiseKind, EveryElementwiseOpHasAKindWhoseShapeCoversItsElements) {
  // Dense (8B, TP2) and MoE with shared experts (Qwen1.5-MoE) and plain experts (Mixtral): no
  // elementwise op is left untyped (the executor refuses one), and only elementwise ops are typed.
  for (const std::string model : {"llama-3.1-8b", "mixtral-8x7b", "qwen1.5-moe-a2.7b"}) {
    auto m = testing::model(model);
    auto topo = testing::machine("nvswitch-8");
    OpGraph g = compile_iteration(test_plans::tp({0, 1}, int(m.cfg.layers)), m.cfg, m.fig, topo->machine(), mixed());
    for (const auto& o : g.ops) {
      if (o.kind != OpKind::Elementwise) {
        EXPECT_EQ(o.ew, EwKind::None) << model << " " << o.name;
        continue;
      }
      EXPECT_NE(o.ew, EwKind::None) << model << " " << o.name << " has no elementwise kind";
      EXPECT_GT(o.ew_rows, 0) << model << " " << o.name;
      EXPECT_GT(o.ew_cols, 0) << model << " " << o.name;
    }
  }
}

TEST(ElementwiseKind, LlamaTp2KindsAndShapes) {
  // Llama-3.1-8B on TP2, 528 tokens: the fused add + norms over [528][4096]; rotary over q and k
  // heads of a rank (16 + 4) x 128; the activation writes [528][14336 / 2 = 7168] from the
  // gate_up GEMM's [528][14336] output (what the executor used to re-derive as mem_bytes / 6
  // rows of last_gemm_n / 2).
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("nvswitch-8");
  OpGraph g = compile_iteration(test_plans::tp({0, 1}, 32), m.cfg, m.fig, topo->machine(), mixed());
  for (const char* n : {"L0.attn_norm", "L3.mlp_norm", "final_norm"}) {
    EXPECT_EQ(named(g, n).ew, EwKind::AddRmsNorm) << n;
    EXPECT_EQ(named(g, n).ew_rows, 528) << n;
    EXPECT_EQ(named(g, n).ew_cols, 4096) << n;
    // x and the residual read, both written, and the weight (per rank: TP keeps the whole hidden).
    EXPECT_DOUBLE_EQ(named(g, n).mem_bytes, (528.0 * 4096 * 4 + 4096) * 2) << n;
  }
  for (const auto& o : g.ops) EXPECT_NE(o.ew, EwKind::Residual) << o.name << ": the norms add the residual";
  const Op& rot = named(g, "L0.rotary");
  EXPECT_EQ(rot.ew, EwKind::Rotary);
  EXPECT_EQ(rot.ew_rows, 528);
  EXPECT_EQ(rot.ew_cols, (16 + 4) * 128);
  const Op& act = named(g, "L0.act");
  EXPECT_EQ(act.ew, EwKind::Act);
  EXPECT_EQ(act.ew_rows, 528);
  EXPECT_EQ(act.ew_cols, 7168);
  EXPECT_EQ(act.ew_cols * 2, named(g, "L0.gate_up").n) << "SiLU(gate) * up reads the gate_up output, two halves";
  // Prices are unchanged by the kind: mem_bytes is still 3 touches x 2 bytes per output element.
  EXPECT_DOUBLE_EQ(act.mem_bytes, 528.0 * 7168 * 3 * 2);
}

TEST(ElementwiseKind, AProfileOfTheEarlierExecutorKeepsTheResidualAdds) {
  // A measured profile without add_rms_norm rows was timed by the executor that ran the residual
  // add and the norm as two kernels: its plans compile to those, so it prices what it timed (and
  // recorded validations re-price as they ran: scripts/revalidate_offline.py). One add_rms_norm
  // row makes it this executor's.
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("nvswitch-8");
  Machine old = topo->machine();
  old.measurements.emplace();
  old.measurements->elementwise.push_back({0, "rms_norm", 1, 4096, compute_stats({2e-6, 2e-6, 2e-6})});
  ASSERT_FALSE(fused_add_norm(old));
  const OpGraph g = compile_iteration(test_plans::tp({0, 1}, 32), m.cfg, m.fig, old, mixed());
  for (const char* n : {"L0.attn_norm", "L3.mlp_norm", "final_norm"}) EXPECT_EQ(named(g, n).ew, EwKind::RmsNorm) << n;
  for (const char* n : {"L0.attn_residual", "L31.mlp_residual"}) {
    EXPECT_EQ(named(g, n).ew, EwKind::Residual) << n;
    EXPECT_EQ(named(g, n).ew_rows * named(g, n).ew_cols, 528 * 4096) << n;
  }
  Machine marked = old;  // what `peerplan profile` writes since, whatever it measured (--only hbm too)
  marked.meta[kExecutorNormsKey] = kFusedAddNorm;
  EXPECT_TRUE(fused_add_norm(marked));
  EXPECT_TRUE(fused_add_norm(parse_machine_json(machine_to_json(marked).dump(), "marked.json"))) << "kept in the file";
  old.measurements->elementwise.push_back({0, "add_rms_norm", 1, 4096, compute_stats({3e-6, 3e-6, 3e-6})});
  EXPECT_TRUE(fused_add_norm(old));
  EXPECT_TRUE(fused_add_norm(topo->machine())) << "no measurements: as vLLM and SGLang run";
  const OpGraph f = compile_iteration(test_plans::tp({0, 1}, 32), m.cfg, m.fig, old, mixed());
  EXPECT_EQ(g.ops.size() - f.ops.size(), size_t(2 * 32 * 2)) << "two residual adds a layer on each of two ranks";
}

TEST(ElementwiseKind, MixtralExpertActivationRowsAreTheRoutedTokens) {
  // Mixtral (8 experts, top-2), one GPU, 528 tokens: each expert gets ceil(528 x 2 / 8) = 132 rows,
  // 8 local experts: [1056][14336] out of gate_up [.][28672].
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  OpGraph g = compile_iteration(test_plans::tp({0}, 32), m.cfg, m.fig, topo->machine(), mixed());
  const Op& act = named(g, "L0.expert.act");
  EXPECT_EQ(act.ew, EwKind::Act);
  EXPECT_EQ(act.ew_rows, 132 * 8);
  EXPECT_EQ(act.ew_cols, 14336);
  EXPECT_EQ(act.ew_cols * 2, named(g, "L0.expert.gate_up").n);
}

}  // namespace
}  // namespace peerplan
