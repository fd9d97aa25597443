#pragma once
// validate measures what the profile lacks before it predicts (issue 23): which of a plan's priced
// shapes have no measured point, and the step that times them on this host's GPU through the
// backend (the profiler's own code, as `profile --add-model`) and merges them into the machine.
// So a validation compares the executor with a prediction from measured points, never a roofline.
#include <string>

#include <nlohmann/json.hpp>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"

namespace peerplan {

class GpuBackend;

// The shapes of `plan`'s compute ops that the cost model prices without a measured point of that
// shape (its CostSource is fitted, derived or nominal), keyed as the profiler times them: GEMMs by
// (n, k, weight format), attention by head configuration per GPU (standard attention: the executor
// has no MLA kernels), grouped expert GEMMs by the experts each GPU holds. Found by compiling one
// mixed iteration (a prefill chunk beside decoding sequences, so every kind of op appears, and
// every expert gets rows) of copy 0 and pricing its ops; only shapes with no rows in the machine's
// tables are returned (missing_shapes). The attention grid reaches the model's context (at least
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
