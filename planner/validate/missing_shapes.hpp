#pragma once
// validate measures what the profile lacks before it predicts (issue 23): which of a plan's priced
// shapes have no measured point, and the step that times them on this host's GPU through the
// backend (the profiler's own code, as `profile --add-model`) and merges them into the machine.
// So a validation compares the executor with a prediction from measured points, never a roofline.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"

namespace peerplan {

class GpuBackend;

// The iteration plan_missing_shapes compiles: a 512-token prefill chunk over 512 tokens of context
// beside 8 decoding sequences, so every kind of op appears (shapes do not depend on the batch) and
// its 520 routed tokens reach every expert of the shipped MoE models on any EP shard.
BatchShape mixed_iteration();

// The profiler's key of an elementwise op of `plan` (a graph compiled from it for `cfg`): its kind
// and ew_cols (the table's key), plus what the executor's call takes besides them: the attention
// shard of the op's stage (qk_norm, rotary; the executor runs rotary over head_dim; mla_rotary:
// heads, kv_heads 1 for the shared k_pe, head_dim = rope_dim), the model's top-k and the GPU's
// experts (moe_route, moe_combine). nullopt for an op that is not elementwise.
std::optional<ElementwiseShapeKey> elementwise_shape_key(const Op& op, const Plan& plan, const ModelConfig& cfg);

// The profiler's key of an Attention op: its per-GPU heads, kv heads, head dim and KV format; for
// MLA's ops (attn_v_dim other than attn_head_dim) also the value dim and the op's phase, as MLA's
// absorbed decode and expanded prefill are two kernels of two shapes (AttentionShapeKey).
AttentionShapeKey attention_shape_key(const Op& op);

// The profiler's key of a Gemm op: (n, k, the rows' weight format, batch_count). batch_count > 1
// (MLA's absorbed products) is one strided-batched call, a key of its own.
GemmShapeKey gemm_shape_key(const Op& op);

// The elementwise keys of every elementwise op of `g` (compiled from `plan`), in a set.
std::set<ElementwiseShapeKey> graph_elementwise_shapes(const OpGraph& g, const Plan& plan, const ModelConfig& cfg);

// The shapes of `plan`'s compute ops that the cost model prices without a measured point of that
// shape (its CostSource is fitted, derived or nominal), keyed as the profiler times them: GEMMs by
// (n, k, weight format, batch: gemm_shape_key; a batched GEMM whenever the profile has no rows of
// its batch, as plain rows of its (n, k) would price it Measured but as a loop of plain calls),
// attention by head configuration per GPU (attention_shape_key: MLA's decode and prefill shapes
// apart), grouped expert GEMMs by the experts each GPU holds, elementwise kernels by
// (kind, cols) (elementwise_shape_key). Found by compiling one mixed iteration (mixed_iteration: a
// prefill chunk beside decoding sequences, so every kind of op appears, and every expert gets rows)
// of copy 0 and pricing its ops; only shapes with no rows in the machine's tables are returned
// (missing_shapes). The attention grid reaches the model's context (at least
// 8192, at most 128 Ki tokens), as a full profile's.
ShapeSet plan_missing_shapes(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine);

struct MissingShapesOptions {
  std::string out_dir;          // validate --out: machine-extended.json goes there ("": not written)
  bool update_machine = false;  // --update-machine: also rewrite the machine file itself
  std::string machine_file;     // the file --machine named (resolved)
};

struct MissingShapesResult {
  ShapeSet measured;            // the shapes timed (empty: nothing was missing)
  MergeCount rows;
  double seconds = 0;
  std::vector<std::string> written;  // files written, in order
  nlohmann::json to_json() const;    // validation.json context "missing_shapes_measured"
  std::string summary() const;       // one line for the terminal ("" when nothing was measured)
};

// Times plan_missing_shapes(...) through gpu.measure_shapes on this host's GPU 0 with the profile's
// own sweep (shape_sweep_of), merges the rows into `machine` (meta.added_shapes records it, "by":
// "validate") and writes the extended profile as `o` asks (atomically each). The caller has checked
// that `machine` is this host's.
MissingShapesResult measure_missing_shapes(GpuBackend& gpu, const Plan& plan, const ModelConfig& cfg,
                                           const ModelFigures& fig, Machine& machine, const MissingShapesOptions& o);

}  // namespace peerplan
