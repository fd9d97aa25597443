#pragma once
// `peerplan profile --add-model M --machine host.json`, its CPU half: is the file a profile of
// THIS host, which formats and measurements to add, which of the models' shapes it lacks, and the
// summary printed at the end. The GPU half (profiler/profile_extend.cpp) times the missing shapes
// through the same code as a full profile (profiler/measure/shape_timing.hpp) and merges them with
// add_measured_shapes (planner/topology/shape_set.hpp), the merge validate uses too.
#include <string>
#include <vector>

#include "planner/core/json_in.hpp"
#include "planner/model/model_config.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"
#include "planner/validate/preflight.hpp"
#include "profiler/common/model_shapes.hpp"

namespace peerplan::profiler {

// Throws InputError naming `file` when `profile` is not a measurement of this host: a nominal
// machine, other GPU UUIDs (both named, as validate's preflight names them), another hostname.
void check_profile_is_this_host(const Machine& profile, const std::string& file, const HostInfo& host);

// The GEMM weight formats to time: `requested` (--dtypes given) if not empty, else every format
// the profile has GEMM rows of, else bf16.
std::vector<std::string> add_model_dtypes(const Machine& profile, const std::vector<std::string>& requested);

// Adding int4 rows (`dtypes` has "int4"): the int4 word order the profile will say its W4A16 rows were
// timed in (executor_launch.hpp kW4LayoutKey): `host_layout` when the profile has no int4 rows yet, ""
// (nothing to change) when it has and they agree; throws InputError naming `file` when they were timed in
// another order (one profile, one order, as for the launch mode). No int4 added: "".
std::string w4_layout_for_added_rows(const Machine& profile, const std::vector<std::string>& dtypes,
                                     const std::string& host_layout, const std::string& file);
// The same for the 8-bit experts' tiled kernel (executor_launch.hpp kMoeW8MmaKey): `host_w8_mma` (1 / 0) when
// the profile has no fp8 / int8 grouped rows yet, -1 (nothing to change) when it has and they agree, or none
// are added, or this executor does not say; throws InputError naming `file` when they were timed on the other.
int w8_mma_for_added_rows(const Machine& profile, const std::vector<std::string>& dtypes, int host_w8_mma,
                          const std::string& file);

struct AddModelsPlan {
  std::vector<std::string> models;  // names, as recorded in meta.added_shapes
  ShapeSet wanted;                  // every shape of the models on this host's GPU count
  ShapeSet missing;                 // those the profile has no points of: what will be timed
  std::vector<ShapeNote> notes;     // shapes left out (kernels that do not run them)
  ShapeSweep sweep;                 // the profile's own token counts and samples
};

// `measurements`: the selected model measurements ("gemm", "attention", "grouped_gemm",
// "elementwise"; --only / --skip); the others' shapes are not wanted.
AddModelsPlan plan_add_models(const Machine& profile, const std::vector<ModelConfig>& models,
                              const std::vector<std::string>& dtypes, const std::vector<std::string>& measurements);

// The lines printed when done: what was there, what was measured, rows added, time, the file.
std::string add_models_report(const AddModelsPlan& p, const MergeCount& rows, double seconds, const std::string& out);

// What validate hands the child process that times a plan's missing shapes (`profile
// --internal-measure-shapes REQUEST --machine PROFILE --out ROWS`, profiler/profile_extend.cpp):
// the shapes and the profile's sweep, so the child times exactly what the parent would have.
nlohmann::json shape_request_to_json(const ShapeSet& shapes, const ShapeSweep& sweep);
struct ShapeRequest {
  ShapeSet shapes;
  ShapeSweep sweep;
};
ShapeRequest shape_request_from_json(const JsonIn& j);  // InputError naming the file and field

}  // namespace peerplan::profiler
