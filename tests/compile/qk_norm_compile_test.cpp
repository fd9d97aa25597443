// Qwen3's per-head QK-norm (issue 23 item 4): one elementwise op per layer and GPU, between the
// qkv projection and rotary, over the q and k heads of the GPU's shard; none for other models.
#include <string>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

testing::ModelFix test_model(const std::string& file) {
  testing::ModelFix m;
  m.cfg = load_model_config(std::string(PEERPLAN_TEST_DATA) + "/model/" + file);
  m.fig = derive_figures(m.cfg);
  return m;
}

// 1 prefill of 512 tokens + 16 decodes at context 1000: 528 tokens.
BatchShape mixed() {
  BatchShape b;
  b.prefill_seqs = 1, b.prefill_tokens = 512, b.prefill_context = 512, b.decode_seqs = 16, b.decode_context = 1000;
  return b;
}

const Op* find(const OpGraph& g, const std::string& name) {
  for (const auto& o : g.ops)
    if (o.name == name) return &o;
  return nullptr;
}
const Op& named(const OpGraph& g, const std::string& name) {
  if (const Op* o = find(g, name)) return *o;
  throw std::runtime_error("no op " + name);
}

TEST(QkNorm, Qwen3Tp2OpShapeBytesAndPlace) {
  // Qwen3-8B (32 heads, 8 kv heads, head_dim 128) on TP2, 528 tokens: each rank normalises its
  // (16 + 4) heads x 128 values per token in place, reading and writing them once (2 bytes each),
  // plus the q_norm and k_norm weights (128 each).
  auto m = test_model("qwen3-8b.json");
  ASSERT_TRUE(m.cfg.qk_norm);
  auto topo = testing::machine("nvswitch-8");
  OpGraph g = compile_iteration(test_plans::tp({0, 1}, int(m.cfg.layers)), m.cfg, m.fig, topo->machine(), mixed());
  int count = 0;
  for (const Op& o : g.ops) {
    if (o.ew != EwKind::QkNorm) continue;
    ++count;
    EXPECT_EQ(o.kind, OpKind::Elementwise);
    EXPECT_EQ(o.name, "L" + std::to_string(o.layer) + ".qk_norm");
    EXPECT_EQ(o.ew_rows, 528);
    EXPECT_EQ(o.ew_cols, (16 + 4) * 128);
    EXPECT_DOUBLE_EQ(o.mem_bytes, (528.0 * 2560 * 2 + 2 * 128) * 2);
    EXPECT_DOUBLE_EQ(o.flops, 4.0 * 528 * 2560);
  }
  EXPECT_EQ(count, 2 * m.cfg.layers) << "one per layer and rank";
  // Each rank's chain: qkv GEMM -> qk_norm -> rotary (deps are the op before on the same GPU).
  for (int l : {0, 17, 35}) {
    const std::string L = "L" + std::to_string(l) + ".";
    std::vector<const Op*> qkv, qn, rot;
    for (const Op& o : g.ops) {
      if (o.name == L + "qkv") qkv.push_back(&o);
      if (o.name == L + "qk_norm") qn.push_back(&o);
      if (o.name == L + "rotary") rot.push_back(&o);
    }
    ASSERT_EQ(qkv.size(), 2u);
    ASSERT_EQ(qn.size(), 2u);
    ASSERT_EQ(rot.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(qn[r]->gpus, qkv[r]->gpus);
      EXPECT_EQ(qn[r]->deps, std::vector<int>{qkv[r]->id}) << L << " rank " << r;
      EXPECT_EQ(rot[r]->deps, std::vector<int>{qn[r]->id}) << L << " rank " << r;
      EXPECT_EQ(qn[r]->stage, qkv[r]->stage);
      EXPECT_EQ(qn[r]->ew_cols, qkv[r]->n - 4 * 128) << "q and k of the qkv output, not v";
    }
  }
}

TEST(QkNorm, Qwen3MoeTp4ShardsHeads) {
  // Qwen3-30B-A3B (32 heads, 4 kv heads) on TP4: 8 q heads and 1 kv head a rank; decode only.
  auto m = test_model("qwen3-30b-a3b.json");
  ASSERT_TRUE(m.cfg.qk_norm);
  auto topo = testing::machine("nvswitch-8");
  BatchShape b;
  b.decode_seqs = 8, b.decode_context = 2048;
  OpGraph g = compile_iteration(test_plans::tp({0, 1, 2, 3}, int(m.cfg.layers)), m.cfg, m.fig, topo->machine(), b);
  const Op& o = named(g, "L0.qk_norm");
  EXPECT_EQ(o.ew, EwKind::QkNorm);
  EXPECT_EQ(o.ew_rows, 8);
  EXPECT_EQ(o.ew_cols, (8 + 1) * 128);
  EXPECT_DOUBLE_EQ(o.mem_bytes, (8.0 * 9 * 128 * 2 + 256) * 2);
  EXPECT_EQ(o.layer, 0);
}

TEST(QkNorm, OtherModelsHaveNone) {
  // Models without qk_norm compile exactly as before: no such op, rotary right after the qkv GEMM.
  for (const std::string model : {"llama-3.1-8b", "mixtral-8x7b", "qwen1.5-moe-a2.7b", "mistral-7b"}) {
    auto m = testing::model(model);
    ASSERT_FALSE(m.cfg.qk_norm) << model;
    auto topo = testing::machine("nvswitch-8");
    OpGraph g = compile_iteration(test_plans::tp({0, 1}, int(m.cfg.layers)), m.cfg, m.fig, topo->machine(), mixed());
    for (const Op& o : g.ops) {
      EXPECT_NE(o.ew, EwKind::QkNorm) << model << " " << o.name;
      EXPECT_EQ(o.name.find("qk_norm"), std::string::npos) << model << " " << o.name;
    }
    const Op& rot = named(g, "L0.rotary");
    ASSERT_EQ(rot.deps.size(), 1u);
    EXPECT_EQ(g.ops[size_t(rot.deps[0])].name, "L0.qkv") << model;
  }
}

}  // namespace
}  // namespace peerplan
