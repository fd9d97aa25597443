#include "planner/validate/missing_shapes.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/files.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/elementwise_cost.hpp"
#include "planner/cost/quant_cost.hpp"
#include "planner/plan/sharding.hpp"
#include "planner/topology/topology.hpp"
#include "planner/validate/gpu_backend.hpp"

namespace peerplan {

namespace {

bool from_a_measured_point(CostSource s) {
  return s == CostSource::Measured || s == CostSource::Interpolated || s == CostSource::Extrapolated;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

BatchShape mixed_iteration() {
  BatchShape sh;
  sh.prefill_seqs = 1, sh.prefill_tokens = 512, sh.prefill_context = 512;
  sh.decode_seqs = 8, sh.decode_context = 1024;
  return sh;
}

std::optional<ElementwiseShapeKey> elementwise_shape_key(const Op& op, const Plan& plan, const ModelConfig& cfg) {
  if (op.kind != OpKind::Elementwise || op.ew == EwKind::None || op.ew_cols <= 0) return std::nullopt;
  ElementwiseShapeKey k;
  k.kind = ew_kind_name(op.ew);
  k.cols = op.ew_cols;
  if (op.ew == EwKind::Rotary || op.ew == EwKind::QkNorm) {
    const AttnShard a = attn_shard(cfg, LayerFigures{}, stage_layout(plan, size_t(op.stage)).tp);
    k.heads = a.heads, k.kv_heads = a.kv_heads, k.head_dim = a.qk_dim;
  }
  if (op.ew == EwKind::MlaRotary) {  // mla_rope_and_cache: the GPU's heads' q_pe and the one shared k_pe
    const AttnShard a = attn_shard(cfg, LayerFigures{}, stage_layout(plan, size_t(op.stage)).tp);
    k.heads = a.heads, k.kv_heads = 1, k.head_dim = a.rope_dim;  // cols = (heads + 1) x rope_dim
  }
  if (op.ew == EwKind::MoeRoute || op.ew == EwKind::MoeCombine) {
    k.topk = cfg.experts_per_token;
    k.experts = cfg.experts;
    k.local_experts = op.expert_count > 0 ? op.expert_count : cfg.experts;
  }
  return k;
}

AttentionShapeKey attention_shape_key(const Op& op) {
  AttentionShapeKey k{op.attn_heads, op.attn_kv_heads, op.attn_head_dim, attention_table_dtype(op.kv_dtype)};
  if (attention_v_dim(op.attn_v_dim, op.attn_head_dim) != op.attn_head_dim) {  // MLA: one phase, its own v
    k.v_dim = op.attn_v_dim;
    k.phase = op.attn_prefill ? "prefill" : "decode";
  }
  return k;
}

GemmShapeKey gemm_shape_key(const Op& op) {
  return {op.n, op.k, gemm_table_dtype(op.wdtype), std::max<int64_t>(1, op.batch_count)};
}

std::set<ElementwiseShapeKey> graph_elementwise_shapes(const OpGraph& g, const Plan& plan, const ModelConfig& cfg) {
  std::set<ElementwiseShapeKey> out;
  for (const Op& op : g.ops)
    if (auto k = elementwise_shape_key(op, plan, cfg)) out.insert(*k);
  return out;
}

ShapeSet plan_missing_shapes(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine) {
  ShapeSet wanted;
  wanted.attention_max_context = std::max<int64_t>(8192, std::min<int64_t>(cfg.max_context, int64_t(1) << 17));
  const Plan copy0 = plan.replica_count() > 1 ? replica_plan(plan, 0) : plan;
  const OpGraph g = compile_iteration(copy0, cfg, fig, machine, mixed_iteration());
  Topology topo(machine);
  CostModel cost(topo);
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::Gemm && op.kind != OpKind::GroupedGemm && op.kind != OpKind::Attention &&
        op.kind != OpKind::Elementwise)
      continue;
    // A batched GEMM priced from plain rows of its (n, k) is still Measured, but as a loop of plain
    // calls: wanted unless rows of its batch exist (missing_shapes checks that).
    const bool batched = op.kind == OpKind::Gemm && op.batch_count > 1;
    if (!batched && from_a_measured_point(cost.price(op, false).source)) continue;
    if (op.kind == OpKind::Elementwise) {
      if (auto k = elementwise_shape_key(op, copy0, cfg)) wanted.elementwise.insert(*k);
    } else if (op.kind == OpKind::Gemm)
      wanted.gemms.insert(gemm_shape_key(op));
    else if (op.kind == OpKind::Attention)
      wanted.attention.insert(attention_shape_key(op));
    else
      wanted.grouped.insert({op.n, op.k, op.expert_count, cfg.experts_per_token, cfg.experts,
                             ends_with(op.name, "expert.gate_up"), gemm_table_dtype(op.wdtype)});
  }
  static const Measurements none;
  return missing_shapes(wanted, machine.measurements ? *machine.measurements : none);
}

nlohmann::json MissingShapesResult::to_json() const {
  return {{"shapes", measured.size()},
          {"what", describe_shapes(measured)},
          {"rows_added", rows.added()},
          {"seconds", seconds},
          {"written", written}};
}

std::string MissingShapesResult::summary() const {
  if (measured.empty()) return "";
  return fmt::format("  measured before predicting: {} shape{} the profile lacked ({}), {} rows in {:.1f} s{}\n",
                     measured.size(), measured.size() == 1 ? "" : "s", describe_shapes(measured), rows.added(), seconds,
                     written.empty() ? std::string(" (not kept: --out or --update-machine keeps them)")
                                     : fmt::format("; written: {}", fmt::join(written, ", ")));
}

MissingShapesResult measure_missing_shapes(GpuBackend& gpu, const Plan& plan, const ModelConfig& cfg,
                                           const ModelFigures& fig, Machine& machine, const MissingShapesOptions& o) {
  MissingShapesResult r;
  const ShapeSet missing = plan_missing_shapes(plan, cfg, fig, machine);
  if (missing.empty()) return r;
  std::cerr << fmt::format("peerplan: the profile has no measured points of {} of {}'s shapes; measuring them on GPU 0 "
                           "first (--no-measure-missing: predict without)...\n",
                           describe_shapes(missing), cfg.name);
  const auto t0 = std::chrono::steady_clock::now();
  const Measurements rows = gpu.measure_shapes(machine, missing, shape_sweep_of(machine));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.measured = missing;
  AddedShapes a;
  a.by = "validate";
  a.models = {cfg.name};
  a.date = utc_now_iso8601();
  a.measured = missing;
  a.seconds = r.seconds;
  r.rows = add_measured_shapes(machine, rows, a);
  const std::string text = machine_to_json(machine).dump(1) + "\n";
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    r.written.push_back(o.out_dir + "/machine-extended.json");
    write_file_atomic(r.written.back(), text);
  }
  if (o.update_machine) {
    write_file_atomic(o.machine_file, text);
    r.written.push_back(o.machine_file);
  }
  return r;
}

}  // namespace peerplan
