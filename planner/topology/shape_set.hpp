#pragma once
// The model-dependent shapes a profile times (issue 23, "measure what is missing"): GEMM weight
// shapes per weight format, attention head configurations, grouped expert GEMMs, the executor's
// elementwise kernels. Keyed as the cost model looks them up (planner/cost: gemm_from_table by (n, k,
// dtype); attention_from_table by heads, kv heads, head dim and KV format; grouped_gemm_from_table by
// (n, k, dtype); elementwise_from_table by (kind, cols)), so "missing" here means "the cost model has
// no measured point of it". Produced from models by the profiler
// (profiler/common/model_shapes.*) and from a plan's priced ops by validate
// (planner/validate/missing_shapes.*); timed by the profiler (profile --add-model, or validate
// through GpuBackend::measure_shapes); merged into a profile here. CPU only.
#include <compare>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/topology/measurements.hpp"

namespace peerplan {

class JsonIn;
struct Machine;

struct GemmShapeKey {  // y[m,n] = x[m,k] W^T over the profile's token counts m
  int64_t n = 0, k = 0;
  std::string dtype = "bf16";  // the "gemms" rows' dtype: bf16, fp8, int8, int4
  // Products per strided-batched call (the rows' `batch`; MLA's absorbed q_absorb / v_absorb: one
  // per head of the rank). 1: a plain GEMM. A batched key is another call: plain rows of (n, k) do
  // not cover it, nor it them.
  int64_t batch = 1;
  auto operator<=>(const GemmShapeKey&) const = default;
};

struct AttentionShapeKey {  // per GPU; timed over the decode and prefill grids
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  std::string kv_dtype = "bf16";
  // MLA (docs/attention.md "MLA"): the value head dim (the rows' v_dim; 0: head_dim, standard
  // attention), and the one phase the shape runs in: MLA's decode (absorbed MQA, 576 / 512) and
  // prefill (expanded MHA, 192 / 128) are two kernels of two shapes, each timed over its own
  // phase's grid only. "": both phases (standard attention runs both at one shape).
  int64_t v_dim = 0;
  std::string phase;
  auto operator<=>(const AttentionShapeKey&) const = default;
};

struct GroupedShapeKey {  // the routed experts one GPU holds, over the profile's token counts
  int64_t n = 0, k = 0;
  int64_t experts = 0;        // experts on the GPU (all of them, or an EP shard E / ep)
  int64_t topk = 0;           // experts per token
  int64_t model_experts = 0;  // the model's experts (routing draws from these)
  bool gather = true;         // gate_up (gathers its tokens) or down (reads sorted rows)
  std::string dtype = "bf16";
  auto operator<=>(const GroupedShapeKey&) const = default;
};

// One of the executor's elementwise kernels over the profile's rows (token counts): the table's key
// is (kind, cols) alone (elementwise_from_table); the other fields are what the executor's call takes
// besides [rows][cols], so the profiler can issue exactly that call (0 where the kind needs none).
// Two keys of one (kind, cols) (e.g. rotary of 32 + 8 and of 36 + 4 heads of 128) share the table's
// curve: the profiler times the first (elementwise_timing_keys, profiler/common/elementwise_plan.hpp).
struct ElementwiseShapeKey {
  std::string kind;                               // kElementwiseKinds: "rms_norm", "rotary", ...
  int64_t cols = 0;                               // the op's ew_cols (moe_route: the model's experts)
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // qk_norm, rotary: the GPU's attention shard
                                                  // (mla_rotary: heads, 1 k_pe, rope_dim)
  int64_t topk = 0, experts = 0;                  // moe_route, moe_combine: the model's top-k and experts
  int64_t local_experts = 0;                      // moe_route, moe_combine: the experts on the GPU
  auto operator<=>(const ElementwiseShapeKey&) const = default;
};

struct ShapeSet {
  std::set<GemmShapeKey> gemms;
  std::set<AttentionShapeKey> attention;
  std::set<GroupedShapeKey> grouped;
  std::set<ElementwiseShapeKey> elementwise;
  int64_t attention_max_context = 8192;  // the attention grid's largest context

  size_t size() const { return gemms.size() + attention.size() + grouped.size() + elementwise.size(); }
  bool empty() const { return size() == 0; }
  void insert(const ShapeSet& o);
};

// The keys of `wanted` that `have` has no rows of: a GEMM with no row of its (n, k, dtype, batch); an
// attention configuration without both decode and prefill rows of its v_dim (an MLA key, whose phase
// is set: without rows of that phase); a grouped GEMM with no row of its
// (n, k, dtype, experts, topk) (the cost model prices every expert count of one (n, k) from all those
// rows, but a model priced from another's alone was 6 % off: shape_set.cpp); an
// elementwise kernel with no row of its (kind, cols). attention_max_context is carried over.
ShapeSet missing_shapes(const ShapeSet& wanted, const Measurements& have);

// "3 GEMM shapes (bf16, fp8), 1 attention configuration, 2 grouped expert GEMMs, 5 elementwise kernel
// shapes" ("nothing" when empty).
std::string describe_shapes(const ShapeSet& s);
nlohmann::json shapes_to_json(const ShapeSet& s);
// The inverse of shapes_to_json (validate hands the shapes it lacks to a child process that times
// them, profiler/common/child_process.hpp). Throws InputError naming the file and field.
ShapeSet shapes_from_json(const JsonIn& j);

// How a profile's model-dependent points were swept, so added points match the ones it has: the
// GEMM token counts it already holds (else powers of two up to its max_tokens), its samples and
// warm-up, --quick.
struct ShapeSweep {
  std::vector<int64_t> tokens;  // GEMM m, grouped-GEMM routed tokens and elementwise rows
  int samples = 20, warmup = 3;
  bool quick = false;
  double duty = 1.0;  // the profile's --duty: new rows are timed as its others were
};
ShapeSweep shape_sweep_of(const Machine& profile);

// Rows merged by merge_shape_rows: added per table, and rows skipped because the profile already
// had a point of the same key (GPU, shape and size).
struct MergeCount {
  size_t gemms = 0, attention = 0, grouped = 0, elementwise = 0, duplicates = 0;
  size_t expert = 0;  // expert_gemms rows (one expert on the cuBLAS path), timed with the grouped ones
  size_t added() const { return gemms + attention + grouped + elementwise + expert; }
};

// Appends `from`'s GEMM, attention, grouped-GEMM, expert-GEMM and elementwise rows to `into`, skipping a row whose
// key (GPU, shape, token count / grid cell / rows, format) `into` already has, and merges
// `from.extra`'s not_applicable notes. Existing rows are kept as they are.
MergeCount merge_shape_rows(Measurements& into, const Measurements& from);

// One entry of the profile's meta.added_shapes (appended): who added points (`by`: "profile
// --add-model" or "validate"), for which models, when, with which peerplan version, what.
struct AddedShapes {
  std::string by;
  std::vector<std::string> models;
  std::string date;          // ISO 8601 UTC
  ShapeSet measured;         // the keys timed
  MergeCount rows;
  double seconds = 0;        // wall time of the measuring
  nlohmann::json details;    // what the timing recorded beside its rows (kernels, grids, holdout errors)
};
void record_added_shapes(Machine& profile, const AddedShapes& a);

// Both: merges `rows` into profile.measurements (created when it had none), records `a` with the
// count and the details `rows.extra` holds besides its notes; returns the count.
MergeCount add_measured_shapes(Machine& profile, const Measurements& rows, AddedShapes a);

// The command that measures a model's missing shapes into a machine file, as a user types it:
// "peerplan profile --add-model MODEL --machine FILE", each argument shell-quoted when it needs it
// (FILE "": the placeholder <file>).
std::string add_model_command(const std::string& model_arg, const std::string& machine_file);

// Now, as "2026-12-03T09:14:00Z".
std::string utc_now_iso8601();

}  // namespace peerplan
