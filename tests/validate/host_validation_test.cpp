// validate_on_host (planner/validate/host_validation.hpp) against a fake GPU backend: the seam
// between the planner and the executor, tested without a GPU. The planner must refuse before any
// GPU work, tell the simulator and the executor the same KV-slot limit, and price the op classes
// the executor timed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/p2p_off.hpp"
#include "planner/plan/plan.hpp"
#include "planner/validate/gpu_backend.hpp"
#include "planner/validate/host_validation.hpp"

#include <nlohmann/json.hpp>

using namespace peerplan;
namespace fs = std::filesystem;

namespace {

// The shipped 2xH200 profile's GPUs: the fake host is the host that profile was measured on.
HostInfo profiled_host() {
  HostInfo h;
  h.hostname = "vm";
  h.gpus.push_back({"NVIDIA H200", "GPU-4a999085-a1c3-f67b-1cc2-0867c7411289", 150109880320});
  h.gpus.push_back({"NVIDIA H200", "GPU-ac6d04e7-53b7-4a43-6790-c1735e8be4cb", 150109880320});
  return h;
}

class FakeBackend : public GpuBackend {
 public:
  HostInfo host = profiled_host();
  int64_t fit = 7;
  // What the planner asked for.
  int kv_calls = 0, serve_calls = 0, host_calls = 0, bench_calls = 0;
  int64_t kv_max_ctx = 0, kv_max_tokens = 0;
  Workload served;
  ExecSettings settings;
  std::string refuse_field;  // non-empty: check_executable refuses the model on this field
  std::string checked_model;
  int served_copies = 0;

  void check_executable(const ModelConfig& cfg) override {
    checked_model = cfg.name;
    if (!refuse_field.empty()) throw InputError(cfg.source_file, refuse_field, "what the fake executor runs");
  }
  HostInfo describe_host() override {
    ++host_calls;
    return host;
  }
  nlohmann::json host_context() override { return {{"host", "fake"}}; }
  int64_t kv_slots_that_fit(const Plan&, const ModelConfig&, const ModelFigures&, const Machine&, int64_t max_ctx,
                            int64_t max_tokens) override {
    ++kv_calls;
    kv_max_ctx = max_ctx;
    kv_max_tokens = max_tokens;
    return fit;
  }
  ServeResult serve(const Plan& plan, const ModelConfig&, const ModelFigures&, const Machine&, const Workload& w,
                    const ExecSettings& s) override {
    ++serve_calls;
    served = w;
    served_copies = plan.replica_count();
    settings = s;
    // Every request: first token 20 ms after arrival, then 10 ms per output token.
    std::vector<RequestTiming> t;
    for (const Request& r : w.generate())
      t.push_back(RequestTiming{r.id, r.arrival_s, r.arrival_s + 0.02, r.arrival_s + 0.02 + 0.01 * double(r.output_tokens),
                                r.prompt_tokens, r.output_tokens});
    ServeResult res;
    res.measured = compute_metrics(t, Slo{w.slo_ttft_s, w.slo_tpot_s, w.slo_e2e_p99_s});
    res.measured.kind = "measured";
    res.measured.plan = plan.name;
    res.op_classes.push_back(OpClassTime{"gemm", "decode b=4 ctx=600", 0, 0.004});
    res.class_shapes.push_back(BatchShape{0, 0, 0, 4, 600});
    IterationRecord it;
    it.shape = BatchShape{0, 0, 0, 4, 600};
    it.gpu_start_s = 1.0;
    it.gpu_end_s = 1.005;
    res.iterations.push_back(it);
    if (plan.replica_count() > 1) {  // the other copy's iteration, as the executor reports it
      it.replica = 1;
      res.iterations.push_back(it);
    }
    res.provenance = {{"executor", "fake"}};
    return res;
  }
  std::vector<StepBench> bench_steps(const Plan&, const ModelConfig&, const ModelFigures&, const Machine&,
                                     const std::vector<int64_t>&, int64_t, int64_t, const ExecSettings&) override {
    ++bench_calls;
    return bench_rows;
  }
  std::vector<StepBench> bench_rows;  // what the fake "GPU" timed
  std::vector<SelfTestResult> self_test(int, uint64_t) override { return {}; }
  void run_ranks(const std::string&, const std::function<void(RankGroup&)>&) override {
    throw std::logic_error("no MPI in this test");
  }
  // The shipped profile timed Llama-3.1-8B's GEMMs and attention but predates the elementwise
  // table: validate measures those kernels first (missing_shapes_test.cpp tests that step).
  int measure_calls = 0;
  Measurements measure_shapes(const Machine&, const ShapeSet& shapes, const ShapeSweep& sw) override {
    ++measure_calls;
    Measurements ms;
    const SampleStats t = compute_stats({3e-6, 3e-6, 3e-6});
    for (const ElementwiseShapeKey& e : shapes.elementwise)
      for (int64_t r : sw.tokens) ms.elementwise.push_back({0, e.kind, r, e.cols, t});
    return ms;
  }
};

Workload small_chat() {
  Workload w = load_workload(resolve_workload_path("chat"));
  apply_overrides(w, WorkloadOverrides{0, 12});
  return w;
}

const std::string kPlan = std::string(PEERPLAN_SOURCE_DIR) + "/docs/validation/plans/llama8b-1gpu.json";

// validate_on_host with its printed comparison kept out of the test log.
Comparison quiet(GpuBackend& gpu, const Plan& plan, const std::string& origin, const Workload& w,
                 const HostValidationOptions& o = {}) {
  testing::internal::CaptureStdout();
  try {
    Comparison c = validate_on_host(gpu, plan, origin, "llama-3.1-8b", "h200x2-nvlink", w, o);
    testing::internal::GetCapturedStdout();
    return c;
  } catch (...) {
    testing::internal::GetCapturedStdout();
    throw;
  }
}

}  // namespace

TEST(HostValidation, SimulatorAndExecutorAreToldTheSameKvSlotLimit) {
  // chat allows 256 sequences at once; the executor's KV cache holds 7: both sides run with 7,
  // else the prediction would batch more than the measurement could.
  FakeBackend gpu;
  const Workload w = small_chat();
  ASSERT_EQ(w.max_num_seqs, 256);
  Comparison c = quiet(gpu, load_plan(kPlan), kPlan, w);
  EXPECT_EQ(gpu.kv_calls, 1);
  EXPECT_EQ(gpu.kv_max_ctx, w.max_context() + 1) << "a slot holds the longest request plus its next token";
  EXPECT_EQ(gpu.kv_max_tokens, w.max_batched_tokens);
  EXPECT_EQ(gpu.served.max_num_seqs, 7);
  EXPECT_EQ(gpu.settings.kv_slots, 7);
  EXPECT_EQ(c.context.at("max_num_seqs"), 7);
  EXPECT_EQ(c.context.at("executor"), "fake") << "the executor's provenance is the comparison's context";
}

TEST(HostValidation, OpClassesTheExecutorTimedArePricedByTheCostModel) {
  FakeBackend gpu;
  Comparison c = quiet(gpu, load_plan(kPlan), kPlan, small_chat());
  ASSERT_EQ(c.op_classes.size(), 1u);
  EXPECT_EQ(c.op_classes[0].measured_s, 0.004);
  // 8B decode at batch 4: the GEMMs read ~15 GB of weights at ~4.8 TB/s, a few ms, never zero.
  EXPECT_GT(c.op_classes[0].predicted_s, 0.001);
  EXPECT_LT(c.op_classes[0].predicted_s, 0.05);
}

TEST(HostValidation, AHostWithoutGpusIsRefusedBeforeAnyGpuWork) {
  FakeBackend gpu;
  gpu.host.gpus.clear();
  try {
    quiet(gpu, load_plan(kPlan), kPlan, small_chat());
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), kPlan);
    EXPECT_NE(std::string(e.what()).find("none visible"), std::string::npos) << e.what();
  }
  EXPECT_EQ(gpu.kv_calls, 0) << "no GPU memory was probed";
  EXPECT_EQ(gpu.serve_calls, 0);
}

TEST(HostValidation, AModelTheExecutorCannotRunIsRefusedBeforeAnyGpuWork) {
  // issue 23 item 4: e.g. head_dim 256 is refused naming the model file and field before the host
  // is even described, so neither validate nor --bench-steps touches a GPU (or exits 1 later).
  FakeBackend gpu;
  gpu.refuse_field = "head_dim";
  try {
    quiet(gpu, load_plan(kPlan), kPlan, small_chat());
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "head_dim");
    EXPECT_NE(e.file().find("llama-3.1-8b"), std::string::npos) << "the model file: " << e.file();
  }
  EXPECT_EQ(gpu.host_calls + gpu.kv_calls + gpu.serve_calls, 0);
  EXPECT_THROW(bench_steps_on_host(gpu, load_plan(kPlan), kPlan, "llama-3.1-8b", "h200x2-nvlink", StepBenchOptions{}),
               InputError);
  EXPECT_EQ(gpu.host_calls + gpu.bench_calls, 0);
  gpu.refuse_field.clear();  // a model it runs: asked once, then validated as before
  quiet(gpu, load_plan(kPlan), kPlan, small_chat());
  EXPECT_FALSE(gpu.checked_model.empty());
  EXPECT_EQ(gpu.serve_calls, 1);
}

TEST(HostValidation, StepBenchPricesEveryStepBesideItsTime) {
  // --bench-steps prints the simulator's price of each timed step (the shape its sequences sum to)
  // and GPU / price, so one call says whether a machine file's figures hold on this GPU.
  FakeBackend gpu;
  auto row = [](const char* what, int64_t batch, int64_t context, int64_t tokens, bool graph) {
    StepBench r;
    r.what = what, r.batch = batch, r.context = context, r.tokens = tokens, r.graph = graph, r.step_s = 0.005;
    return r;
  };
  gpu.bench_rows = {row("decode", 1, 1024, 1, true), row("decode", 64, 1024, 64, true), row("prefill", 1, 2048, 2048, false)};
  StepBenchOptions o;
  o.out = ::testing::TempDir() + "/peerplan-steps-priced";
  testing::internal::CaptureStdout();
  bench_steps_on_host(gpu, load_plan(kPlan), kPlan, "llama-3.1-8b", "h200x2-nvlink", o);
  const std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("GPU/price"), std::string::npos) << table;
  std::ifstream f(o.out + "/steps.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  const auto& st = j.at("steps");
  ASSERT_EQ(st.size(), 3u);
  const double b1 = st[0].at("priced_us"), b64 = st[1].at("priced_us"), pf = st[2].at("priced_us");
  // The shipped H200 profile: an 8B decode step reads ~16 GB (~3.5-6 ms), batch 64 costs more than
  // batch 1, and a 2048-token prefill (~33 TFLOP) tens of ms.
  EXPECT_GT(b1, 3500);
  EXPECT_LT(b1, 6000);
  EXPECT_GT(b64, b1);
  EXPECT_GT(pf, 20000);
  EXPECT_LT(pf, 80000);
}

TEST(HostValidation, RecordedStepsArePricedAgainWithoutAGpu) {
  // validate --reprice: a recorded steps.json's times beside a machine file's prices, no GPU. On the machine file
  // the bench ran on it prices exactly as the bench did; prefill rows keep their token count.
  FakeBackend gpu;
  StepBench d;
  d.what = "decode", d.batch = 8, d.context = 1024, d.tokens = 8, d.graph = true, d.step_s = 0.006;
  StepBench p = d;
  p.what = "prefill", p.batch = 1, p.context = 2048, p.tokens = 2048, p.graph = false, p.step_s = 0.05;
  gpu.bench_rows = {d, p};
  StepBenchOptions o;
  o.out = ::testing::TempDir() + "/peerplan-steps-recorded";
  testing::internal::CaptureStdout();
  bench_steps_on_host(gpu, load_plan(kPlan), kPlan, "llama-3.1-8b", "h200x2-nvlink", o);
  testing::internal::GetCapturedStdout();
  const std::string again = ::testing::TempDir() + "/peerplan-steps-repriced";
  testing::internal::CaptureStdout();
  reprice_steps(o.out + "/steps.json", load_plan(kPlan), kPlan, "llama-3.1-8b", "h200x2-nvlink", Precision{}, again);
  const std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("re-priced on"), std::string::npos) << table;
  auto steps = [](const std::string& dir) {
    std::ifstream f(dir + "/steps.json");
    return nlohmann::json::parse(f).at("steps");
  };
  const auto a = steps(o.out), b = steps(again);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(double(a[i].at("priced_us")), 0.0);
    EXPECT_DOUBLE_EQ(double(b[i].at("priced_us")), double(a[i].at("priced_us")));
    EXPECT_DOUBLE_EQ(double(b[i].at("median_us")), double(a[i].at("median_us")));
  }
  EXPECT_EQ(b[1].at("tokens"), 2048);
  // Another model than the steps ran: refused, naming the file and the field.
  try {
    reprice_steps(o.out + "/steps.json", load_plan(kPlan), kPlan, "qwen1.5-moe-a2.7b", "h200x2-nvlink", Precision{}, "");
    ADD_FAILURE() << "a steps file of another model was priced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'model'"), std::string::npos) << e.what();
  }
  // A row that is neither decode nor prefill.
  const std::string bad = ::testing::TempDir() + "/peerplan-steps-bad.json";
  std::ofstream(bad) << R"({"plan": "x", "model": "llama-3.1-8b", "steps": [{"step": "verify", "batch": 1,
    "context": 8, "graph": true, "median_us": 1, "min_us": 1, "max_us": 1, "hbm_bytes": 0}]})";
  try {
    reprice_steps(bad, load_plan(kPlan), kPlan, "llama-3.1-8b", "h200x2-nvlink", Precision{}, "");
    ADD_FAILURE() << "a step named verify was priced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("steps/0/step"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST(HostValidation, NoRoomForOneSequenceIsRefusedBeforeServing) {
  FakeBackend gpu;
  gpu.fit = 0;
  EXPECT_THROW(quiet(gpu, load_plan(kPlan), kPlan, small_chat()), InputError);
  EXPECT_EQ(gpu.serve_calls, 0);
}

TEST(HostValidation, AP2pOffPlanRunsWithoutPeerAccessAndReportsAreWritten) {
  FakeBackend gpu;
  const std::string tp2 = std::string(PEERPLAN_SOURCE_DIR) + "/docs/validation/plans/llama8b-tp2.json";
  const fs::path out = fs::temp_directory_path() / ("peerplan-hv-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(out);
  HostValidationOptions o;
  o.out = out.string();
  quiet(gpu, p2p_off_variant(load_plan(tp2)), tp2, small_chat(), o);
  EXPECT_FALSE(gpu.settings.p2p) << "the P2P-off variant runs as --p2p off";
  for (const char* f : {"validation.json", "validation.md", "predicted.metrics.json", "measured.metrics.json",
                        "iterations.json"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  fs::remove_all(out);
}

// A rank group of one rank 0, for the --mpi refusals.
class OneRank : public RankGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void barrier() override {}
  std::string broadcast(const std::string& s) override { return s; }
  void check_plan(const std::vector<int>&, const std::string&) override {}
  void join_gpus() override {}
  std::vector<std::string> preflight(const Plan&, const std::string&, const Machine&, const std::string&,
                                     const MemoryReport&, const PreflightOptions&) override {
    return {};
  }
};

TEST(HostValidation, AReplicatedPlanIsExecutedAsItsCopiesAndReportedPerCopy) {
  // Issue 16: two single-GPU copies of Llama-3.1-8B behind a least-outstanding router. The planner
  // hands the executor the whole replicated plan (one engine per copy, serve.cpp) and predicts it
  // with the simulator's router; the iterations report names each iteration's copy.
  FakeBackend gpu;
  const Plan base = load_plan(kPlan);
  const Plan dp2 = with_replicas(base, {{0}, {1}}, "least_outstanding");
  const fs::path out = fs::temp_directory_path() / ("peerplan-hv-dp-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(out);
  HostValidationOptions o;
  o.out = out.string();
  Comparison c = quiet(gpu, dp2, kPlan, small_chat(), o);
  EXPECT_EQ(gpu.serve_calls, 1);
  EXPECT_EQ(gpu.served_copies, 2) << "the executor is given every copy, not copy 0 alone";
  ASSERT_EQ(c.op_classes.size(), 1u);
  EXPECT_GT(c.op_classes[0].predicted_s, 0.001) << "priced as one copy's iteration";
  const nlohmann::json iters = nlohmann::json::parse(read_text_file((out / "iterations.json").string()));
  ASSERT_EQ(iters.at("iterations").size(), 2u);
  EXPECT_EQ(iters["iterations"][0].at("replica"), 0);
  EXPECT_EQ(iters["iterations"][1].at("replica"), 1);
  fs::remove_all(out);

  // Under --mpi the ranks are one copy's GPUs: refused before any GPU work, saying what to do.
  FakeBackend mpi;
  OneRank ranks;
  HostValidationOptions m;
  m.ranks = &ranks;
  try {
    quiet(mpi, dp2, kPlan, small_chat(), m);
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "replicas");
    EXPECT_NE(std::string(e.what()).find("without --mpi"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mpi.serve_calls + mpi.kv_calls, 0);
}
