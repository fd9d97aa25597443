// The plan compiler and memory check against hand-computed values (Llama-3.1-8B: hidden 4096, 32
// heads, 8 KV heads, head_dim 128, intermediate 14336, vocab 128256, 32 layers, bf16).
#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/model/routing_model.hpp"
#include "planner/plan/plan.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

Plan stage_plan(std::vector<std::vector<int>> groups, std::vector<std::pair<int64_t, int64_t>> ranges,
                std::vector<std::string> modes = {}) {
  Plan p;
  p.name = "test";
  for (size_t i = 0; i < groups.size(); ++i) {
    PlanStage s;
    s.gpus = groups[i];
    s.tp = int(groups[i].size());
    s.layer_begin = ranges[i].first;
    s.layer_end = ranges[i].second;
    s.embeddings = i == 0;
    s.lm_head = i + 1 == groups.size();
    p.stages.push_back(s);
  }
  p.boundary_modes = modes.empty() ? std::vector<std::string>(groups.size() - 1, "peer") : modes;
  return p;
}

// 1 prefill of 512 tokens + 16 decodes at context 1000: 528 tokens, 17 sequences.
BatchShape mixed() {
  BatchShape b;
  b.prefill_seqs = 1, b.prefill_tokens = 512, b.prefill_context = 512, b.decode_seqs = 16, b.decode_context = 1000;
  return b;
}

const Op* op(const OpGraph& g, const std::string& name, int gpu) {
  for (const auto& o : g.ops)
    if (o.name == name && o.gpus[0] == gpu) return &o;
  return nullptr;
}
int count(const OpGraph& g, OpKind k) {
  int n = 0;
  for (const auto& o : g.ops) n += o.kind == k;
  return n;
}

TEST(Compiler, Tp2ShardShapesAndCollectiveSizes) {
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("nvswitch-8");
  OpGraph g = compile_iteration(stage_plan({{0, 1}}, {{0, 32}}), m.cfg, m.fig, topo->machine(), mixed());
  const Op* qkv = op(g, "L0.qkv", 1);
  ASSERT_TRUE(qkv);
  // Column-parallel: 16 query heads + 2 x 4 KV heads per rank, x 128.
  EXPECT_EQ(qkv->m, 528);
  EXPECT_EQ(qkv->n, (16 + 2 * 4) * 128);
  EXPECT_EQ(qkv->k, 4096);
  EXPECT_DOUBLE_EQ(qkv->flops, 2.0 * 528 * 3072 * 4096);
  const Op* o = op(g, "L31.o", 0);  // row-parallel: K split
  EXPECT_EQ(o->k, 2048);
  EXPECT_EQ(o->n, 4096);
  EXPECT_EQ(op(g, "L5.gate_up", 0)->n, 14336);  // 2 x 14336 / 2
  EXPECT_EQ(op(g, "L5.down", 0)->k, 7168);
  // All-reduce after o and after down in each layer + after the vocab-parallel embedding.
  EXPECT_EQ(count(g, OpKind::AllReduce), 2 * 32 + 1);
  const Op* ar = op(g, "L7.attn_allreduce", 0);
  EXPECT_EQ(ar->bytes, 528 * 4096 * 2);  // tokens x hidden x bf16
  EXPECT_EQ(ar->gpus, (std::vector<int>{0, 1}));
  // LM head: logits for each sequence's last token, vocab split by tp, then gathered.
  const Op* lm = op(g, "lm_head", 1);
  EXPECT_EQ(lm->m, 17);
  EXPECT_EQ(lm->n, 64128);
  EXPECT_EQ(op(g, "lm_head_allgather", 0)->bytes, 17 * 128256 * 2);
  // Attention, decode part: 16 heads and 4 KV heads per rank; QK^T + PV = 2 x 16 x 256 FLOPs per
  // attended token; the KV cache read is 16 seqs x 1000 tokens x (2 x 4 x 128 x 2 bytes).
  const Op* dec = op(g, "L0.attn_decode", 0);
  EXPECT_EQ(dec->attn_heads, 16);
  EXPECT_EQ(dec->attn_kv_heads, 4);
  EXPECT_EQ(dec->attn_batch, 16);
  EXPECT_EQ(dec->attn_context, 1000);
  EXPECT_DOUBLE_EQ(dec->flops, 2.0 * 16 * 256 * 16 * 1000);
  EXPECT_DOUBLE_EQ(dec->mem_bytes, 16.0 * 1000 * 2048 + 16 * 2048 + 16 * 16 * 256 * 2);
  // Prefill part: causal, a 512-token chunk attends on average to 512 - 511/2 tokens.
  const Op* pre = op(g, "L0.attn_prefill", 0);
  EXPECT_TRUE(pre->attn_prefill);
  EXPECT_EQ(pre->attn_q_len, 512);
  EXPECT_DOUBLE_EQ(pre->flops, 2.0 * 16 * 256 * 512 * (512 - 255.5));
  EXPECT_EQ(g.stage_ops.size(), 1u);
  EXPECT_EQ(g.stage_ops[0].size(), g.ops.size());
}

TEST(Compiler, KvHeadsAreReplicatedWhenTpExceedsThem) {
  auto cfg = parse_model_config(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
      "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 4096,
      "vocab_size": 1000, "max_position_embeddings": 4096})", "tiny-gqa");
  auto fig = derive_figures(cfg);
  auto topo = testing::machine("nvswitch-8");
  OpGraph g = compile_iteration(stage_plan({{0, 1, 2, 3}}, {{0, 2}}), cfg, fig, topo->machine(), mixed());
  const Op* qkv = op(g, "L0.qkv", 3);
  EXPECT_EQ(qkv->n, (2 + 2 * 1) * 128);  // 2 query heads, 1 (replicated) KV head each of K and V
  EXPECT_EQ(op(g, "L0.attn_decode", 3)->attn_kv_heads, 1);
  MemoryOptions mo;
  mo.max_seqs = 10, mo.context = 100;
  auto mem = check_memory(stage_plan({{0, 1, 2, 3}}, {{0, 2}}), cfg, fig, topo->machine(), mo);
  // Each rank stores one KV head of 128 x 2 bytes for K and V, per layer, per token: 512 bytes.
  EXPECT_EQ(mem.gpus[2].kv_cache, 10 * 100 * 2 * 512);
}

TEST(Compiler, DecodeFlopsMatchTheModelFiguresExactly) {
  // Single GPU, 16 decodes at context 1000: GEMM + attention FLOPs = 16 x flops_per_token(1000).
  for (const std::string name : {"llama-3.1-8b", "mixtral-8x7b"}) {
    auto m = testing::model(name);
    auto topo = testing::machine("nvswitch-8");
    BatchShape b;
    b.decode_seqs = 16, b.decode_context = 1000;
    OpGraph g = compile_iteration(stage_plan({{0}}, {{0, m.cfg.layers}}), m.cfg, m.fig, topo->machine(), b);
    double flops = 0;
    for (const auto& o : g.ops)
      if (o.kind == OpKind::Gemm || o.kind == OpKind::GroupedGemm || o.kind == OpKind::Attention) flops += o.flops;
    EXPECT_NEAR(flops / (16 * m.fig.flops_per_token_at(1000)), 1.0, 1e-12) << name;
  }
}

TEST(Compiler, PipelineBoundarySendsTheActivationInThePlansMode) {
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("pcie-2socket-8");
  OpGraph g = compile_iteration(stage_plan({{0}, {4}}, {{0, 16}, {16, 32}}, {"host_staged"}), m.cfg, m.fig,
                                topo->machine(), mixed());
  const Op* send = op(g, "stage0->1", 0);
  ASSERT_TRUE(send);
  EXPECT_EQ(send->kind, OpKind::Send);
  EXPECT_EQ(send->gpus, (std::vector<int>{0, 4}));
  // The hidden states and the residual stream (the next stage's first norm adds them), as vLLM.
  EXPECT_EQ(send->bytes, 2 * 528 * 4096 * 2);
  EXPECT_EQ(send->mode, TransferMode::HostStaged);
  EXPECT_EQ(g.num_stages, 2);
  EXPECT_TRUE(op(g, "L15.mlp_norm", 0));
  EXPECT_FALSE(op(g, "L15.mlp_residual", 0));
  EXPECT_TRUE(op(g, "L16.attn_norm", 4));
  EXPECT_FALSE(op(g, "L16.attn_norm", 0));
  EXPECT_EQ(count(g, OpKind::AllReduce), 0);
  // The first op of stage 1 waits for the boundary copy.
  const Op& first1 = g.ops[size_t(g.stage_ops[1][0])];
  EXPECT_EQ(first1.deps, std::vector<int>{send->id});
}

TEST(Compiler, ExpertParallelWithReplicatedAttentionDispatchesByAllToAll) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = stage_plan({{0, 1, 2, 3}}, {{0, 32}});
  p.ep = 4;
  p.ep_attention = "replicated";
  p.expert_gpu = {0, 0, 1, 1, 2, 2, 3, 3};
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), mixed());
  // Each rank runs 1/4 of the batch: 4 decodes + 128 prefill tokens = 132 tokens.
  EXPECT_EQ(op(g, "L0.qkv", 2)->m, 132);
  EXPECT_EQ(op(g, "L0.qkv", 2)->n, (32 + 16) * 128);  // whole attention on each rank
  // Local experts: 2 per rank, receiving what routing sends them of the group's 528 tokens.
  const auto& counts = routing::expert_counts(m.cfg.moe_routing, 8, 2, 528, 3);
  int64_t busiest = 132 * 2;  // what each rank sends: its tokens x top-k
  for (int r = 0; r < 4; ++r) busiest = std::max(busiest, routing::group_load(counts, 2 * r, 2).rows);
  const Op* disp = op(g, "L3.ep_dispatch", 0);
  ASSERT_TRUE(disp);
  EXPECT_EQ(disp->kind, OpKind::AllToAll);
  EXPECT_EQ(disp->bytes, busiest * 4096 * 2);  // the busiest rank's rows x hidden x bf16
  EXPECT_EQ(op(g, "L3.ep_combine", 0)->bytes, disp->bytes);
  const Op* eg = op(g, "L3.expert.gate_up", 1);
  EXPECT_EQ(eg->kind, OpKind::GroupedGemm);
  EXPECT_EQ(eg->batch_count, 2);
  EXPECT_EQ(eg->m, counts[2] + counts[3]);
  EXPECT_EQ(eg->group_max_rows, std::max(counts[2], counts[3]));
  EXPECT_EQ(eg->n, 2 * 14336);
  EXPECT_EQ(count(g, OpKind::AllReduce), 0);
}

TEST(Compiler, ExpertParallelWithTpAttentionCombinesByAllReduce) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = stage_plan({{0, 1}}, {{0, 32}});
  p.ep = 2;
  p.expert_gpu = {0, 0, 0, 0, 1, 1, 1, 1};
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), mixed());
  EXPECT_EQ(op(g, "L0.ep_combine_allreduce", 0)->bytes, 528 * 4096 * 2);
  EXPECT_EQ(op(g, "L0.expert.gate_up", 0)->batch_count, 4);  // 528 tokens touch all 4 local experts
  EXPECT_EQ(count(g, OpKind::AllToAll), 0);
}

TEST(Compiler, MemoryOfTp2IsTheExactShardBytes) {
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("nvswitch-8");
  MemoryOptions mo;
  mo.max_seqs = 64;  // context 4096, 8192 batched tokens, 10% + 2 GiB reserve
  auto mem = check_memory(stage_plan({{0, 1}}, {{0, 32}}), m.cfg, m.fig, topo->machine(), mo);
  ASSERT_EQ(mem.gpus.size(), 2u);
  const GpuMemory& g = mem.gpus[1];
  // Per layer per rank: qkv 4096x3072 + o 2048x4096 + gate_up 4096x14336 + down 7168x4096 + 2 norms.
  int64_t layer = 4096LL * 3072 + 2048LL * 4096 + 4096LL * 14336 + 7168LL * 4096 + 2 * 4096;
  int64_t vocab_half = 64128LL * 4096;  // vocab-parallel embedding and LM head
  EXPECT_EQ(g.weights, (32 * layer + 2 * vocab_half + 4096) * 2);
  // KV: 64 seqs x 4096 tokens x 32 layers x (2 x 4 KV heads x 128 x 2 bytes).
  EXPECT_EQ(g.kv_cache, 64LL * 4096 * 32 * 2048);
  // Activations: 8192 tokens x (4 x hidden + qkv 3072 + gate_up 14336) x 2 + fp32 logits 64 x 64128.
  EXPECT_EQ(g.activations, 8192LL * (4 * 4096 + 3072 + 14336) * 2 + 64LL * 64128 * 4);
  EXPECT_EQ(g.reserve, (80LL << 30) / 10 + (2LL << 30));
  EXPECT_TRUE(mem.fits);
  // Single GPU holds exactly the model's weight bytes.
  auto one = check_memory(stage_plan({{0}}, {{0, 32}}), m.cfg, m.fig, topo->machine(), mo);
  EXPECT_EQ(one.gpus[0].weights, m.fig.weight_bytes);
}

TEST(Compiler, APlanThatDoesNotFitIsRejectedWithTheNumbers) {
  auto m = testing::model("llama-3.1-70b");
  auto topo = testing::machine("nvswitch-8");
  MemoryOptions mo;
  auto mem = check_memory(stage_plan({{0}}, {{0, 80}}), m.cfg, m.fig, topo->machine(), mo);
  EXPECT_FALSE(mem.fits);
  EXPECT_EQ(mem.max_seqs_that_fit, 0);
  EXPECT_NE(mem.why.find("GPU 0 needs"), std::string::npos) << mem.why;
  EXPECT_NE(mem.why.find(": weights 131.4 + KV 320.0 + act"), std::string::npos) << mem.why;
  EXPECT_NE(mem.why.find("+ reserve 10.0 > 80.0 GiB"), std::string::npos) << mem.why;
  // TP8 fits, and says how many 4096-token sequences would.
  auto tp8 = check_memory(stage_plan({{0, 1, 2, 3, 4, 5, 6, 7}}, {{0, 80}}), m.cfg, m.fig, topo->machine(), mo);
  EXPECT_TRUE(tp8.fits) << tp8.why;
  EXPECT_GE(tp8.max_seqs_that_fit, mo.max_seqs);
}

TEST(Compiler, BadBatchShapeAndUnshardablePlanAreInputErrors) {
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("nvswitch-8");
  EXPECT_THROW(compile_iteration(stage_plan({{0}}, {{0, 32}}), m.cfg, m.fig, topo->machine(), BatchShape{}), InputError);
  try {
    compile_iteration(stage_plan({{0, 1, 2}}, {{0, 32}}), m.cfg, m.fig, topo->machine(), mixed());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a TP degree dividing the 32 attention heads"), std::string::npos) << e.what();
  }
}

TEST(PlanJson, RoundTripsAndRejectsBadFieldsByName) {
  Plan p = stage_plan({{0, 1}, {2, 3}}, {{0, 10}, {10, 32}}, {"host_staged"});
  p.notes = {"why"};
  p.extra = {{"k", 1}};
  nlohmann::json j = plan_to_json(p);
  Plan q = parse_plan_json(j, "x.json");
  EXPECT_EQ(plan_to_json(q), j);
  validate_plan(q, 32, 0, 8, "x.json");
  EXPECT_EQ(q.all_gpus(), (std::vector<int>{0, 1, 2, 3}));
  j["stages"][1]["gpus"][0] = 4294967296LL;  // must not wrap to GPU 0
  try {
    parse_plan_json(j, "x.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "stages/1/gpus/0");
  }
  Plan bad = q;
  bad.boundary_modes = {"teleport"};
  try {
    validate_plan(bad, 32, 0, 8, "x.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'boundary_modes/0': \"peer\" or \"host_staged\""), std::string::npos)
        << e.what();
  }
  nlohmann::json v2 = plan_to_json(q);
  v2["version"] = 2;
  EXPECT_THROW(parse_plan_json(v2, "x.json"), InputError);
}

}  // namespace
}  // namespace peerplan
