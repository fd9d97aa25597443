// Multi-head latent attention compiled as vLLM's and SGLang's MLA backends run it (docs/attention.md
// "MLA"): q / kv_a over the iteration's tokens, kv_a_layernorm, rope + latent cache write; prefill
// decompresses every attended latent row with kv_b and runs MHA (q.k 192, v 128); decode absorbs
// W_UK and W_UV into two batched GEMMs around an MQA over the 576-wide latent rows.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

ModelConfig shipped(const std::string& name) {
  return load_model_config(find_data_file("models/llm/" + name + "/config.json"));
}

const Op& named(const OpGraph& g, const std::string& name, int gpu = 0) {
  for (const auto& o : g.ops)
    if (o.name == name && o.gpus[0] == gpu) return o;
  throw std::runtime_error("no op " + name);
}
bool has(const OpGraph& g, const std::string& name) {
  for (const auto& o : g.ops)
    if (o.name == name) return true;
  return false;
}
// One iteration of `b` on a TP plan over `gpus` of the 8-GPU NVSwitch test machine.
OpGraph compile_tp(const ModelConfig& c, const std::vector<int>& gpus, const BatchShape& b) {
  auto topo = testing::machine("nvswitch-8");
  return compile_iteration(test_plans::tp(gpus, int(c.layers)), c, derive_figures(c), topo->machine(), b);
}

// The names of layer 0's ops on GPU 0, in graph order, up to the attention all-reduce or the MLP's norm.
std::vector<std::string> attention_chain(const OpGraph& g) {
  std::vector<std::string> v;
  for (const auto& o : g.ops) {
    if (o.layer != 0 || o.gpus[0] != 0) continue;
    if (o.name == "L0.mlp_norm" || o.name == "L0.attn_residual" || o.name == "L0.attn_allreduce") break;
    v.push_back(o.name);
  }
  return v;
}

// DeepSeek-V2-Lite: 16 heads, full-rank q (192 per head), kv_lora_rank 512, rope 64, v 128.
TEST(MlaCompile, DecodeIsAbsorbed) {
  const ModelConfig c = shipped("deepseek-v2-lite");
  BatchShape b;
  b.decode_seqs = 8, b.decode_context = 1000;
  const OpGraph g = compile_tp(c, {0}, b);
  EXPECT_EQ(attention_chain(g), (std::vector<std::string>{"L0.attn_norm", "L0.q", "L0.kv_a", "L0.kv_norm",
                                                          "L0.rotary", "L0.q_absorb", "L0.attn_decode",
                                                          "L0.v_absorb", "L0.o"}));
  EXPECT_FALSE(has(g, "L0.kv_b")) << "decode never decompresses the cache";
  const Op& q = named(g, "L0.q");
  EXPECT_EQ(q.m, 8); EXPECT_EQ(q.k, 2048); EXPECT_EQ(q.n, 16 * 192);
  const Op& kn = named(g, "L0.kv_norm");
  EXPECT_EQ(kn.ew, EwKind::RmsNorm); EXPECT_EQ(kn.ew_rows, 8); EXPECT_EQ(kn.ew_cols, 512);
  const Op& rope = named(g, "L0.rotary");
  EXPECT_EQ(rope.ew, EwKind::MlaRotary); EXPECT_EQ(rope.ew_cols, (16 + 1) * 64);  // not Rotary: another kernel
  // q_pe of 16 heads read and written, the 576-wide kv_a row read and the cache row written.
  EXPECT_DOUBLE_EQ(rope.mem_bytes, 8.0 * (16 * 64 + 576) * 2 * 2);
  const Op& qa = named(g, "L0.q_absorb");
  EXPECT_EQ(qa.batch_count, 16); EXPECT_EQ(qa.m, 8); EXPECT_EQ(qa.n, 512); EXPECT_EQ(qa.k, 128);
  EXPECT_DOUBLE_EQ(qa.flops, 2.0 * 8 * 512 * 128 * 16);
  const Op& at = named(g, "L0.attn_decode");
  EXPECT_EQ(at.attn_heads, 16); EXPECT_EQ(at.attn_kv_heads, 1);
  EXPECT_EQ(at.attn_head_dim, 576); EXPECT_EQ(at.attn_v_dim, 512);
  EXPECT_EQ(at.attn_batch, 8); EXPECT_EQ(at.attn_context, 1000);
  EXPECT_DOUBLE_EQ(at.flops, 2.0 * 16 * (576 + 512) * 8 * 1000);
  // 576 bf16 per cached token, read once for all heads; latent queries in, latent outputs out.
  EXPECT_DOUBLE_EQ(at.mem_bytes, 8.0 * 1000 * 576 * 2 + 8.0 * 16 * (576 + 512) * 2);
  const Op& va = named(g, "L0.v_absorb");
  EXPECT_EQ(va.batch_count, 16); EXPECT_EQ(va.m, 8); EXPECT_EQ(va.n, 128); EXPECT_EQ(va.k, 512);
  EXPECT_EQ(named(g, "L0.o").k, 16 * 128);
}

TEST(MlaCompile, PrefillDecompressesTheAttendedContext) {
  const ModelConfig c = shipped("deepseek-v2-lite");
  // Two chunks of 256 new tokens at context 2048 (1792 cached each), plus 4 decodes: TP2.
  BatchShape b;
  b.prefill_seqs = 2, b.prefill_tokens = 512, b.prefill_context = 2048, b.decode_seqs = 4, b.decode_context = 500;
  const OpGraph g = compile_tp(c, {0, 1}, b);
  EXPECT_EQ(attention_chain(g),
            (std::vector<std::string>{"L0.attn_norm", "L0.q", "L0.kv_a", "L0.kv_norm", "L0.rotary", "L0.kv_b",
                                      "L0.attn_prefill", "L0.q_absorb", "L0.attn_decode", "L0.v_absorb", "L0.o"}));
  for (int gpu : {0, 1}) {
    const Op& kvb = named(g, "L0.kv_b", gpu);
    EXPECT_EQ(kvb.m, 2 * 2048) << "every attended token, the cached context included";
    EXPECT_EQ(kvb.k, 512); EXPECT_EQ(kvb.n, 8 * (128 + 128));
    const Op& p = named(g, "L0.attn_prefill", gpu);
    EXPECT_EQ(p.attn_heads, 8); EXPECT_EQ(p.attn_kv_heads, 8);
    EXPECT_EQ(p.attn_head_dim, 192); EXPECT_EQ(p.attn_v_dim, 128);
    EXPECT_EQ(p.attn_batch, 2); EXPECT_EQ(p.attn_q_len, 256); EXPECT_EQ(p.attn_context, 2048);
    EXPECT_EQ(p.kv_dtype, DType::BF16);
    EXPECT_DOUBLE_EQ(p.flops, 2.0 * 8 * (192 + 128) * 512 * (2048 - 255 / 2.0));
    EXPECT_EQ(named(g, "L0.q_absorb", gpu).batch_count, 8);
    EXPECT_EQ(named(g, "L0.kv_a", gpu).n, 576) << "replicated on every rank";
    EXPECT_EQ(named(g, "L0.rotary", gpu).ew_cols, (8 + 1) * 64);
  }
}

TEST(MlaCompile, LowRankQueryHasItsNorm) {
  // DeepSeek-V3: q_lora_rank 1536 -> q_a, q_a_norm over 1536, q_b.
  const ModelConfig c = load_model_config(std::string(PEERPLAN_TEST_DATA) + "/model/deepseek-v3.json");
  BatchShape b;
  b.decode_seqs = 2, b.decode_context = 100;
  const OpGraph g = compile_tp(c, {0, 1, 2, 3, 4, 5, 6, 7}, b);
  const std::vector<std::string> chain = attention_chain(g);
  ASSERT_GE(chain.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(chain.begin(), chain.begin() + 5),
            (std::vector<std::string>{"L0.attn_norm", "L0.q_a", "L0.q_a_norm", "L0.q_b", "L0.kv_a"}));
  EXPECT_EQ(named(g, "L0.q_a_norm").ew_cols, 1536);
  EXPECT_EQ(named(g, "L0.q_absorb").batch_count, 128 / 8);
  EXPECT_EQ(named(g, "L0.attn_decode").attn_heads, 16);
}

TEST(MlaCompile, OtherModelsKeepHeadDimAsValueDim) {
  const ModelConfig c = shipped("llama-3.1-8b");
  BatchShape b;
  b.decode_seqs = 2, b.decode_context = 100;
  const OpGraph g = compile_tp(c, {0}, b);
  EXPECT_EQ(named(g, "L0.attn_decode").attn_v_dim, 128);
  EXPECT_FALSE(has(g, "L0.kv_norm"));
}

}  // namespace
}  // namespace peerplan
