// The `elementwise` measurement's CPU half (profiler/common/elementwise_plan.*, model_shapes.*):
// the keys it times per model and TP degree are the compiler's own (kind, cols) for every plan
// layout, the executor's call arguments it derives, the rotary cache layout, the buffers; and
// end to end on the CPU: rows written for those keys load back and price every elementwise op of the
// models' plans from a measured point, after which validate finds nothing missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "planner/compile/compiler.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/elementwise_cost.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"
#include "planner/topology/topology.hpp"
#include "planner/validate/missing_shapes.hpp"
#include "profiler/common/elementwise_plan.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/common/model_shapes.hpp"
#include "profiler/common/profile_extend.hpp"
#include "profiler/common/sweep.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

ModelConfig shipped_model(const char* name) { return load_model_config(resolve_model_path(name)); }
ModelConfig data_model(const char* file) {
  return load_model_config(std::string(PEERPLAN_TEST_DATA) + "/model/" + file);
}

std::set<std::pair<std::string, int64_t>> kind_cols(const std::set<ElementwiseShapeKey>& keys) {
  std::set<std::pair<std::string, int64_t>> s;
  for (const auto& k : keys) s.insert({k.kind, k.cols});
  return s;
}

Plan one_stage(const std::vector<int>& gpus, const ModelConfig& m) {
  Plan p;
  p.name = "t";
  PlanStage st;
  st.gpus = gpus;
  st.tp = int(gpus.size());
  st.layer_begin = 0, st.layer_end = m.layers, st.embeddings = true, st.lm_head = true;
  p.stages.push_back(st);
  return p;
}

Plan pipeline2(const ModelConfig& m) {  // two stages of one GPU each
  Plan p = one_stage({0}, m);
  p.stages[0].layer_end = m.layers / 2, p.stages[0].lm_head = false;
  PlanStage s1 = p.stages[0];
  s1.gpus = {1}, s1.layer_begin = m.layers / 2, s1.layer_end = m.layers, s1.embeddings = false, s1.lm_head = true;
  p.stages.push_back(s1);
  p.boundary_modes = {"peer"};
  return p;
}

Plan ep2(const ModelConfig& m, const std::string& attention) {  // experts halved over GPUs 0 and 1
  Plan p = one_stage({0, 1}, m);
  p.ep = 2;
  p.ep_attention = attention;
  for (int64_t e = 0; e < m.experts; ++e) p.expert_gpu.push_back(e < m.experts / 2 ? 0 : 1);
  return p;
}

Machine gpus(int n) {
  Machine m;
  m.gpus.resize(size_t(n));
  return m;
}

// The (kind, cols) of every elementwise op of `p` at a decode step, a long prefill and a mixed one.
std::set<std::pair<std::string, int64_t>> compiled_kind_cols(const Plan& p, const ModelConfig& m) {
  std::set<std::pair<std::string, int64_t>> s;
  const ModelFigures fig = derive_figures(m);
  for (const BatchShape& sh : {BatchShape{0, 0, 0, 1, 100}, BatchShape{0, 0, 0, 256, 2000},
                               BatchShape{1, 8192, 8192, 0, 0}, mixed_iteration()})
    for (const Op& op : compile_iteration(p, m, fig, gpus(2), sh).ops)
      if (op.kind == OpKind::Elementwise) s.insert({ew_kind_name(op.ew), op.ew_cols});
  return s;
}

SampleStats us(double v) { return compute_stats({v * 1e-6, v * 1e-6, v * 1e-6}); }

}  // namespace

TEST(ElementwiseShapes, QwenMoeOnTwoGpusAreTheCompilersColsAtTp1And2) {
  // Qwen1.5-MoE-A2.7B: hidden 2048, 16 heads = 16 KV heads of 128, 60 experts top-4 of width 1408,
  // a shared expert of 5632, every layer MoE. TP 1 and 2 divide the heads.
  const ModelConfig m = shipped_model("qwen1.5-moe-a2.7b");
  const std::set<ElementwiseShapeKey> keys = model_elementwise_shapes(m, 2);
  const std::set<std::pair<std::string, int64_t>> want = {
      {"add_rms_norm", 2048},  // the fused residual add + norm (machine.hpp fused_add_norm)
      {"rotary", 32 * 128}, {"rotary", 16 * 128},  // (q + kv heads) x head_dim per GPU at TP 1, 2
      {"act", 5632},        {"act", 2816},         // the shared expert's SiLU(gate) * up at TP 1, 2
      {"act", 1408},        {"act", 704},          // the routed experts' (TP-split at TP 2)
      {"moe_route", 60},    {"moe_combine", 2048}};
  EXPECT_EQ(kind_cols(keys), want);
  for (const ElementwiseShapeKey& k : keys) {
    if (k.kind == "rotary") {
      EXPECT_EQ(k.head_dim, 128);
      EXPECT_EQ((k.heads + k.kv_heads) * k.head_dim, k.cols) << "what the executor's rotary runs over";
    } else {
      EXPECT_EQ(k.head_dim, 0) << k.kind;
    }
    if (k.kind == "moe_route" || k.kind == "moe_combine") {
      EXPECT_EQ(k.topk, 4);
      EXPECT_EQ(k.experts, 60);
      EXPECT_EQ(k.local_experts, 60) << "TP-split experts: all on the GPU";
    } else {
      EXPECT_EQ(k.topk, 0) << k.kind;
    }
  }
  // One GPU: TP 1 only.
  EXPECT_EQ(kind_cols(model_elementwise_shapes(m, 1)).count({"rotary", 16 * 128}), 0u);
}

TEST(ElementwiseShapes, Qwen3AddsQkNormOverQAndKHeads) {
  const ModelConfig m = data_model("qwen3-8b.json");
  ASSERT_TRUE(m.qk_norm);
  const auto kc = kind_cols(model_elementwise_shapes(m, 2));
  const int64_t tp1 = (m.heads + m.kv_heads) * m.head_dim;
  EXPECT_TRUE(kc.count({"qk_norm", tp1})) << "q and k heads of one token, TP 1";
  EXPECT_TRUE(kc.count({"qk_norm", tp1 / 2})) << "TP 2";
  EXPECT_FALSE(kind_cols(model_elementwise_shapes(shipped_model("llama-3.1-8b"), 2)).count({"qk_norm", 5120}))
      << "Llama has no QK-norm";
}

TEST(ElementwiseShapes, DeepSeekV2LiteTimesMlaRotaryNotTheStandardRotary) {
  // MLA's rotary op is mla_rope_and_cache (engine_mla.cpp): keyed "mla_rotary", (heads + 1) x 64
  // per GPU (each head's q_pe and the shared k_pe) at TP 1 and 2, never the standard rotary_and_cache.
  const ModelConfig m = shipped_model("deepseek-v2-lite");
  ASSERT_TRUE(m.mla);
  std::vector<ShapeNote> notes;
  const std::set<ElementwiseShapeKey> keys = model_elementwise_shapes(m, 2, &notes);
  const auto kc = kind_cols(keys);
  EXPECT_TRUE(kc.count({"mla_rotary", (16 + 1) * 64})) << "TP 1";
  EXPECT_TRUE(kc.count({"mla_rotary", (8 + 1) * 64})) << "TP 2";
  for (const ElementwiseShapeKey& k : keys) {
    EXPECT_NE(k.kind, "rotary");
    if (k.kind == "mla_rotary") {
      EXPECT_EQ(k.kv_heads, 1) << "the shared k_pe";
      EXPECT_EQ(k.head_dim, 64);
      EXPECT_EQ((k.heads + 1) * 64, k.cols);
    }
  }
  for (const ShapeNote& n : notes) EXPECT_EQ(n.what.find("rotary"), std::string::npos) << n.what << ": " << n.why;
  // The profile's timing keys keep it (a kind the table takes).
  const std::vector<ElementwiseShapeKey> timed = elementwise_timing_keys(keys);
  EXPECT_TRUE(std::any_of(timed.begin(), timed.end(), [](const ElementwiseShapeKey& k) { return k.kind == "mla_rotary"; }));
}

TEST(ElementwisePlan, MlaRotaryCallsAndBuffersAreTheExecutors) {
  // engine_mla.cpp run_mla_rotary: q from the q projection's [heads][192] rows, the kv_a row (576)
  // from Y, q_pe into the absorbed [heads][576] rows at a decode step, the latent row into the cache.
  const ElementwiseShapeKey k{"mla_rotary", 17 * 64, 16, 1, 64};
  const ElementwiseCall c = elementwise_call(k, 8);
  EXPECT_EQ(c.row_stride, 16 * 192);
  EXPECT_EQ(c.cols, 17 * 64);
  EXPECT_DOUBLE_EQ(c.bytes, (8.0 * (2 * 576 + 2 * 16 * 64) + 512) * 2) << "kv row in, cache row out, q_pe in and out";
  const std::vector<int64_t> grid = {1, 8, 256, 4096};
  const ElementwiseBuffers b = elementwise_buffers({k}, grid);
  EXPECT_EQ(b.y, 4096 * 576);
  EXPECT_EQ(b.qkv, 4096 * 16 * 192);
  EXPECT_EQ(b.norm_w, 512) << "kv_a_layernorm's weight";
  EXPECT_EQ(b.mla_q, kEwDecodeRows * 16 * 576) << "absorbed rows of a decode step only";
  EXPECT_EQ(b.latent_cache, b.layout.slots * b.layout.ctx * 576);
  EXPECT_EQ(b.cache, 0) << "no standard K/V cache";
}

TEST(ElementwiseShapes, EveryLayoutAndBatchOfThePlansGivesNoOtherKindOrCols) {
  // The keys come from one mixed iteration of TP plans; pipeline and EP plans (attention TP or
  // replicated), decode steps and long prefills must not compile an elementwise op of another
  // (kind, cols), or the cost model would find no curve for it.
  for (const ModelConfig& m : {shipped_model("llama-3.1-8b"), shipped_model("qwen1.5-moe-a2.7b"),
                               shipped_model("mixtral-8x7b"), data_model("qwen3-8b.json"),
                               data_model("qwen3-30b-a3b.json"), shipped_model("deepseek-v2-lite")}) {
    const auto keys = kind_cols(model_elementwise_shapes(m, 2));
    std::vector<Plan> plans = {one_stage({0}, m), one_stage({0, 1}, m), pipeline2(m)};
    if (m.is_moe()) plans.push_back(ep2(m, "tp")), plans.push_back(ep2(m, "replicated"));
    for (const Plan& p : plans)
      for (const auto& kc : compiled_kind_cols(p, m))
        EXPECT_TRUE(keys.count(kc)) << m.name << " plan with " << p.stages.size() << " stage(s), ep " << p.ep << ": "
                                    << kc.first << " cols " << kc.second << " has no key";
  }
}

TEST(ElementwiseShapes, ValidateKeysAnEpShardsOpsByItsOwnExperts) {
  const ModelConfig m = shipped_model("qwen1.5-moe-a2.7b");
  const Plan p = ep2(m, "tp");
  const OpGraph g = compile_iteration(p, m, derive_figures(m), gpus(2), mixed_iteration());
  const std::set<ElementwiseShapeKey> keys = graph_elementwise_shapes(g, p, m);
  bool route = false;
  for (const ElementwiseShapeKey& k : keys)
    if (k.kind == "moe_route") {
      route = true;
      EXPECT_EQ(k.local_experts, 30) << "rank 0's half: what its routing counts";
      EXPECT_EQ(k.cols, 60) << "the table's key stays the model's experts";
    }
  EXPECT_TRUE(route);
}

TEST(ElementwisePlan, OneKeyPerKindAndColsTheFirstInOrder) {
  std::set<ElementwiseShapeKey> s;
  s.insert({"rotary", 5120, 36, 4, 128});
  s.insert({"rotary", 5120, 32, 8, 128});  // same (kind, cols): one curve in the table
  s.insert({"rotary", 2560, 16, 4, 128});
  s.insert({"layer_norm", 4096});          // not a kind the table takes
  s.insert({"act", 0});                    // no cols
  const std::vector<ElementwiseShapeKey> v = elementwise_timing_keys(s);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].cols, 2560);
  EXPECT_EQ(v[1].cols, 5120);
  EXPECT_EQ(v[1].heads, 32) << "the set's first of (rotary, 5120)";
}

TEST(ElementwisePlan, CallsTakeTheExecutorsArguments) {
  // engine_ops.cpp: act runs at least one row and whole 8-element vectors.
  ElementwiseCall a = elementwise_call({"act", 700}, 0);
  EXPECT_EQ(a.rows, 1);
  EXPECT_EQ(a.cols, 696);
  EXPECT_EQ(elementwise_call({"act", 4}, 3).cols, 8);
  const ElementwiseCall r = elementwise_call({"rotary", 5120, 32, 8, 128}, 16);
  EXPECT_EQ(r.row_stride, (32 + 2 * 8) * 128) << "the fused qkv row the kernel reads";
  EXPECT_EQ(r.cols, 5120);
  const ElementwiseCall n = elementwise_call({"rms_norm", 4096}, 2);
  EXPECT_DOUBLE_EQ(n.bytes, (2.0 * 2 * 4096 + 4096) * 2);
  // Reps: a few-us kernel fills the graph, a large one runs once.
  EXPECT_EQ(elementwise_reps(elementwise_call({"moe_route", 60, 0, 0, 0, 4, 60, 60}, 1)), 64);
  EXPECT_EQ(elementwise_reps(elementwise_call({"act", 28672}, 8192)), 1);
  const int mid = elementwise_reps(elementwise_call({"rms_norm", 8192}, 1024));
  EXPECT_GT(mid, 1);
  EXPECT_LT(mid, 64);
}

TEST(ElementwisePlan, RotaryPlacesEveryTokenInsideTheCacheWithoutCollisions) {
  const std::vector<int64_t> grid = token_counts(8192);
  const RotaryLayout l = rotary_layout(grid.back());
  EXPECT_EQ(l.slots, kEwDecodeRows);
  EXPECT_GE(l.slots * l.ctx, 8192);
  for (int64_t rows : grid) {
    std::set<std::pair<int, int>> seen;
    for (int64_t t = 0; t < rows; ++t) {
      const RotaryPlace p = rotary_place(t, rows, l);
      ASSERT_GE(p.slot, 0);
      ASSERT_LT(p.slot, l.slots) << rows;
      ASSERT_GE(p.position, 0);
      ASSERT_LT(p.position, l.ctx) << rows;
      ASSERT_TRUE(seen.insert({p.slot, p.position}).second) << "two tokens of one call in one cache row, rows " << rows;
      if (rows <= kEwDecodeRows) EXPECT_EQ(p.slot, t) << "a decode step: one sequence per token";
    }
  }
  EXPECT_GE(rotary_layout(100000).slots * rotary_layout(100000).ctx, 100000);
}

TEST(ElementwisePlan, BuffersHoldTheLargestCallOfEveryKey) {
  const ModelConfig m = shipped_model("qwen1.5-moe-a2.7b");
  const std::vector<ElementwiseShapeKey> keys = elementwise_timing_keys(model_elementwise_shapes(m, 2));
  const std::vector<int64_t> grid = token_counts(8192);
  const ElementwiseBuffers b = elementwise_buffers(keys, grid);
  EXPECT_EQ(b.max_rows, 8192);
  EXPECT_EQ(b.hidden, 8192 * 2048);
  EXPECT_EQ(b.y, std::max<int64_t>(8192 * 4 * 2048, 8192 * 2 * 5632)) << "combine's routed rows or act's input";
  EXPECT_EQ(b.z, 8192 * 5632);
  EXPECT_EQ(b.logits, 8192 * 60);
  EXPECT_EQ(b.qkv, 8192 * (16 + 2 * 16) * 128);
  EXPECT_EQ(b.norm_w, 2048);
  EXPECT_EQ(b.cache, b.layout.slots * 16 * b.layout.ctx * 128);
  EXPECT_EQ(b.max_topk, 4);
  EXPECT_EQ(b.max_local_experts, 60);
  EXPECT_GT(elementwise_est_seconds(keys.size(), grid.size()), 0);
  EXPECT_LT(elementwise_est_seconds(keys.size(), grid.size()), 10) << "a model's keys take seconds, not minutes";
}

TEST(ElementwiseMissing, AKindAndColsWithoutRowsIsMissingWhateverItsRows) {
  ShapeSet want;
  want.elementwise = {{"rms_norm", 4096}, {"rotary", 6144, 32, 16, 128}};
  Measurements have;
  EXPECT_EQ(missing_shapes(want, have).elementwise.size(), 2u);
  have.elementwise.push_back({1, "rms_norm", 64, 4096, us(3)});  // any GPU, any rows: the curve exists
  have.elementwise.push_back({0, "rotary", 1, 4096, us(3)});     // other cols
  const ShapeSet miss = missing_shapes(want, have);
  ASSERT_EQ(miss.elementwise.size(), 1u);
  EXPECT_EQ(miss.elementwise.begin()->kind, "rotary");
  EXPECT_EQ(describe_shapes(miss), "1 elementwise kernel shape");
  const nlohmann::json j = shapes_to_json(miss);
  ASSERT_EQ(j["elementwise"].size(), 1u);
  EXPECT_EQ(j["elementwise"][0]["heads"], 32);
  EXPECT_FALSE(shapes_to_json(ShapeSet{}).contains("elementwise")) << "older entries keep their fields";
}

TEST(ElementwiseMissing, MergeAddsRowsOnceAndCountsThem) {
  Measurements into, from;
  into.elementwise.push_back({0, "act", 1, 704, us(3)});
  from.elementwise.push_back({0, "act", 1, 704, us(4)});   // already there: skipped
  from.elementwise.push_back({0, "act", 2, 704, us(4)});
  from.elementwise.push_back({1, "act", 1, 704, us(4)});   // another GPU
  const MergeCount c = merge_shape_rows(into, from);
  EXPECT_EQ(c.elementwise, 2u);
  EXPECT_EQ(c.duplicates, 1u);
  EXPECT_EQ(c.added(), 2u);
  EXPECT_EQ(into.elementwise.size(), 3u);
  EXPECT_DOUBLE_EQ(into.elementwise[0].time.median, 3e-6) << "the profile's own row stays";
}

TEST(ElementwiseMissing, RowsOfTheKeysRoundTripAndPriceEveryOpFromAMeasuredPoint) {
  // What the GPU half writes, faked on the CPU: a row per key and grid row. Written as JSON and
  // loaded back, the table must price every elementwise op of each model's plans from a measured
  // point, and validate must then find no elementwise shape missing.
  Machine machine = load_machine(resolve_machine_path("h200x2-nvlink"));
  ASSERT_TRUE(machine.measurements.has_value());
  ASSERT_TRUE(machine.measurements->elementwise.empty()) << "the shipped profile has no table yet";
  const std::vector<ModelConfig> models = {shipped_model("llama-3.1-8b"), shipped_model("qwen1.5-moe-a2.7b"),
                                           data_model("qwen3-8b.json")};
  // A profile of this executor times add_rms_norm (one row of a width no model has marks it here):
  // plans on it run the fused norm, the keys the profiler times. The shipped profile, without an
  // elementwise table, is the earlier executor's: its plans keep the residual adds (compiler_test).
  Machine fresh = machine;
  fresh.measurements->elementwise.push_back({0, "add_rms_norm", 1, 8, us(2)});
  std::set<ElementwiseShapeKey> keys;
  for (const ModelConfig& m : models) {
    const auto k = model_elementwise_shapes(m, machine.gpu_count());
    keys.insert(k.begin(), k.end());
    // Before: validate wants elementwise shapes of this model, all among the profiler's keys.
    const ShapeSet before = plan_missing_shapes(one_stage({0, 1}, m), m, derive_figures(m), fresh);
    EXPECT_FALSE(before.elementwise.empty()) << m.name;
    for (const auto& kc : kind_cols(before.elementwise)) EXPECT_TRUE(kind_cols(k).count(kc)) << m.name << " " << kc.first;
  }
  const std::vector<int64_t> grid = token_counts(8192);
  for (const ElementwiseShapeKey& k : elementwise_timing_keys(keys))
    for (int64_t r : grid)
      machine.measurements->elementwise.push_back({0, k.kind, r, k.cols, us(2 + 0.001 * double(r))});
  const Machine back = parse_machine_json(machine_to_json(machine).dump(), "profiled.json");
  ASSERT_EQ(back.measurements->elementwise.size(), machine.measurements->elementwise.size());
  Topology topo(back);
  CostModel cost(topo);
  for (const ModelConfig& m : models) {
    const Plan p = one_stage({0, 1}, m);
    for (const Op& op : compile_iteration(p, m, derive_figures(m), back, BatchShape{0, 0, 0, 3, 700}).ops) {
      if (op.kind != OpKind::Elementwise) continue;
      const CostSource s = cost.price(op, false).source;
      EXPECT_TRUE(s == CostSource::Measured || s == CostSource::Interpolated) << m.name << " " << op.name;
    }
    EXPECT_TRUE(plan_missing_shapes(p, m, derive_figures(m), back).elementwise.empty()) << m.name;
  }
}

TEST(ElementwiseMissing, AddModelWantsElementwiseOnlyWhenSelected) {
  const Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  const ModelConfig q = shipped_model("qwen1.5-moe-a2.7b");
  const AddModelsPlan with = plan_add_models(m, {q}, {"bf16"}, {"gemm", "elementwise"});
  EXPECT_EQ(kind_cols(with.missing.elementwise), kind_cols(model_elementwise_shapes(q, 2)));
  const AddModelsPlan without = plan_add_models(m, {q}, {"bf16"}, {"gemm", "attention", "grouped_gemm"});
  EXPECT_TRUE(without.wanted.elementwise.empty());
}
