// The compiler's MoE layers with routed counts (issue 14): per GPU a router GEMM, the routing
// step, grouped GEMMs over the touched experts only, the activation over the routed rows and the
// combine; the counts are the routing model's, EP all-to-all volumes follow the busiest rank, and
// the memory model sizes routed-row buffers for the worst case.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/model/routing_model.hpp"
#include "planner/plan/plan.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

Plan one_stage(std::vector<int> gpus) {
  Plan p;
  p.name = "test";
  PlanStage s;
  s.gpus = gpus;
  s.tp = int(gpus.size());
  s.layer_begin = 0;
  s.embeddings = s.lm_head = true;
  p.stages.push_back(s);
  return p;
}

BatchShape decode(int64_t batch) {
  BatchShape b;
  b.decode_seqs = batch, b.decode_context = 1024;
  return b;
}

std::vector<const Op*> layer_ops(const OpGraph& g, int layer, int gpu) {
  std::vector<const Op*> out;
  for (const auto& o : g.ops)
    if (o.layer == layer && o.gpus[0] == gpu) out.push_back(&o);
  return out;
}
const Op* find(const OpGraph& g, const std::string& name, int gpu) {
  for (const auto& o : g.ops)
    if (o.name == name && o.gpus[0] == gpu) return &o;
  return nullptr;
}

TEST(MoeCompile, QwenMoeDecodeBatch1RunsOnlyTheTouchedExperts) {
  auto m = testing::model("qwen1.5-moe-a2.7b");  // 60 experts, top-4, shared expert 5632, 24 MoE layers
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0});
  p.stages[0].layer_end = m.cfg.layers;
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(1));
  std::vector<std::string> mlp;
  for (const Op* o : layer_ops(g, 7, 0)) {
    const std::string n = o->name.substr(3);
    if (n == "router" || n.rfind("moe_", 0) == 0 || n.rfind("expert", 0) == 0 || n.rfind("shared", 0) == 0)
      mlp.push_back(n);
  }
  EXPECT_EQ(mlp, (std::vector<std::string>{"router", "moe_route", "shared.gate_up", "shared.act", "shared.down",
                                           "shared_gate", "expert.gate_up", "expert.act", "expert.down",
                                           "moe_combine"}));
  const Op* gu = find(g, "L7.expert.gate_up", 0);
  ASSERT_TRUE(gu);
  EXPECT_EQ(gu->kind, OpKind::GroupedGemm);
  EXPECT_EQ(gu->m, 4);            // one token, four experts
  EXPECT_EQ(gu->batch_count, 4);  // four of 60 touched
  EXPECT_EQ(gu->group_max_rows, 1);
  EXPECT_EQ(gu->n, 2 * 1408);
  EXPECT_EQ(gu->k, 2048);
  EXPECT_EQ(gu->expert_first, 0);
  EXPECT_EQ(gu->expert_count, 60);
  // Only the 4 touched experts' weights are read.
  EXPECT_DOUBLE_EQ(gu->mem_bytes, double(4 * 2048 + 4 * 2048 * 2816 + 4 * 2816) * 2);
  EXPECT_DOUBLE_EQ(gu->flops, 2.0 * 4 * 2816 * 2048);
  const Op* dn = find(g, "L7.expert.down", 0);
  EXPECT_EQ(dn->kind, OpKind::GroupedGemm);
  EXPECT_EQ(dn->n, 2048);
  EXPECT_EQ(dn->k, 1408);
  const Op* act = find(g, "L7.expert.act", 0);
  EXPECT_EQ(act->ew, EwKind::Act);
  EXPECT_EQ(act->ew_rows, 4);
  const Op* route = find(g, "L7.moe_route", 0);
  EXPECT_EQ(route->ew, EwKind::MoeRoute);
  EXPECT_EQ(route->ew_rows, 1);
  EXPECT_EQ(route->ew_cols, 60);
  const Op* comb = find(g, "L7.moe_combine", 0);
  EXPECT_EQ(comb->ew, EwKind::MoeCombine);
  EXPECT_EQ(comb->ew_rows, 1);
  EXPECT_EQ(comb->ew_cols, 2048);
  // The shared expert stays a dense GEMM over every token.
  EXPECT_EQ(find(g, "L7.shared.gate_up", 0)->kind, OpKind::Gemm);
  EXPECT_EQ(find(g, "L7.shared.gate_up", 0)->m, 1);
}

TEST(MoeCompile, RowsTouchedAndBusiestComeFromTheRoutingModel) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0});
  p.stages[0].layer_end = m.cfg.layers;
  for (const auto& spec : {routing::RoutingSpec{}, routing::parse_routing_arg("zipf:1.5")}) {
    m.cfg.moe_routing = spec;
    OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(32));
    for (int layer : {0, 13, 31}) {
      const auto& c = routing::expert_counts(spec, 8, 2, 32, layer);
      const routing::GroupLoad want = routing::group_load(c, 0, 8);
      const Op* gu = find(g, "L" + std::to_string(layer) + ".expert.gate_up", 0);
      ASSERT_TRUE(gu);
      EXPECT_EQ(gu->m, 64);
      EXPECT_EQ(gu->batch_count, want.touched);
      EXPECT_EQ(gu->group_max_rows, want.max_rows);
    }
  }
  // Skew: the busiest expert of a zipf routing holds more rows than uniform's, layer for layer on average.
  int64_t u = 0, z = 0;
  for (int layer = 0; layer < 32; ++layer) {
    u += routing::group_load(routing::expert_counts(routing::RoutingSpec{}, 8, 2, 32, layer), 0, 8).max_rows;
    z += routing::group_load(routing::expert_counts(routing::parse_routing_arg("zipf:1.5"), 8, 2, 32, layer), 0, 8).max_rows;
  }
  EXPECT_GT(z, u);
}

TEST(MoeCompile, ExpertParallelRanksGetTheirBlocksCounts) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0, 1});
  p.stages[0].layer_end = m.cfg.layers;
  p.ep = 2;
  p.expert_gpu = {0, 0, 0, 0, 1, 1, 1, 1};
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(8));
  const auto& c = routing::expert_counts(m.cfg.moe_routing, 8, 2, 8, 4);
  int64_t rows = 0;
  for (int r = 0; r < 2; ++r) {
    const routing::GroupLoad want = routing::group_load(c, 4 * r, 4);
    const Op* gu = find(g, "L4.expert.gate_up", r);
    if (want.rows == 0) {
      EXPECT_EQ(gu, nullptr);
      continue;
    }
    ASSERT_TRUE(gu);
    EXPECT_EQ(gu->m, want.rows);
    EXPECT_EQ(gu->batch_count, want.touched);
    EXPECT_EQ(gu->expert_first, 4 * r);
    EXPECT_EQ(gu->expert_count, 4);
    rows += gu->m;
  }
  EXPECT_EQ(rows, 16);  // every token's two copies land on one of the ranks
  EXPECT_TRUE(find(g, "L4.ep_combine_allreduce", 0));
  EXPECT_EQ(find(g, "L4.moe_route", 1)->expert_first, 4);
}

TEST(MoeCompile, AllToAllCarriesTheBusiestRanksRows) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0, 1, 2, 3});
  p.stages[0].layer_end = m.cfg.layers;
  p.ep = 4;
  p.ep_attention = "replicated";
  p.expert_gpu = {0, 0, 1, 1, 2, 2, 3, 3};
  m.cfg.moe_routing = routing::parse_routing_arg("zipf:2");
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(64));
  const auto& c = routing::expert_counts(m.cfg.moe_routing, 8, 2, 64, 3);
  int64_t busiest = 16 * 2;  // what each rank sends: its 16 tokens x top-2
  for (int r = 0; r < 4; ++r) busiest = std::max(busiest, routing::group_load(c, 2 * r, 2).rows);
  EXPECT_GT(busiest, 32);  // a skewed routing overloads a rank
  EXPECT_EQ(find(g, "L3.ep_dispatch", 0)->bytes, busiest * 4096 * 2);
  EXPECT_EQ(find(g, "L3.ep_combine", 0)->bytes, busiest * 4096 * 2);
  // The combine runs after the return all-to-all, on the rank's own 16 tokens.
  const Op* comb = find(g, "L3.moe_combine", 2);
  ASSERT_TRUE(comb);
  EXPECT_GT(comb->id, find(g, "L3.ep_combine", 0)->id);
  EXPECT_EQ(comb->ew_rows, 16);
}

TEST(MoeCompile, RepresentativeLayerAveragesTheLayersItStandsFor) {
  auto m = testing::model("qwen1.5-moe-a2.7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0});
  p.stages[0].layer_end = m.cfg.layers;
  std::vector<std::vector<int>> rl(size_t(m.cfg.layers));
  rl[0].resize(24);
  std::iota(rl[0].begin(), rl[0].end(), 0);
  CompileOptions opt{&rl};
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(16), opt);
  double touched = 0, busiest = 0;
  for (int l = 0; l < 24; ++l) {
    const routing::GroupLoad gl = routing::group_load(routing::expert_counts(m.cfg.moe_routing, 60, 4, 16, l), 0, 60);
    touched += double(gl.touched) / 24, busiest += double(gl.max_rows) / 24;
  }
  // One grouped GEMM per distinct load of the 24 layers, weighted by the share of layers routing it
  // (op_graph.hpp group_share): priced per kernel, not as one rounded mean load.
  double share = 0, w_touched = 0, w_busiest = 0;
  int ops = 0;
  for (const Op& o : g.ops)
    if (o.name == "L0.expert.gate_up" && o.gpus == std::vector<int>{0}) {
      EXPECT_EQ(o.m, 64);
      EXPECT_GT(o.group_share, 0);
      EXPECT_NEAR(o.flops, o.group_share * 2.0 * 64 * o.n * o.k, 1e-6 * o.flops);
      share += o.group_share, w_touched += o.group_share * double(o.batch_count);
      w_busiest += o.group_share * double(o.group_max_rows), ++ops;
    }
  EXPECT_GT(ops, 1);
  EXPECT_NEAR(share, 1.0, 1e-12);
  EXPECT_NEAR(w_touched, touched, 1e-9);
  EXPECT_NEAR(w_busiest, busiest, 1e-9);
  // Layer 1 has no list: it routes as itself.
  const routing::GroupLoad l1 = routing::group_load(routing::expert_counts(m.cfg.moe_routing, 60, 4, 16, 1), 0, 60);
  EXPECT_EQ(find(g, "L1.expert.gate_up", 0)->batch_count, l1.touched);
}

TEST(MoeCompile, EagerGroupsCarryEachExpertsRowsOfEveryLayerTheyStandFor) {
  // A prefill of 2048 tokens on EP2 (Mixtral: experts 0-3 on GPU 0, 4-7 on GPU 1), layer 0 standing for
  // layers 0-7: each rank's op lists its touched experts' rows of all eight layers, by the busiest-first
  // position the loads are taken in, which is what the cuBLAS path is priced from (grouped_gemm_cost.hpp).
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0, 1});
  p.stages[0].layer_end = m.cfg.layers;
  p.ep = 2;
  p.expert_gpu = {0, 0, 0, 0, 1, 1, 1, 1};
  std::vector<std::vector<int>> rl(size_t(m.cfg.layers));
  rl[0] = {0, 1, 2, 3, 4, 5, 6, 7};
  CompileOptions opt{&rl};
  BatchShape b;
  b.prefill_seqs = 1, b.prefill_tokens = 2048, b.prefill_context = 2048;
  OpGraph g = compile_iteration(p, m.cfg, m.fig, topo->machine(), b, opt);
  std::vector<int32_t> want_all;
  for (int l = 0; l < 8; ++l) {
    const auto& c = routing::expert_counts(m.cfg.moe_routing, 8, 2, 2048, l);
    want_all.insert(want_all.end(), c.begin(), c.end());
  }
  std::vector<int32_t> got_all;
  for (int r = 0; r < 2; ++r) {
    const Op* gu = find(g, "L0.expert.gate_up", r);
    ASSERT_TRUE(gu);
    const ExpertRows& er = gu->group_expert_rows;
    ASSERT_FALSE(er.empty());
    EXPECT_EQ(er.layers, 8);
    EXPECT_TRUE(std::is_sorted(er.rows->begin(), er.rows->end()));
    EXPECT_LE(er.rows->size(), 8u * 4u);
    // The op's mean load is these rows' mean per layer (rounded).
    const int64_t sum = std::accumulate(er.rows->begin(), er.rows->end(), int64_t(0));
    EXPECT_NEAR(double(sum) / 8, double(gu->m), 0.5);
    got_all.insert(got_all.end(), er.rows->begin(), er.rows->end());
    EXPECT_EQ(find(g, "L0.expert.down", r)->group_expert_rows, er);  // down runs on the same rows
  }
  // Both ranks together hold every expert of every layer exactly once.
  std::sort(want_all.begin(), want_all.end());
  std::sort(got_all.begin(), got_all.end());
  EXPECT_EQ(got_all, want_all);
  // Graph-timed iterations (at most kGraphTimedMaxRows tokens) never take the cuBLAS path: no rows.
  OpGraph d = compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(64), opt);
  EXPECT_TRUE(find(d, "L0.expert.gate_up", 0)->group_expert_rows.empty());
}

TEST(MoeCompile, ExpertsOfAGpuMustBeOneBlock) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0, 1});
  p.stages[0].layer_end = m.cfg.layers;
  p.ep = 2;
  p.expert_gpu = {0, 1, 0, 1, 0, 1, 0, 1};
  try {
    compile_iteration(p, m.cfg, m.fig, topo->machine(), decode(4));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "expert_gpu");
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
}

// validate_plan refuses it first, naming the expert where a GPU's block resumes: a validated plan must
// compile (the fuzzer's plan target found [0,0,0,0,1,1,0,1] accepted, then thrown by the compiler).
TEST(MoeCompile, ValidationRefusesExpertsOfAGpuInTwoBlocks) {
  Plan p = one_stage({0, 1});
  p.stages[0].layer_end = 32;
  p.ep = 2;
  p.expert_gpu = {0, 0, 0, 0, 1, 1, 0, 1};
  try {
    validate_plan(p, 32, 8, 8, "x.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "expert_gpu");
    EXPECT_NE(std::string(e.what()).find("expert 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
  p.expert_gpu = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_NO_THROW(validate_plan(p, 32, 8, 8, "x.json"));
}

TEST(MoeCompile, MemorySizesRoutedRowsForTheWorstCase) {
  auto m = testing::model("mixtral-8x7b");
  auto topo = testing::machine("nvswitch-8");
  Plan p = one_stage({0, 1, 2, 3});
  p.stages[0].layer_end = m.cfg.layers;
  p.ep = 4;
  p.ep_attention = "replicated";
  p.expert_gpu = {0, 0, 1, 1, 2, 2, 3, 3};
  MemoryOptions mo;
  mo.max_seqs = 16;
  const MemoryReport rep = check_memory(p, m.cfg, m.fig, topo->machine(), mo);
  // Per rank 8192 / 4 = 2048 tokens: 4 x hidden + qkv (32 + 16 heads x 128); no dense MLP. Experts:
  // every one of the group's 8192 tokens may send min(top-2, 2 local) = 2 rows here, each
  // 2 x 14336 wide; all-to-all buffers: 2048 x 2 rows sent + 16384 received, x hidden; the rows
  // gathered for cuBLAS per expert (a prefill of more than 256 tokens), x hidden.
  const int64_t A = 2048, rows = 8192 * 2;
  const int64_t want = 2 * (A * (4 * 4096 + 48 * 128) + rows * 2 * 14336) + (A * 2 + rows) * 4096 * 2 +
                       rows * 4096 * 2 + 4 * 32000 * 4;  // fp32 logits of max_seqs / dp = 4 sequences
  EXPECT_EQ(rep.gpus[0].activations, want);
}

}  // namespace
}  // namespace peerplan
