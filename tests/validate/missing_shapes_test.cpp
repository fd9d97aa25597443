// validate measures the plan's shapes the profile lacks before it predicts (issue 23 item 1):
// which shapes (from the cost model's sources on the plan's own ops), the measuring through the
// GPU backend, the merge, machine-extended.json and --update-machine, and the cases where nothing
// is measured (all measured, --no-measure-missing, another host's profile). A fake backend stands
// in for the profiler's timing code; it returns rows for exactly the shapes it was asked for.
#include <gtest/gtest.h>

#include <filesystem>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/shape_set.hpp"
#include "planner/validate/gpu_backend.hpp"
#include "planner/validate/host_validation.hpp"
#include "planner/validate/missing_shapes.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;
namespace fs = std::filesystem;

namespace {

const std::string kMachine = resolve_machine_path("h200x2-nvlink");  // timed 8B, 70B, Mixtral (bf16)
const std::string kQwen2 = std::string(PEERPLAN_TEST_DATA) + "/model/qwen2-7b.json";  // not timed

ModelConfig qwen2() { return load_model_config(kQwen2); }

HostInfo profiled_host() {
  const Machine m = load_machine(kMachine);
  HostInfo h;
  h.hostname = m.host;
  for (const GpuSpec& g : m.gpus) h.gpus.push_back({g.name, g.uuid, g.memory_bytes});
  return h;
}

class MeasuringBackend : public GpuBackend {
 public:
  HostInfo host = profiled_host();
  int measure_calls = 0;
  ShapeSet asked;
  ShapeSweep sweep;

  Measurements measure_shapes(const Machine&, const ShapeSet& shapes, const ShapeSweep& sw) override {
    ++measure_calls;
    asked = shapes;
    sweep = sw;
    Measurements ms;  // a measured point of every key: 20 us whatever the size
    const SampleStats t = compute_stats({2e-5, 2e-5, 2e-5});
    for (const GemmShapeKey& g : shapes.gemms)
      for (int64_t m : sw.tokens) ms.gemms.push_back({0, m, g.n, g.k, g.dtype, t, g.batch});
    for (const AttentionShapeKey& a : shapes.attention)
      for (int64_t c : {256, 1024, 4096}) {  // an MLA key: its own phase only, rows of its v_dim
        if (a.phase != "prefill")
          ms.attention.push_back({0, "decode", 8, 1, c, a.heads, a.kv_heads, a.head_dim, a.kv_dtype, t, a.v_dim});
        if (a.phase != "decode")
          ms.attention.push_back({0, "prefill", 1, 256, c, a.heads, a.kv_heads, a.head_dim, a.kv_dtype, t, a.v_dim});
      }
    for (const ElementwiseShapeKey& e : shapes.elementwise)
      for (int64_t r : sw.tokens) ms.elementwise.push_back({0, e.kind, r, e.cols, t});
    ms.extra["gemm"] = {{"call", "fake"}};
    return ms;
  }
  HostInfo describe_host() override { return host; }
  nlohmann::json host_context() override { return {{"host", "fake"}}; }
  int64_t kv_slots_that_fit(const Plan&, const ModelConfig&, const ModelFigures&, const Machine&, int64_t,
                            int64_t) override {
    return 8;
  }
  ServeResult serve(const Plan& plan, const ModelConfig&, const ModelFigures&, const Machine&, const Workload& w,
                    const ExecSettings&) override {
    std::vector<RequestTiming> t;
    for (const Request& r : w.generate())
      t.push_back(RequestTiming{r.id, r.arrival_s, r.arrival_s + 0.02, r.arrival_s + 0.02 + 0.01 * double(r.output_tokens),
                                r.prompt_tokens, r.output_tokens});
    ServeResult res;
    res.measured = compute_metrics(t, Slo{w.slo_ttft_s, w.slo_tpot_s, w.slo_e2e_p99_s});
    res.measured.kind = "measured";
    res.measured.plan = plan.name;
    return res;
  }
  std::vector<StepBench> bench_steps(const Plan&, const ModelConfig&, const ModelFigures&, const Machine&,
                                     const std::vector<int64_t>&, int64_t, int64_t, const ExecSettings&) override {
    return {};
  }
  std::vector<SelfTestResult> self_test(int, uint64_t) override { return {}; }
  void run_ranks(const std::string&, const std::function<void(RankGroup&)>&) override {
    throw std::logic_error("no MPI in this test");
  }
};

Workload few_chat() {
  Workload w = load_workload(resolve_workload_path("chat"));
  apply_overrides(w, WorkloadOverrides{0, 6});
  return w;
}

struct TempDir {
  fs::path p = fs::temp_directory_path() /
               ("peerplan-ms-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(p), fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
};

Comparison run(GpuBackend& gpu, const Plan& plan, const std::string& model, const std::string& machine,
               const HostValidationOptions& o) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  try {
    Comparison c = validate_on_host(gpu, plan, "plan.json", model, machine, few_chat(), o);
    testing::internal::GetCapturedStdout();
    testing::internal::GetCapturedStderr();
    return c;
  } catch (...) {
    testing::internal::GetCapturedStdout();
    testing::internal::GetCapturedStderr();
    throw;
  }
}

}  // namespace

TEST(MissingShapes, APlanOfATimedModelHasNone) {
  // The shipped profile timed these models' GEMMs and attention but predates the elementwise table:
  // only their elementwise kernels are missing, keyed (kind, cols) as the cost model looks them up.
  const Machine m = load_machine(kMachine);
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b"}) {
    const ModelConfig cfg = load_model_config(resolve_model_path(name));
    const int gpus = std::string(name) == "llama-3.1-8b" ? 1 : 2;
    const Plan p = test_plans::tp(gpus == 1 ? std::vector<int>{0} : std::vector<int>{0, 1}, int(cfg.layers));
    ShapeSet s = plan_missing_shapes(p, cfg, derive_figures(cfg), m);
    std::set<std::string> kinds;
    for (const ElementwiseShapeKey& e : s.elementwise) kinds.insert(e.kind);
    EXPECT_EQ(kinds, (std::set<std::string>{"rms_norm", "residual", "rotary", "act"})) << name;
    s.elementwise.clear();
    EXPECT_TRUE(s.empty()) << name << ": " << describe_shapes(s);
  }
}

TEST(MissingShapes, APlanOfAnUntimedModelLacksItsShardsShapes) {
  // Qwen2-7B at TP 2: the qkv shard [2304, 3584], attention of 14 query heads over 2 KV heads.
  const Machine m = load_machine(kMachine);
  const ModelConfig cfg = qwen2();
  const ShapeSet s = plan_missing_shapes(test_plans::tp({0, 1}, int(cfg.layers)), cfg, derive_figures(cfg), m);
  EXPECT_TRUE(s.gemms.count({2304, 3584, "bf16"})) << describe_shapes(s);
  EXPECT_FALSE(s.gemms.count({4608, 3584, "bf16"})) << "TP 1's shape is not this plan's";
  EXPECT_EQ(s.attention, (std::set<AttentionShapeKey>{{14, 2, 128, "bf16"}}));
  EXPECT_TRUE(s.grouped.empty());
  EXPECT_EQ(s.attention_max_context, 131072);
}

TEST(MissingShapes, AnMlaPlanListsItsAbsorbedGemmsAndBothAttentionShapes) {
  // DeepSeek-V2-Lite at TP 2 (8 heads per GPU): q_absorb and v_absorb as strided-batched calls of 8
  // products, the absorbed decode (MQA over the 576-wide latent row, v 512) and the expanded
  // prefill (MHA at 192, v 128), each wanted in its own phase only.
  const Machine m = load_machine(kMachine);
  const ModelConfig cfg = load_model_config(find_data_file("models/llm/deepseek-v2-lite/config.json"));
  const Plan plan = test_plans::tp({0, 1}, int(cfg.layers));
  const ShapeSet s = plan_missing_shapes(plan, cfg, derive_figures(cfg), m);
  EXPECT_TRUE(s.gemms.count({512, 128, "bf16", 8})) << describe_shapes(s);
  EXPECT_TRUE(s.gemms.count({128, 512, "bf16", 8})) << describe_shapes(s);
  EXPECT_EQ(s.attention, (std::set<AttentionShapeKey>{{8, 1, 576, "bf16", 512, "decode"},
                                                      {8, 8, 192, "bf16", 128, "prefill"}}));
  // The rotary of an MLA layer is mla_rope_and_cache, keyed apart from the standard rotary: 8 heads'
  // q_pe and the shared k_pe, 64 wide each.
  bool mla_rotary = false;
  for (const ElementwiseShapeKey& e : s.elementwise) {
    EXPECT_NE(e.kind, "rotary") << "an MLA model has no standard rotary";
    if (e.kind == "mla_rotary") {
      mla_rotary = true;
      EXPECT_EQ(e.cols, (8 + 1) * 64);
      EXPECT_EQ(e.heads, 8);
      EXPECT_EQ(e.kv_heads, 1);
      EXPECT_EQ(e.head_dim, 64);
    }
  }
  EXPECT_TRUE(mla_rotary) << describe_shapes(s);
  // Once the profile has rows of those shapes (as the profiler writes them), none is missing, and the
  // ops are priced from them.
  MeasuringBackend gpu;
  Machine ext = m;
  AddedShapes a;
  a.by = "test";
  add_measured_shapes(ext, gpu.measure_shapes(ext, s, shape_sweep_of(ext)), a);
  const ShapeSet after = plan_missing_shapes(plan, cfg, derive_figures(cfg), ext);
  EXPECT_TRUE(after.attention.empty()) << describe_shapes(after);
  EXPECT_TRUE(after.elementwise.empty()) << describe_shapes(after);
  EXPECT_FALSE(after.gemms.count({512, 128, "bf16", 8}));
  Topology topo(ext);
  CostModel cost(topo);
  const OpGraph g = compile_iteration(plan, cfg, derive_figures(cfg), ext, mixed_iteration());
  int priced = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::Attention || (op.kind == OpKind::Gemm && op.batch_count > 1) ||
        op.ew == EwKind::MlaRotary) {
      const CostSource src = cost.price(op, false).source;
      EXPECT_TRUE(src == CostSource::Measured || src == CostSource::Interpolated || src == CostSource::Extrapolated)
          << op.name;
      ++priced;
    }
  EXPECT_GT(priced, 0);
}

TEST(MissingShapes, ValidateMeasuresThemFirstAndKeepsThemInItsOutputFolder) {
  TempDir out;
  MeasuringBackend gpu;
  const ModelConfig cfg = qwen2();
  const Plan plan = test_plans::tp({0}, int(cfg.layers), "single");
  HostValidationOptions o;
  o.out = out.p.string();
  const Comparison c = run(gpu, plan, kQwen2, kMachine, o);
  ASSERT_EQ(gpu.measure_calls, 1);
  EXPECT_TRUE(gpu.asked.gemms.count({4608, 3584, "bf16"}));
  EXPECT_EQ(gpu.sweep.tokens.size(), 14u) << "the profile's own token counts";
  ASSERT_TRUE(c.context.contains("missing_shapes_measured"));
  EXPECT_EQ(c.context["missing_shapes_measured"]["shapes"], gpu.asked.size()) << "the report says how many";
  // machine-extended.json: the profile plus the new rows, nothing missing any more for this plan;
  // the --machine file itself is untouched.
  const std::string ext = (out.p / "machine-extended.json").string();
  ASSERT_TRUE(fs::exists(ext));
  const Machine m = load_machine(ext);
  EXPECT_TRUE(plan_missing_shapes(plan, cfg, derive_figures(cfg), m).empty());
  ASSERT_TRUE(m.meta.contains("added_shapes"));
  EXPECT_EQ(m.meta["added_shapes"].back()["by"], "validate");
  EXPECT_FALSE(load_machine(kMachine).meta.contains("added_shapes"));
  // The prediction was made from the measured points: the ops are priced from the new rows.
  Topology topo(m);
  CostModel cost(topo);
  const OpGraph g = compile_iteration(plan, cfg, derive_figures(cfg), m, BatchShape{0, 0, 0, 8, 1024});
  for (const Op& op : g.ops)
    if (op.kind == OpKind::Gemm) EXPECT_NE(cost.price(op, false).source, CostSource::Fitted) << op.name;
}

TEST(MissingShapes, UpdateMachineWritesThemIntoTheMachineFile) {
  TempDir dir;
  const std::string file = (dir.p / "host.json").string();
  fs::copy_file(kMachine, file);
  MeasuringBackend gpu;
  const ModelConfig cfg = qwen2();
  HostValidationOptions o;
  o.update_machine = true;
  run(gpu, test_plans::tp({0}, int(cfg.layers)), kQwen2, file, o);
  EXPECT_EQ(gpu.measure_calls, 1);
  const Machine m = load_machine(file);
  ASSERT_TRUE(m.meta.contains("added_shapes"));
  EXPECT_EQ(m.meta["added_shapes"][0]["models"][0], cfg.name);
  // A second validation of the same plan measures nothing: the file has them now.
  MeasuringBackend again;
  run(again, test_plans::tp({0}, int(cfg.layers)), kQwen2, file, o);
  EXPECT_EQ(again.measure_calls, 0);
}

TEST(MissingShapes, NothingIsMeasuredWhenAskedNotToOrOnAnotherHostsProfile) {
  const ModelConfig cfg = qwen2();
  const Plan plan = test_plans::tp({0}, int(cfg.layers));
  MeasuringBackend off;
  HostValidationOptions o;
  o.measure_missing = false;  // --no-measure-missing: today's behaviour
  Comparison c = run(off, plan, kQwen2, kMachine, o);
  EXPECT_EQ(off.measure_calls, 0);
  EXPECT_FALSE(c.context.contains("missing_shapes_measured"));
  // --allow-other-host: this host's GPU must not add points to another host's profile.
  MeasuringBackend other;
  other.host.gpus[0].uuid = "GPU-ffffffff-0000-0000-0000-000000000000";
  HostValidationOptions a;
  a.allow_other_host = true;
  c = run(other, plan, kQwen2, kMachine, a);
  EXPECT_EQ(other.measure_calls, 0);
  EXPECT_FALSE(c.context.contains("missing_shapes_measured"));
  // A timed model: only its elementwise kernels are asked of the GPU (the shipped profile predates
  // that table); once they are in the profile, nothing is, and the report says 0 shapes.
  MeasuringBackend timed;
  const ModelConfig l8 = load_model_config(resolve_model_path("llama-3.1-8b"));
  TempDir dir;
  const std::string file = (dir.p / "host.json").string();
  fs::copy_file(kMachine, file);
  HostValidationOptions u;
  u.update_machine = true;
  run(timed, test_plans::tp({0}, int(l8.layers)), "llama-3.1-8b", file, u);
  EXPECT_EQ(timed.measure_calls, 1);
  EXPECT_EQ(timed.asked.size(), timed.asked.elementwise.size()) << describe_shapes(timed.asked);
  MeasuringBackend again;
  c = run(again, test_plans::tp({0}, int(l8.layers)), "llama-3.1-8b", file, {});
  EXPECT_EQ(again.measure_calls, 0);
  EXPECT_EQ(c.context["missing_shapes_measured"]["shapes"], 0);
}
