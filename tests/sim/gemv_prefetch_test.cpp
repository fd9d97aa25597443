// A small kernel before the executor's PDL decode GEMV runs under the GEMV's first weight loads
// (planner/cost/gemv_prefetch.hpp): the simulator prices it up to kGemvPrefetchHideS shorter, never below the
// GPU's per-kernel floor, and only there: not before a cuBLASLt GEMM, another stream's GEMV or on a profile
// whose executor launches one kernel after another.
#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/gemv_prefetch.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/topology/executor_launch.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

// The shipped profile with its executor's launch said, Llama-3.1-8B's norms timed at 1.5 us as a PDL profile's
// chains of one kernel time them (an H100, since session 34; the shipped profile has no elementwise rows), and a PDL
// floor of 0.7 us (the shipped one is a serial gap of 1.5 us).
Machine with_launch(const char* launch) {
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  m.meta[kExecutorLaunchKey] = launch;
  m.meta[kFusedActKey] = true;  // as every PDL profile since session 31: the activation in the gate_up GEMV
  m.measurements->extra["launch"]["gpu0"]["gpu_gap_us"] = 0.7;
  for (const char* kind : {"rms_norm", "add_rms_norm"})
    for (int64_t rows : {1, 2, 4, 8}) {
      ElementwiseTime e;
      e.kind = kind, e.rows = rows, e.cols = 4096;
      e.time.n = 10;
      e.time.min = e.time.p10 = e.time.median = e.time.p90 = e.time.p99 = e.time.max = e.time.mean = 1.5e-6;
      m.measurements->elementwise.push_back(e);
    }
  return m;
}

// A norm (hidden 4096 at `tokens`, priced from with_launch's 1.5 us rows) then a GEMM of `tokens` rows, both on
// GPU 0, the GEMM on `gemm_stream`.
OpGraph norm_then_gemm(int64_t tokens, int gemm_stream = 0) {
  OpGraph g;
  Op norm;
  norm.id = 0;
  norm.name = "L0.mlp_norm";
  norm.kind = OpKind::Elementwise;
  norm.ew = EwKind::RmsNorm;
  norm.gpus = {0};
  norm.ew_rows = tokens, norm.ew_cols = 4096;
  norm.mem_bytes = double(tokens * 4096 * 2 * 2);
  g.ops.push_back(norm);
  Op gemm;
  gemm.id = 1;
  gemm.name = "L0.gate_up";
  gemm.kind = OpKind::Gemm;
  gemm.gpus = {0};
  gemm.m = tokens, gemm.n = 8192, gemm.k = 4096;
  gemm.flops = 2.0 * gemm.m * gemm.n * gemm.k;
  gemm.mem_bytes = double(gemm.n * gemm.k * 2);
  gemm.stream = gemm_stream;
  gemm.deps = {0};
  g.ops.push_back(gemm);
  return g;
}

// The norm's time as the simulator runs it (on a GPU with two streams it is an HBM flow capped at its rate).
double norm_task_s(const Machine& m, const OpGraph& g) {
  const Topology topo(m);
  const CostModel cost(topo);
  const SimTask t = tasks_for_ops(g, {0, 1}, cost, true)[0];
  return t.flow ? t.bytes / t.rate_cap : t.duration;
}

TEST(GemvPrefetch, ASmallKernelBeforeAPdlGemvRunsUnderItsFirstLoads) {
  // Llama-3.1-8B's decode step at one token: each layer's two norms come right before the qkv and gate_up GEMVs.
  auto m = testing::model("llama-3.1-8b");
  const Machine pdl = with_launch("pdl");
  const Topology topo(pdl);
  const CostModel cost(topo);
  const OpGraph g = compile_iteration(test_plans::tp({0}, int(m.cfg.layers)), m.cfg, m.fig, pdl, test_plans::decode(1));
  std::vector<int> all(g.ops.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
  const std::vector<SimTask> tasks = tasks_for_ops(g, all, cost, true);
  const double floor = cost.min_kernel_s(0);
  int hidden = 0;
  for (size_t i = 0; i + 1 < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind != OpKind::Elementwise) continue;
    const double priced = cost.price(op, true).seconds;
    if (is_pdl_dense_gemv(g.ops[i + 1], true)) {
      ASSERT_GT(priced, floor) << op.name << ": the shipped profile's norm rows sit above the floor";
      EXPECT_DOUBLE_EQ(tasks[i].duration, std::max(floor, priced - kGemvPrefetchHideS)) << op.name;
      ++hidden;
    } else {
      EXPECT_DOUBLE_EQ(tasks[i].duration, priced) << op.name << " (before " << g.ops[i + 1].name << ")";
    }
  }
  EXPECT_EQ(hidden, 2 * m.cfg.layers + 1) << "both norms of every layer, and the final norm before the LM head";
}

TEST(GemvPrefetch, OnlyBeforeTheExecutorsOwnGemvOnTheSameStream) {
  const Machine pdl = with_launch("pdl");
  const Topology topo(pdl);
  const CostModel cost(topo);
  ASSERT_NEAR(cost.price(norm_then_gemm(4).ops[0], true).seconds, 1.5e-6, 1e-12) << "the norm is priced from its row";
  ASSERT_GT(1.5e-6, cost.min_kernel_s(0) + 0.5e-6) << "so hiding would show";
  // At 4 tokens the GEMM runs on cuBLASLt, which waits before it loads.
  const OpGraph four = norm_then_gemm(4);
  EXPECT_DOUBLE_EQ(norm_task_s(pdl, four), cost.price(four.ops[0], true).seconds);
  // The GEMV on the other stream prefetches under nothing of this stream.
  const OpGraph other = norm_then_gemm(1, 1);
  EXPECT_NEAR(norm_task_s(pdl, other), cost.price(other.ops[0], true).seconds, 1e-15);
  // A serial-launch executor (and so every profile before PDL): priced as timed.
  const Machine serial = with_launch("serial");
  const OpGraph one = norm_then_gemm(1);
  EXPECT_LT(norm_task_s(pdl, one), cost.price(one.ops[0], true).seconds) << "the same pair on a PDL profile hides";
  EXPECT_FALSE(is_pdl_dense_gemv(one.ops[1], false));
  const Topology serial_topo(serial);
  EXPECT_DOUBLE_EQ(norm_task_s(serial, one), CostModel(serial_topo).price(one.ops[0], true).seconds);
  // Quantized weights take other kernels.
  OpGraph fp8 = norm_then_gemm(1);
  fp8.ops[1].wdtype = DType::FP8_E4M3;
  EXPECT_DOUBLE_EQ(norm_task_s(pdl, fp8), cost.price(fp8.ops[0], true).seconds);
}

TEST(GemvPrefetch, NeverBelowTheFloor) {
  EXPECT_DOUBLE_EQ(before_prefetching_gemv_s(1.5e-6, 0.7e-6), 0.7e-6);
  EXPECT_DOUBLE_EQ(before_prefetching_gemv_s(4.0e-6, 0.7e-6), 3.0e-6);
  EXPECT_DOUBLE_EQ(before_prefetching_gemv_s(0.5e-6, 0.7e-6), 0.5e-6);  // already under the floor: kept
}

}  // namespace
}  // namespace peerplan
