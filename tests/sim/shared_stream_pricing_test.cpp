// The price of a MoE layer whose shared experts run on the auxiliary stream (Op::stream 1; a profile
// whose meta says executor_shared_stream): the two branches overlap in the task engine, sharing the
// GPU's HBM as flows capped at their own priced rates, so the step costs less than the branches one
// after the other and never less than the GPU's HBM can stream.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "planner/cost/sm_slots.hpp"

#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/executor_launch.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

using test_plans::decode;

struct Priced {
  double step_s = 0;
  OpGraph graph;
};

Priced price(const Machine& machine, const std::string& model, const BatchShape& b) {
  auto m = testing::model(model);
  const Topology topo(machine);
  const CostModel cost(topo);
  const Plan plan = test_plans::tp({0}, int(m.cfg.layers));
  PlanPricer pricer(plan, m.cfg, m.fig, cost);
  return {pricer.price(b).total_s(), compile_iteration(plan, m.cfg, m.fig, machine, b)};
}

Machine with_shared_stream(bool on) {
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  m.meta[kSharedStreamKey] = on;
  return m;
}

TEST(SharedStreamPricing, TheProfileSaysWhetherTheCompilerForks) {
  EXPECT_FALSE(shared_expert_stream(load_machine(resolve_machine_path("h200x2-nvlink"))));
  EXPECT_TRUE(shared_expert_stream(with_shared_stream(true)));
  EXPECT_FALSE(shared_expert_stream(with_shared_stream(false)));
  Machine spec = with_shared_stream(true);
  spec.measurements.reset();  // a spec sheet prices no executor
  EXPECT_FALSE(shared_expert_stream(spec));
  int aux = 0;
  for (const Op& op : price(with_shared_stream(true), "qwen1.5-moe-a2.7b", decode(1)).graph.ops) aux += op.stream;
  EXPECT_GT(aux, 0);
}

TEST(SharedStreamPricing, OverlapSavesAtMostTheSharedBranchAndHbmBoundsIt) {
  const Machine off = with_shared_stream(false), on = with_shared_stream(true);
  const auto m = testing::model("qwen1.5-moe-a2.7b");
  const Topology topo(on);
  const CostModel cost(topo);
  bool measured = false;
  ASSERT_GT(cost.hbm_Bps(0, &measured), 0);
  ASSERT_TRUE(measured);
  const double hbm = sim_capacity(cost)[size_t(topo.edge_count())];  // what the two streams share
  for (int64_t batch : {1, 2, 8}) {
    const Priced serial = price(off, "qwen1.5-moe-a2.7b", decode(batch));
    const Priced overlap = price(on, "qwen1.5-moe-a2.7b", decode(batch));
    // What the shared branch costs alone, and the bytes both branches stream, summed over the layers.
    double shared_s = 0, mlp_bytes = 0, mlp_s = 0;
    for (const Op& op : overlap.graph.ops) {
      if (op.layer < 0) continue;
      const std::string n = op.name.substr(op.name.find('.') + 1);
      const bool in_branch = op.stream == 1;
      const bool routed = n == "moe_route" || n.rfind("expert.", 0) == 0;
      if (!in_branch && !routed) continue;
      const double t = cost.price(op, true).seconds;
      if (in_branch) shared_s += t;
      mlp_s += t;
      mlp_bytes += op.mem_bytes;
    }
    ASSERT_GT(shared_s, 0) << batch;
    const double saved = serial.step_s - overlap.step_s;
    EXPECT_GT(saved, 0.1 * shared_s) << "batch " << batch << ": the branches overlap";
    EXPECT_LE(saved, shared_s * 1.0001) << "batch " << batch << ": no more than the shorter branch is hidden";
    // The two branches together take at least their bytes over the GPU's HBM.
    EXPECT_GE(mlp_s - saved, mlp_bytes / hbm * 0.999) << "batch " << batch;
  }
  // Past the threshold (kSharedStreamMaxTokens) the graphs and prices are the same.
  EXPECT_DOUBLE_EQ(price(off, "qwen1.5-moe-a2.7b", decode(16)).step_s,
                   price(on, "qwen1.5-moe-a2.7b", decode(16)).step_s);
  // A model without shared experts prices the same either way.
  EXPECT_DOUBLE_EQ(price(off, "mixtral-8x7b", decode(4)).step_s, price(on, "mixtral-8x7b", decode(4)).step_s);
}

TEST(SharedStreamPricing, TheStreamsShareWhatSmReadsReachNotTheCopyRate) {
  // The HBM capacity two streams' kernels share: the device copy, or the fastest bf16 GEMV row of the profile
  // (weight bytes / median) where that is faster, as SM reads are (session 34); quantized, batched and wider rows
  // do not count.
  Machine on = with_shared_stream(true);
  Measurements& ms = *on.measurements;
  const double copy = ms.hbm_gbps.at(0) * 1e9;
  auto row = [](int64_t m, int64_t n, int64_t k, const char* dtype, double s, int64_t batch = 1) {
    GemmTime r;
    r.m = m, r.n = n, r.k = k, r.dtype = dtype, r.batch = batch;
    r.time.median = s;
    return r;
  };
  ms.gemms.clear();
  ms.gemms.push_back(row(1, 1000, 1000, "bf16", 2e6 / (0.5 * copy)));  // half the copy rate
  {
    const Topology topo(on);
    const CostModel cost(topo);
    EXPECT_NEAR(cost.sm_stream_Bps(0), 0.5 * copy, 1e-6 * copy);
    EXPECT_DOUBLE_EQ(sim_capacity(cost)[size_t(topo.edge_count())], copy);  // the copy rate is larger
  }
  ms.gemms.push_back(row(2, 4000, 1000, "bf16", 8e6 / (1.05 * copy)));  // 5 % past the copy rate
  ms.gemms.push_back(row(1, 1000, 1000, "fp8", 1e6 / (3 * copy)));      // not a bf16 row
  ms.gemms.push_back(row(4, 1000, 1000, "bf16", 2e6 / (3 * copy)));     // four tokens
  ms.gemms.push_back(row(1, 1000, 1000, "bf16", 2e6 / (3 * copy), 8));  // a batched product
  const Topology topo(on);
  const CostModel cost(topo);
  EXPECT_NEAR(cost.sm_stream_Bps(0), 1.05 * copy, 1e-6 * copy);
  EXPECT_NEAR(sim_capacity(cost)[size_t(topo.edge_count())], 1.05 * copy, 1e-6 * copy);
  ms.gemms.clear();
  const Topology bare(on);
  EXPECT_EQ(CostModel(bare).sm_stream_Bps(0), 0);
}

TEST(SharedStreamPricing, EachJoinPaysTheProfilesForkJoinCost) {
  // Session 35: a fork and join in a PDL graph cost 0.94 us on an H100 (profile extra.launch.gpu0.fork_join_us), and
  // Qwen1.5-MoE's decode steps 0.8-1.4 us a layer; the join (the combine) pays it. Older profiles have no key.
  auto with_fork_join = [](bool stream, const nlohmann::json& us) {
    Machine m = with_shared_stream(stream);
    m.measurements->extra["launch"]["gpu0"]["fork_join_us"] = us;
    return m;
  };
  const auto m = testing::model("qwen1.5-moe-a2.7b");
  int joins = 0;
  for (const Op& op : price(with_shared_stream(true), "qwen1.5-moe-a2.7b", decode(1)).graph.ops)
    if (op.ew == EwKind::MoeCombine) ++joins;
  ASSERT_GT(joins, 0);
  for (int64_t batch : {1, 4}) {
    const double base = price(with_shared_stream(true), "qwen1.5-moe-a2.7b", decode(batch)).step_s;
    const double with = price(with_fork_join(true, 2.0), "qwen1.5-moe-a2.7b", decode(batch)).step_s;
    // Every join is on the critical path (the combine waits for it): each adds the full 2 us.
    EXPECT_NEAR(with - base, joins * 2e-6, 0.1 * joins * 2e-6) << "batch " << batch;
  }
  // One stream has no join; a hostile figure (negative, absurd, not a number) prices nothing.
  EXPECT_DOUBLE_EQ(price(with_fork_join(false, 2.0), "qwen1.5-moe-a2.7b", decode(1)).step_s,
                   price(with_shared_stream(false), "qwen1.5-moe-a2.7b", decode(1)).step_s);
  const double base = price(with_shared_stream(true), "qwen1.5-moe-a2.7b", decode(1)).step_s;
  for (const nlohmann::json& bad : {nlohmann::json(-1.0), nlohmann::json(1e9), nlohmann::json("1.0")})
    EXPECT_DOUBLE_EQ(price(with_fork_join(true, bad), "qwen1.5-moe-a2.7b", decode(1)).step_s, base) << bad.dump();
  Machine old = with_shared_stream(true);
  EXPECT_EQ(CostModel(Topology(old)).fork_join_s(0), 0);
}

TEST(SharedStreamPricing, SimulateSaysWhereTheSharedExpertsRunAndWhatHbmTheStreamsShare) {
  auto m = testing::model("qwen1.5-moe-a2.7b");
  const Plan plan = test_plans::tp({0}, int(m.cfg.layers));
  Workload w;
  w.name = "four";
  w.max_num_seqs = 4;
  w.max_batched_tokens = 4096;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back({i, 0.0, 256, 8});
  for (const bool on : {true, false}) {
    const Machine machine = with_shared_stream(on);
    const Topology topo(machine);
    const Simulation sim = simulate_plan(plan, m.cfg, m.fig, topo, w, reqs, SimulateOptions{});
    const std::string said = sim.metrics.provenance.at("moe_shared_experts").get<std::string>();
    if (!on) {
      EXPECT_NE(said.find("on the compute stream"), std::string::npos) << said;
      continue;
    }
    const CostModel cost(topo);
    const std::string gbps = std::to_string(int(std::lround(sim_capacity(cost)[size_t(topo.edge_count())] / 1e9)));
    EXPECT_NE(said.find("on a second stream"), std::string::npos) << said;
    EXPECT_NE(said.find("HBM at " + gbps + " GB/s"), std::string::npos) << said;
  }
}

// Two decode GEMMs of m tokens on GPU 0, one on each stream: n x 4096 bf16 weights each (64 MiB at 8192).
OpGraph two_gemms(int64_t m, int64_t n = 8192) {
  OpGraph g;
  for (int i = 0; i < 2; ++i) {
    Op op;
    op.id = i;
    op.kind = OpKind::Gemm;
    op.gpus = {0};
    op.layer = 0;
    op.m = m, op.n = n, op.k = 4096;
    op.flops = 2.0 * op.m * op.n * op.k;
    op.mem_bytes = double(op.n * op.k * 2 + op.m * op.k * 2 + op.m * op.n * 2);
    op.stream = i;
    g.ops.push_back(op);
  }
  return g;
}

TEST(SharedStreamPricing, TwoStreamingKernelsShareTheHbm) {
  // The flow model itself: two ops on one GPU's two streams, each streaming weights at most of the GPU's HBM
  // rate, take their bytes over the HBM together (not the longer one's time), and alone each takes
  // its price. At 4 tokens the executor runs cuBLASLt, whose blocks do not fill the SMs: HBM alone bounds them.
  const Machine on = with_shared_stream(true);
  const Topology topo(on);
  const CostModel cost(topo);
  const std::vector<double> cap = sim_capacity(cost);
  ASSERT_EQ(cap.size(), size_t(topo.edge_count() + 2 * topo.gpu_count()));  // edges, HBM, SM slots
  const double hbm = cap[size_t(topo.edge_count())];
  ASSERT_GT(hbm, 0);
  OpGraph g = two_gemms(4);
  const double t_alone = cost.price(g.ops[0], true).seconds;
  std::vector<const OpCost*> costs;
  const std::vector<SimTask> tasks = tasks_for_ops(g, {0, 1}, cost, true, &costs);
  ASSERT_TRUE(tasks[0].flow && tasks[1].flow);
  EXPECT_NEAR(tasks[0].rate_cap, g.ops[0].mem_bytes / t_alone, 1e-6 * tasks[0].rate_cap);
  const TaskRun run = run_tasks(tasks, kStreamsPerGpu * topo.gpu_count(), cap);
  const double gap = tasks[0].gap;
  const double expect = std::max(t_alone, 2 * g.ops[0].mem_bytes / hbm) + gap;
  EXPECT_NEAR(run.makespan, expect, 0.02 * expect);
  EXPECT_LT(run.makespan, 2 * t_alone);
  // One stream only: no flows, the price as it always was.
  g.ops[1].stream = 0;
  const std::vector<SimTask> plain = tasks_for_ops(g, {0, 1}, cost, true);
  EXPECT_FALSE(plain[0].flow || plain[1].flow);
  EXPECT_DOUBLE_EQ(plain[0].duration, t_alone);
}

TEST(SharedStreamPricing, TwoSmFillingGemvsTakeTurnsOnTheSms) {
  // At 1 token with PDL the executor runs its own GEMV, whose blocks fill every SM: two at once progress
  // gemv_pair_progress times one alone (sm_slots.hpp), whatever HBM is left; a serial-launch profile (cuBLASLt at
  // 1 token) shares HBM only.
  // 8 MiB matrices: alone each streams well below the HBM rate (a launch's ramp and tail weigh), so the two
  // together are bound by the SMs, not by HBM.
  auto makespan = [](const Machine& mach, int64_t m, double* alone) {
    const Topology topo(mach);
    const CostModel cost(topo);
    OpGraph g = two_gemms(m, 1024);
    *alone = cost.price(g.ops[0], true).seconds;
    const std::vector<SimTask> tasks = tasks_for_ops(g, {0, 1}, cost, true);
    return run_tasks(tasks, kStreamsPerGpu * topo.gpu_count(), sim_capacity(cost)).makespan - tasks[0].gap;
  };
  Machine pdl = with_shared_stream(true);
  pdl.meta[kExecutorLaunchKey] = "pdl";
  {
    const CostModel cost{Topology(pdl)};
    EXPECT_DOUBLE_EQ(cost.gemv_pair_progress(0), kGemvPairProgress);
    EXPECT_TRUE(cost.executor_pdl());
  }
  double t = 0;
  const double fitted = makespan(pdl, 1, &t);
  const Topology topo(pdl);
  const double hbm_bound = 2 * two_gemms(1, 1024).ops[0].mem_bytes / sim_capacity(CostModel(topo))[size_t(topo.edge_count())];
  EXPECT_NEAR(fitted, 2 * t / kGemvPairProgress, 0.01 * t);
  EXPECT_GT(fitted, 1.2 * std::max(t, hbm_bound));  // the slots, not HBM, bind
  // A profile's measured figure is recorded, not priced yet (cost_model.hpp): the fitted one stays.
  Machine measured = pdl;
  measured.measurements->extra["launch"]["gpu0"]["gemv_pair_progress"] = 1.05;
  EXPECT_NEAR(makespan(measured, 1, &t), fitted, 1e-9);
  // Serial launch: the GEMV is not taken; HBM alone, as at 4 tokens (slower than the fitted slots would allow here
  // only where those bind: compare with the slots' own bound).
  Machine serial = with_shared_stream(true);
  serial.meta[kExecutorLaunchKey] = "serial";
  EXPECT_NEAR(makespan(serial, 1, &t), std::max(t, hbm_bound), 0.01 * t);
  // Not an SM-filling kernel at 4 tokens, even with PDL.
  EXPECT_FALSE(fills_sms(two_gemms(4).ops[0], true));
  EXPECT_TRUE(fills_sms(two_gemms(1).ops[0], true));
  EXPECT_FALSE(fills_sms(two_gemms(1).ops[0], false));
}

}  // namespace
}  // namespace peerplan

namespace peerplan {
namespace {

// Quantized shared experts stay on the compute stream (the executor keeps one quantized GEMM runner per
// GPU), even where the profile's executor forked bf16 ones: the compiler and the simulator's note say so.
TEST(SharedStreamPricing, QuantizedSharedExpertsStayOnTheComputeStream) {
  testing::ModelFix m = testing::model("qwen1.5-moe-a2.7b");
  bool any_shared = false;
  for (const LayerFigures& lf : m.fig.layers) {
    EXPECT_TRUE(shared_in_bf16(lf));
    for (const MatrixShape& ms : lf.matrices) any_shared = any_shared || ms.name == "shared.gate_up";
  }
  ASSERT_TRUE(any_shared);
  const Machine machine = with_shared_stream(true);
  const Plan plan = test_plans::tp({0}, int(m.cfg.layers));
  auto on_aux = [&](const testing::ModelFix& f) {
    const OpGraph g = compile_iteration(plan, f.cfg, f.fig, machine, decode(1));
    return std::count_if(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.stream == 1; });
  };
  EXPECT_GT(on_aux(m), 0) << "bf16 shared experts fork";
  apply_precision(m.cfg, DType::FP8_E4M3, std::nullopt);
  m.fig = derive_figures(m.cfg);
  bool quantized = false;
  for (const LayerFigures& lf : m.fig.layers) quantized = quantized || !shared_in_bf16(lf);
  EXPECT_TRUE(quantized);
  EXPECT_EQ(on_aux(m), 0) << "fp8 shared experts stay on the compute stream";
}

}  // namespace
}  // namespace peerplan
