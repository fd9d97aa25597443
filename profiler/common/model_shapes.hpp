#pragma once
// The model-dependent shapes a profile times, from the models (one definition for the full
// profile's gemm / attention / grouped_gemm measurements and for `profile --add-model`): GEMMs of
// every weight shape at each TP degree (gemm_shapes.hpp) in each weight format; attention head
// configurations per GPU at each TP degree, where the executor's kernels run them; grouped expert
// GEMMs of the MoE models (TP-split experts, and the EP shards E/ep at TP 1); the executor's
// elementwise kernels at the cols the compiler gives each op at each TP degree. CPU only.
#include <set>
#include <string>
#include <vector>

#include "planner/model/model_config.hpp"
#include "planner/topology/shape_set.hpp"

namespace peerplan::profiler {

// A shape left out, and why (recorded under measurements.extra.not_applicable by the caller).
struct ShapeNote {
  std::string what, why;
};

// `gpus`: the host's GPU count (TP degrees 1..gpus that divide the heads; EP degrees 2..gpus that
// divide the experts). `dtypes`: GEMM weight formats ("bf16", "fp8", "int8", "int4"). MLA models
// add their two attention shapes per TP degree (the absorbed decode and the expanded prefill, from
// the compiler's ops: attention_shape_key) and their absorbed per-head GEMMs (strided-batched,
// batch = heads of the rank, bf16 whatever `dtypes`: the executor runs them so); a head shape the
// kernels do not run (profiler/common/attention_support.hpp) is left out with a note. The attention
// grid reaches the largest context of the models (at least 8192, at most 128 Ki).
ShapeSet model_shape_set(const std::vector<ModelConfig>& models, int gpus, const std::vector<std::string>& dtypes,
                         std::vector<ShapeNote>* notes = nullptr);

// The elementwise kernels of `m` (rms_norm, residual, qk_norm, rotary or MLA's mla_rotary, act,
// moe_route, moe_combine) keyed as the cost model looks them up: the compiler's own ops (planner/compile), one mixed
// iteration of a one-stage TP plan at each TP degree 1..gpus that divides the heads, each op keyed by
// elementwise_shape_key (planner/validate/missing_shapes.hpp) as validate keys a plan's ops. EP and
// pipeline plans give no other (kind, cols): hidden, experts and the routed experts' width do not
// depend on them. A TP degree the model cannot be split by, and an MLA shape the kernels do not run
// (mla_shape_refusal), are noted.
std::set<ElementwiseShapeKey> model_elementwise_shapes(const ModelConfig& m, int gpus, std::vector<ShapeNote>* notes = nullptr);

// The GEMM weight formats the profiler times (`profile --dtypes`).
const std::vector<std::string>& profiler_gemm_dtypes();

}  // namespace peerplan::profiler
