// `peerplan profile --add-model M --machine host.json` (issue 23 item 1), its CPU half: which of a
// model's shapes a profile lacks, the merge of newly timed rows (no duplicates, meta records who
// added what), the refusal of another host's profile, the formats and sweep the new points take.
// The GPU half (profiler/profile_extend.cpp) only times what plan_add_models returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "planner/core/build_info.hpp"
#include "planner/core/error.hpp"
#include "planner/model/model_config.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"
#include "profiler/common/model_shapes.hpp"
#include "profiler/common/profile_extend.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

const Machine& shipped() {  // 2 x H200; bf16 GEMMs and attention of Llama-3.1-8B/70B and Mixtral
  static const Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  return m;
}

ModelConfig qwen2_7b() { return load_model_config(std::string(PEERPLAN_TEST_DATA) + "/model/qwen2-7b.json"); }

const std::vector<std::string> kAll = {"gemm", "attention", "grouped_gemm"};

HostInfo host_of(const Machine& m) {
  HostInfo h;
  h.hostname = m.host;
  for (const GpuSpec& g : m.gpus) h.gpus.push_back({g.name, g.uuid, g.memory_bytes});
  return h;
}

// Rows as the GPU half would time them: every key at every token count / a small grid.
Measurements fake_rows(const ShapeSet& s, const ShapeSweep& sw) {
  Measurements ms;
  SampleStats t = compute_stats({1e-5, 1e-5, 1e-5});
  for (const GemmShapeKey& g : s.gemms)
    for (int64_t m : sw.tokens) ms.gemms.push_back({0, m, g.n, g.k, g.dtype, t});
  for (const AttentionShapeKey& a : s.attention) {
    ms.attention.push_back({0, "decode", 8, 1, 1024, a.heads, a.kv_heads, a.head_dim, a.kv_dtype, t});
    ms.attention.push_back({0, "prefill", 1, 512, 512, a.heads, a.kv_heads, a.head_dim, a.kv_dtype, t});
  }
  for (const GroupedShapeKey& g : s.grouped)
    for (int64_t tok : sw.tokens)
      ms.grouped_gemms.push_back({0, g.n, g.k, g.experts, g.topk, tok, tok * g.topk, 1, 1, g.dtype, t, false, {}});
  return ms;
}

}  // namespace

// One profile, one int4 word order: the first int4 rows take this executor's; later ones must match it.
TEST(AddModel, Int4RowsAreAddedOnlyInTheOrderTheProfilesInt4RowsWereTimedIn) {
  Machine m = shipped();
  EXPECT_EQ(w4_layout_for_added_rows(m, {"bf16"}, "tiled", "p.json"), "") << "no int4 rows added";
  ASSERT_TRUE(std::none_of(m.measurements->gemms.begin(), m.measurements->gemms.end(),
                           [](const GemmTime& g) { return g.dtype == "int4"; }));
  EXPECT_EQ(w4_layout_for_added_rows(m, {"bf16", "int4"}, "tiled", "p.json"), "tiled") << "its first int4 rows";
  GemmTime g;
  g.m = 1, g.n = 4096, g.k = 4096, g.dtype = "int4";
  m.measurements->gemms.push_back(g);  // int4 rows without executor_w4_layout: timed in GPTQ's order
  try {
    w4_layout_for_added_rows(m, {"int4"}, "tiled", "p.json");
    ADD_FAILURE() << "tiled rows added to a GPTQ-timed profile";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_W4_LAYOUT=gptq"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
  }
  EXPECT_EQ(w4_layout_for_added_rows(m, {"int4"}, "gptq", "p.json"), "") << "same order: nothing to change";
}

// One profile, one tiled kernel for 8-bit experts: the first fp8 / int8 grouped rows record this executor's.
TEST(AddModel, EightBitExpertRowsAreAddedOnlyOnTheKernelTheProfilesRowsWereTimedOn) {
  Machine m = shipped();
  EXPECT_EQ(w8_mma_for_added_rows(m, {"bf16", "fp8"}, -1, "p.json"), -1) << "an executor that does not say";
  EXPECT_EQ(w8_mma_for_added_rows(m, {"bf16", "int4"}, 1, "p.json"), -1) << "no 8-bit rows added";
  m.measurements->grouped_gemms.erase(
      std::remove_if(m.measurements->grouped_gemms.begin(), m.measurements->grouped_gemms.end(),
                     [](const GroupedGemmTime& g) { return g.dtype == "fp8" || g.dtype == "int8"; }),
      m.measurements->grouped_gemms.end());
  EXPECT_EQ(w8_mma_for_added_rows(m, {"fp8"}, 1, "p.json"), 1) << "its first 8-bit expert rows";
  GroupedGemmTime g;
  g.n = 2816, g.k = 2048, g.experts = 60, g.topk = 4, g.tokens = 512, g.rows = 2048, g.dtype = "int8";
  m.measurements->grouped_gemms.push_back(g);  // 8-bit rows without executor_moe_w8_mma: the bf16-core kernel
  try {
    w8_mma_for_added_rows(m, {"int8"}, 1, "p.json");
    ADD_FAILURE() << "8-bit tensor-core rows added to a profile timed on the bf16-core kernel";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_MOE_W8_MMA=0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
  }
  EXPECT_EQ(w8_mma_for_added_rows(m, {"int8"}, 0, "p.json"), -1) << "same kernel: nothing to change";
}

TEST(AddModel, ShapesOfAModelAreItsTpShardsInEveryFormat) {
  // Qwen2-7B: 28 query heads, 4 KV heads of 128, hidden 3584. On 2 GPUs, TP 1 and 2 (28 % 2 == 0):
  // qkv is [28*128 + 2*4*128 = 4608, 3584] at TP 1 and [2304, 3584] at TP 2, in each format asked.
  std::vector<ShapeNote> notes;
  const ShapeSet s = model_shape_set({qwen2_7b()}, 2, {"bf16", "fp8"}, &notes);
  EXPECT_TRUE(s.gemms.count({4608, 3584, "bf16"}));
  EXPECT_TRUE(s.gemms.count({2304, 3584, "bf16"}));
  EXPECT_TRUE(s.gemms.count({4608, 3584, "fp8"})) << "every format the profile times";
  EXPECT_TRUE(s.gemms.count({3584, 18944 / 2, "bf16"})) << "down at TP 2 splits k";
  EXPECT_EQ(s.attention, (std::set<AttentionShapeKey>{{28, 4, 128, "bf16"}, {14, 2, 128, "bf16"}}));
  EXPECT_TRUE(s.grouped.empty()) << "a dense model has no expert GEMMs";
  EXPECT_EQ(s.attention_max_context, 131072) << "the grid reaches its context (capped at 128 Ki)";
  EXPECT_TRUE(notes.empty());
}

TEST(AddModel, AMoeModelAddsItsGroupedExpertGemmsWithEpShards) {
  const ModelConfig m = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  const ShapeSet s = model_shape_set({m}, 2, {"bf16"});
  ASSERT_FALSE(s.grouped.empty());
  bool all_experts = false, ep2 = false;
  for (const GroupedShapeKey& g : s.grouped) {
    EXPECT_EQ(g.model_experts, m.experts);
    EXPECT_EQ(g.topk, m.experts_per_token);
    all_experts |= g.experts == m.experts;
    ep2 |= g.experts == m.experts / 2;
  }
  EXPECT_TRUE(all_experts && ep2) << "TP-split experts and rank 0's half under EP 2";
}

TEST(AddModel, AModelTheProfileTimedHasNothingMissing) {
  // The shipped profile timed Llama-3.1-8B and -70B: adding them again measures nothing, so the
  // "missing" rule agrees with what a full profile writes.
  const std::vector<ModelConfig> models = {load_model_config(resolve_model_path("llama-3.1-8b")),
                                           load_model_config(resolve_model_path("llama-3.1-70b"))};
  const AddModelsPlan p = plan_add_models(shipped(), models, add_model_dtypes(shipped(), {}), kAll);
  EXPECT_FALSE(p.wanted.empty());
  EXPECT_TRUE(p.missing.empty()) << describe_shapes(p.missing);
  EXPECT_NE(add_models_report(p, {}, 0, "h.json").find("Nothing to measure"), std::string::npos);
}

TEST(AddModel, AModelTheProfileLacksIsMissingAllButSharedShapes) {
  const AddModelsPlan p = plan_add_models(shipped(), {qwen2_7b()}, add_model_dtypes(shipped(), {}), kAll);
  EXPECT_EQ(p.models, std::vector<std::string>{qwen2_7b().name});
  EXPECT_TRUE(p.missing.gemms.count({4608, 3584, "bf16"}));
  EXPECT_TRUE(p.missing.attention.count({28, 4, 128, "bf16"}));
  EXPECT_LE(p.missing.size(), p.wanted.size());
  for (const GemmShapeKey& g : p.missing.gemms) EXPECT_EQ(g.dtype, "bf16") << "the profile's only GEMM format";
  // --skip attention: only GEMMs are wanted.
  const AddModelsPlan g = plan_add_models(shipped(), {qwen2_7b()}, {"bf16"}, {"gemm", "grouped_gemm"});
  EXPECT_TRUE(g.missing.attention.empty());
  EXPECT_EQ(g.missing.gemms, p.missing.gemms);
}

TEST(AddModel, NewPointsTakeTheProfilesOwnTokensSamplesAndFormats) {
  const ShapeSweep sw = shape_sweep_of(shipped());
  EXPECT_EQ(sw.tokens.size(), 14u) << "1, 2, 4, ... 8192: the m values its GEMMs have";
  EXPECT_EQ(sw.tokens.front(), 1);
  EXPECT_EQ(sw.tokens.back(), 8192);
  EXPECT_EQ(sw.samples, 20);
  EXPECT_EQ(sw.warmup, 3);
  EXPECT_FALSE(sw.quick);
  EXPECT_EQ(add_model_dtypes(shipped(), {}), std::vector<std::string>{"bf16"}) << "what it already has";
  EXPECT_EQ(add_model_dtypes(shipped(), {"bf16", "fp8"}), (std::vector<std::string>{"bf16", "fp8"})) << "--dtypes given";
  Machine bare = shipped();
  bare.measurements->gemms.clear();
  bare.measurements->grouped_gemms.clear();
  bare.meta["profile"]["options"] = {{"quick", true}, {"max_tokens", 256}, {"samples", 20}, {"warmup", 3}};
  const ShapeSweep q = shape_sweep_of(bare);
  EXPECT_EQ(q.tokens, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256})) << "none yet: its max_tokens sweep";
  EXPECT_EQ(q.samples, 5) << "a --quick profile keeps quick samples";
  EXPECT_DOUBLE_EQ(q.duty, 1.0) << "a profile without --duty was timed back to back";
  bare.meta["profile"]["options"]["duty"] = 0.5;
  EXPECT_DOUBLE_EQ(shape_sweep_of(bare).duty, 0.5) << "new rows are paced as the profile's others";
}

TEST(AddModel, MergeAddsRowsOnceAndRecordsWhoAddedWhat) {
  Machine m = shipped();
  const size_t gemms_before = m.measurements->gemms.size(), attn_before = m.measurements->attention.size();
  const AddModelsPlan p = plan_add_models(m, {qwen2_7b()}, {"bf16"}, kAll);
  const Measurements rows = fake_rows(p.missing, p.sweep);
  AddedShapes a;
  a.by = "profile --add-model";
  a.models = p.models;
  a.date = "2026-12-03T09:00:00Z";
  a.measured = p.missing;
  a.seconds = 12.5;
  const MergeCount c = add_measured_shapes(m, rows, a);
  EXPECT_EQ(c.gemms, p.missing.gemms.size() * p.sweep.tokens.size());
  EXPECT_EQ(c.attention, 2 * p.missing.attention.size());
  EXPECT_EQ(c.duplicates, 0u);
  EXPECT_EQ(m.measurements->gemms.size(), gemms_before + c.gemms);
  EXPECT_EQ(m.measurements->attention.size(), attn_before + c.attention);
  EXPECT_TRUE(missing_shapes(p.wanted, *m.measurements).empty()) << "nothing left to add";
  // The same rows again (a second --add-model, or validate after it): nothing is duplicated.
  const MergeCount again = merge_shape_rows(*m.measurements, rows);
  EXPECT_EQ(again.added(), 0u);
  EXPECT_EQ(again.duplicates, rows.gemms.size() + rows.attention.size());
  // meta.added_shapes: one entry naming the models, date, version and rows; survives a save and load.
  const Machine back = parse_machine_json(machine_to_json(m).dump(), "extended.json");
  ASSERT_TRUE(back.meta.contains("added_shapes"));
  ASSERT_EQ(back.meta["added_shapes"].size(), 1u);
  const auto& e = back.meta["added_shapes"][0];
  EXPECT_EQ(e["by"], "profile --add-model");
  EXPECT_EQ(e["models"][0], qwen2_7b().name);
  EXPECT_EQ(e["date"], "2026-12-03T09:00:00Z");
  EXPECT_EQ(e["peerplan"], build::version);
  EXPECT_EQ(e["rows_added"]["gemms"], c.gemms);
  EXPECT_EQ(back.measurements->gemms.size(), m.measurements->gemms.size());
  const std::string report = add_models_report(p, c, 12.5, "host.json");
  EXPECT_NE(report.find(fmt::format("Measured {} shapes", p.missing.size())), std::string::npos) << report;
  EXPECT_NE(report.find("in 12.5 s"), std::string::npos) << report;
}

TEST(AddModel, OneExpertRowsMergeOncePerGpuShapeFormatAndRows) {
  // A second model of the same expert shape (n, k, dtype) times the same one-expert rows again, and
  // perhaps more of them: only the rows the profile lacks are added, counted and recorded.
  Machine m = shipped();
  Measurements first, second;
  for (int64_t r : {32, 64, 96})
    first.expert_gemms.push_back({0, 28672, 4096, r, "int8", compute_stats({1e-5 * double(r)})});
  for (int64_t r : {64, 96, 128}) second.expert_gemms.push_back({0, 28672, 4096, r, "int8", compute_stats({2e-5})});
  second.expert_gemms.push_back({0, 28672, 4096, 64, "bf16", compute_stats({3e-5})});  // another format
  second.expert_gemms.push_back({1, 28672, 4096, 64, "int8", compute_stats({3e-5})});  // another GPU
  const size_t before = m.measurements->expert_gemms.size();
  EXPECT_EQ(merge_shape_rows(*m.measurements, first).expert, 3u);
  AddedShapes a;
  a.by = "profile --add-model";
  const MergeCount c = add_measured_shapes(m, second, a);
  EXPECT_EQ(c.expert, 3u) << "128 rows, the bf16 row and GPU 1's row";
  EXPECT_EQ(c.duplicates, 2u) << "64 and 96 int8 rows on GPU 0 were there";
  EXPECT_EQ(c.added(), 3u);
  ASSERT_EQ(m.measurements->expert_gemms.size(), before + 6);
  EXPECT_NEAR(m.measurements->expert_gemms[before + 1].time.median, 64e-5, 1e-12) << "existing rows are kept";
  EXPECT_EQ(m.meta["added_shapes"].back()["rows_added"]["expert_gemms"], 3);
  const Machine back = parse_machine_json(machine_to_json(m).dump(), "extended.json");
  EXPECT_EQ(back.measurements->expert_gemms.size(), before + 6);
}

TEST(AddModel, AProfileOfAnotherHostIsRefusedNamingBothUuids) {
  const Machine& m = shipped();
  EXPECT_NO_THROW(check_profile_is_this_host(m, "h.json", host_of(m)));
  HostInfo other = host_of(m);
  other.gpus[1].uuid = "GPU-99999999-0000-0000-0000-000000000000";
  try {
    check_profile_is_this_host(m, "h.json", other);
    FAIL() << "another host's profile was accepted";
  } catch (const InputError& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.file(), "h.json");
    EXPECT_NE(w.find(m.gpus[1].uuid), std::string::npos) << w;
    EXPECT_NE(w.find("GPU-99999999"), std::string::npos) << w;
    EXPECT_NE(w.find("peerplan profile --out"), std::string::npos) << "says how to get one: " << w;
  }
  Machine nominal = load_machine(resolve_machine_path("hgx-h100x8"));
  EXPECT_THROW(check_profile_is_this_host(nominal, "hgx.json", host_of(m)), InputError) << "a hand-written machine";
}

// validate hands the missing shapes to a child process (profiler/profile_extend.cpp,
// measure_shape_set_in_child) as JSON: every kind of key, MLA's phase and v_dim, a batched GEMM and
// the sweep must come back exactly, or the child times other shapes than the parent priced.
TEST(AddModel, AShapeRequestRoundTripsThroughJson) {
  ShapeSet s;
  s.gemms.insert({6144, 4096, "bf16", 1});
  s.gemms.insert({512, 128, "bf16", 16});
  s.gemms.insert({4096, 14336, "int4", 1});
  s.attention.insert({32, 8, 128, "bf16", 0, ""});
  s.attention.insert({16, 1, 576, "bf16", 512, "decode"});
  s.grouped.insert({2816, 2048, 60, 4, 60, true, "bf16"});
  ElementwiseShapeKey rot;
  rot.kind = "rotary", rot.cols = 5120, rot.heads = 32, rot.kv_heads = 8, rot.head_dim = 128;
  ElementwiseShapeKey route;
  route.kind = "moe_route", route.cols = 60, route.topk = 4, route.experts = 60, route.local_experts = 30;
  s.elementwise = {rot, route};
  s.attention_max_context = 32768;
  ShapeSweep sw;
  sw.tokens = {1, 2, 8, 4096};
  sw.samples = 7, sw.warmup = 2, sw.quick = true, sw.duty = 0.4;
  const nlohmann::json j = nlohmann::json::parse(shape_request_to_json(s, sw).dump());
  const ShapeRequest r = shape_request_from_json(JsonIn(j, "request.json"));
  EXPECT_EQ(r.shapes.gemms, s.gemms);
  EXPECT_EQ(r.shapes.attention, s.attention);
  EXPECT_EQ(r.shapes.grouped, s.grouped);
  EXPECT_EQ(r.shapes.elementwise, s.elementwise);
  EXPECT_EQ(r.shapes.attention_max_context, 32768);
  EXPECT_EQ(r.sweep.tokens, sw.tokens);
  EXPECT_EQ(r.sweep.samples, 7);
  EXPECT_EQ(r.sweep.warmup, 2);
  EXPECT_TRUE(r.sweep.quick);
  EXPECT_DOUBLE_EQ(r.sweep.duty, 0.4);
}

TEST(AddModel, ABadShapeRequestNamesTheFileAndField) {
  ShapeSet s;
  s.gemms.insert({6144, 4096, "bf16", 1});
  ShapeSweep sw;
  sw.tokens = {1, 2};
  nlohmann::json j = shape_request_to_json(s, sw);
  j["shapes"]["gemms"][0]["n"] = -3;
  try {
    shape_request_from_json(JsonIn(j, "request.json"));
    FAIL() << "a negative n was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("request.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shapes/gemms/0/n"), std::string::npos) << e.what();
  }
  j = shape_request_to_json(s, sw);
  j["sweep"]["tokens"][1] = 0;
  EXPECT_THROW(shape_request_from_json(JsonIn(j, "request.json")), InputError);
}
