// Leave-one-model-out on the shipped 2xH200 profile: each model's own GEMM and attention points
// (its single-GPU shapes and their TP2 shards) are removed, its decode and prefill steps are
// priced from the other models' measurements, and compared with the price from its own points.
// That is what a user bringing a model the profile did not time gets: `fitted` prices must be
// within the issue-23 target of 8 %; the bare roofline ("derived") was 10-20 % low.
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/cost/fitted_compute.hpp"
#include "planner/report/search_report.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/topology/machine.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;

namespace {

std::vector<BatchShape> steps() {
  std::vector<BatchShape> v;
  for (int64_t b : {1, 16, 64}) {
    BatchShape s;
    s.decode_seqs = b;
    s.decode_context = 1024;
    v.push_back(s);
  }
  for (int64_t t : {512, 2048}) {
    BatchShape s;
    s.prefill_seqs = 1;
    s.prefill_tokens = t;
    s.prefill_context = t;
    v.push_back(s);
  }
  return v;
}

std::string step_name(const BatchShape& s) {
  return s.decode_seqs ? "decode b" + std::to_string(s.decode_seqs) + " ctx" + std::to_string(s.decode_context)
                       : "prefill " + std::to_string(s.prefill_tokens);
}

// The model's GEMM (n,k) and attention (heads, kv_heads) on one GPU and as TP2 shards
// (column-parallel halves n, row-parallel halves k, attention halves the heads).
struct OwnShapes {
  std::set<std::pair<int64_t, int64_t>> gemm, attn;
};
OwnShapes own_shapes(const OpGraph& g, OwnShapes s = {}) {
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::Gemm || op.kind == OpKind::GroupedGemm)  // routed experts are GEMM shapes too
      for (auto nk : {std::pair{op.n, op.k}, std::pair{op.n / 2, op.k}, std::pair{op.n, op.k / 2}}) s.gemm.insert(nk);
    if (op.kind == OpKind::Attention)
      for (int64_t d : {1, 2}) s.attn.insert({op.attn_heads / d, op.attn_kv_heads / d});
  }
  return s;
}

// At least 95 % of the step's GEMM and attention time priced from points of its own shapes (a
// MoE router's [tokens x experts] GEMM is never timed by the profiler and may be left over).
bool timed_by_profile(const OpGraph& g, const CostModel& cost) {
  double own = 0, all = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::Gemm && op.kind != OpKind::Attention) continue;
    const OpCost& c = cost.price(op, false);
    all += c.seconds;
    if (c.source == CostSource::Measured || c.source == CostSource::Interpolated || c.source == CostSource::Extrapolated)
      own += c.seconds;
  }
  return all > 0 && own >= 0.95 * all;
}

}  // namespace

TEST(LeaveOneModelOut, EveryTimedModelPricedFromTheOthersWithinEightPercent) {
  Machine full = load_machine(resolve_machine_path("h200x2-nvlink"));
  ASSERT_TRUE(full.measurements && !full.measurements->gemms.empty()) << "the shipped profile times GEMMs";
  // The fallback under test fits dense GEMMs and attention; routed expert GEMMs have curves of their
  // own (issue 14, spliced into the shipped profile 2026-12-03) and no fitted model from other MoE
  // models yet, so both sides price them as before the curves: without them.
  full.measurements->grouped_gemms.clear();
  const Topology full_topo(full);
  const CostModel measured(full_topo);
  std::printf("%-18s %-20s %12s %16s %14s\n", "model", "step", "own points", "roofline error", "fitted error");
  int compared = 0;
  for (const std::string name :
       {"llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2-lite"}) {
    const ModelConfig cfg = load_model_config(resolve_model_path(name));
    const ModelFigures fig = derive_figures(cfg);
    const Plan plan = test_plans::tp({0}, int(cfg.layers), "single[0]");
    OwnShapes own;
    bool timed = true;
    for (const BatchShape& s : steps()) {
      OpGraph g = compile_iteration(plan, cfg, fig, full, s);
      own = own_shapes(g, own);
      timed = timed && timed_by_profile(g, measured);
    }
    if (!timed) {
      // No reference: the profile never timed this model's shapes, so there is nothing to leave out.
      std::printf("%-18s (not timed by the profile: no measured-point reference)\n", name.c_str());
      continue;
    }
    Machine reduced = full;
    auto& ms = *reduced.measurements;
    std::erase_if(ms.gemms, [&](const GemmTime& g) { return own.gemm.count({g.n, g.k}) > 0; });
    std::erase_if(ms.attention, [&](const AttentionTime& a) { return own.attn.count({a.heads, a.kv_heads}) > 0; });
    ASSERT_FALSE(ms.gemms.empty()) << name << ": other models' GEMMs remain to fit from";
    const Topology topo(reduced);
    CostOptions roof_opt;
    roof_opt.fitted_fallback = false;
    const CostModel roofline(topo, roof_opt), fitted(topo);
    for (const BatchShape& s : steps()) {
      const double ref = PlanPricer(plan, cfg, fig, measured).price_exact(s).total_s();
      const IterationCost fc = PlanPricer(plan, cfg, fig, fitted).price_exact(s);
      const double roof = PlanPricer(plan, cfg, fig, roofline).price_exact(s).total_s();
      const double err = fc.total_s() / ref - 1, roof_err = roof / ref - 1;
      std::printf("%-18s %-20s %9.3f ms %+15.1f%% %+13.1f%%\n", name.c_str(), step_name(s).c_str(), ref * 1e3,
                  100 * roof_err, 100 * err);
      EXPECT_GT(fc.ops_by_source[size_t(CostSource::Fitted)], 0) << name << " " << step_name(s) << ": nothing was fitted";
      EXPECT_EQ(fc.ops_by_source[size_t(CostSource::Measured)] + fc.ops_by_source[size_t(CostSource::Interpolated)] +
                    fc.ops_by_source[size_t(CostSource::Extrapolated)],
                0)
          << name << " " << step_name(s) << ": its own points were not all removed";
      EXPECT_LT(std::abs(err), 0.08) << name << " " << step_name(s) << ": fitted " << fc.total_s() * 1e3
                                     << " ms vs its own measured points " << ref * 1e3 << " ms (issue 23: within 8 %)";
      ++compared;
    }
  }
  EXPECT_GE(compared, 4 * 5) << "8B, 70B, Mistral-7B and Mixtral are timed by the shipped profile";
}

TEST(LeaveOneModelOut, FittedBandIsComputedWhenTheProfileLoads) {
  // Each measured shape priced with its own (n,k) / head configuration left out: a finite band,
  // small for GEMMs (efficiency varies smoothly with shape), larger for attention (4 configs only).
  const Machine full = load_machine(resolve_machine_path("h200x2-nvlink"));
  FittedCompute f(*full.measurements, full.gpus[0].peak_bf16_tflops * 1e12, full.measurements->hbm_gbps[0] * 1e9);
  std::printf("leave-one-shape-out band: GEMM %.1f %%, attention %.1f %%\n", 100 * f.gemm_band(), 100 * f.attention_band());
  EXPECT_GT(f.gemm_band(), 0.0);
  EXPECT_LT(f.gemm_band(), 0.15) << "22 GEMM shapes of one GPU: neighbours' efficiency within ~15 % on average";
  EXPECT_GT(f.attention_band(), 0.0);
  EXPECT_LT(f.attention_band(), 0.30);
}

TEST(LeaveOneModelOut, NoteNamesTheModelAndTheCommandWhenAQuarterIsNotMeasured) {
  nlohmann::json prov = {{"measured", {{"gemm_shapes", 308}}},
                         {"cost_sources", {{"measured", {{"time_fraction", 0.6}}}, {"fitted", {{"time_fraction", 0.4}}}}},
                         {"fitted_fallback", {{"band_gemm", 0.05}, {"band_attention", 0.08}}}};
  std::string note = unmeasured_note("qwen1.5-moe-a2.7b", prov);
  EXPECT_NE(note.find("40 %"), std::string::npos) << note;
  // The command adds the model's shapes to the machine file (issue 23 item 1); here the provenance
  // names none, so a placeholder (tests/report/add_model_note_test.cpp: the file the user passed).
  EXPECT_NE(note.find("peerplan profile --add-model qwen1.5-moe-a2.7b --machine <file>"), std::string::npos) << note;
  prov["cost_sources"]["fitted"]["time_fraction"] = 0.2;  // three quarters measured: no note
  EXPECT_EQ(unmeasured_note("m", prov), "");
  prov["measured"] = nullptr;  // a hypothetical machine: nothing to profile on
  prov["cost_sources"]["fitted"]["time_fraction"] = 0.9;
  EXPECT_EQ(unmeasured_note("m", prov), "");
}
