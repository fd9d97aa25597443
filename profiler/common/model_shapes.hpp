#pragma once
// The model-dependent shapes a profile times, from the models (one definition for the full
// profile's gemm / attention / grouped_gemm measurements and for `profile --add-model`): GEMMs of
// every weight shape at each TP degree (gemm_shapes.hpp) in each weight format; attention head
// configurations per GPU at each TP degree, where the executor's kernels run them; grouped expert
// GEMMs of the MoE models (TP-split experts, and the EP shards E/ep at TP 1). CPU only.
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
// add no attention configuration (the executor has no MLA kernels); a head shape the kernels do
// not run (profiler/common/attention_support.hpp) is left out with a note. The attention grid
// reaches the largest context of the standard-attention models (at least 8192, at most 128 Ki).
ShapeSet model_shape_set(const std::vector<ModelConfig>& models, int gpus, const std::vector<std::string>& dtypes,
                         std::vector<ShapeNote>* notes = nullptr);

// The GEMM weight formats the profiler times (`profile --dtypes`).
const std::vector<std::string>& profiler_gemm_dtypes();

}  // namespace peerplan::profiler
