// `peerplan profile --add-model M --machine host.json` and validate's missing shapes: time only the
// model-dependent shapes a profile of this host lacks, through the same code as a full profile
// (profiler/measure/shape_timing.hpp), and merge them in (planner/topology/shape_set.hpp). The
// machine file is rewritten atomically once everything is measured: an error on the way leaves it
// as it was. The CPU half (which shapes, which formats, the host check, the report) is
// profiler/common/profile_extend.*, tested without a GPU.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/topology/executor_launch.hpp"
#include "profiler/common/checkpoint.hpp"
#include "profiler/common/dispatch_formats.hpp"
#include "profiler/common/child_process.hpp"
#include "profiler/common/elementwise_plan.hpp"
#include "profiler/common/profile_extend.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/discovery/discovery.hpp"
#include "profiler/measure/pacing.hpp"
#include "profiler/measure/shape_timing.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

Measurements measure_shape_set(const Machine& profile, const ShapeSet& shapes, const ShapeSweep& sweep, bool progress) {
  ProfileOptions opts;
  opts.quick = sweep.quick;
  opts.samples = sweep.samples;
  opts.warmup = sweep.warmup;
  opts.progress = progress;
  SweepPlan plan;
  plan.tokens = sweep.tokens;
  plan.samples = sweep.samples;
  plan.warmup = sweep.warmup;
  plan.quick = sweep.quick;
  plan.duty = sweep.duty;
  Machine machine = profile;  // GPU 0's SM count sizes the attention workspace
  Measurements ms;
  // Rough seconds on an H200, for the ETA: a GEMM point ~3 ms of samples, an attention grid ~4 s.
  const double est_gemm = 0.003 * double(shapes.gemms.size() * sweep.tokens.size());
  const double est_attn = (sweep.quick ? 0.5 : 4.0) * double(shapes.attention.size());
  // + ~2 s a shape for its one-expert cuBLAS rows (expert_gemm.cpp)
  const double est_grouped = 0.01 * double(shapes.grouped.size() * sweep.tokens.size()) + 2.0 * double(shapes.grouped.size());
  const double est_ew = elementwise_est_seconds(elementwise_timing_keys(shapes.elementwise).size(), sweep.tokens.size());
  Progress bar(progress, est_gemm + est_attn + est_grouped + est_ew);
  Context ctx{opts, plan, machine, ms, bar, ""};
  if (!shapes.gemms.empty()) {
    bar.begin("gemm", est_gemm);
    time_gemm_shapes(ctx, shapes.gemms, sweep.tokens);
    bar.end();
  }
  if (!shapes.attention.empty()) {
    bar.begin("attention", est_attn);
    time_attention_shapes(ctx, shapes.attention, shapes.attention_max_context);
    bar.end();
  }
  if (!shapes.grouped.empty()) {
    bar.begin("grouped_gemm", est_grouped);
    time_grouped_shapes(ctx, shapes.grouped, sweep.tokens);
    time_expert_shapes(ctx, shapes.grouped, sweep.tokens);
    bar.end();
  }
  if (!shapes.elementwise.empty()) {
    bar.begin("elementwise", est_ew);
    time_elementwise_shapes(ctx, shapes.elementwise, sweep.tokens);
    bar.end();
  }
  bar.finish();
  return ms;
}

namespace {

// A paced profile with the throttle by class: each MoE model gets its dispatch's mixes in each expert format its
// wanted shapes hold that the profile has no table of (power_mix.cpp, dispatch_formats.hpp), or its long
// prefills would slow as another format's dispatch or as dense GEMMs. Returns how many tables were added.
size_t add_dispatch_mixes(Machine& profile, const std::vector<ModelConfig>& models, const std::vector<std::string>& names,
                          const ShapeSet& wanted, double duty) {
  auto& t = profile.measurements->power_throttle;
  if (!t || t->mixes.empty() || duty >= 1 || std::find(names.begin(), names.end(), "grouped_gemm") == names.end())
    return 0;
  const std::vector<std::vector<DType>> formats = dispatch_formats(models, wanted.grouped);
  std::vector<ModelConfig> need;
  std::vector<std::vector<DType>> need_formats;
  size_t tables = 0;
  for (size_t i = 0; i < models.size(); ++i) {
    if (!models[i].is_moe()) continue;
    std::vector<DType> f = formats_without_table(*t, models[i], formats[i].empty() ? std::vector<DType>{DType::BF16}
                                                                                   : formats[i]);
    if (f.empty()) continue;
    tables += f.size() * kThrottleMixTokens.size();
    need.push_back(models[i]);
    need_formats.push_back(std::move(f));
  }
  if (need.empty()) return 0;
  std::cerr << fmt::format("profile: the MoE dispatch's power-throttle mixes of {} model(s), {} table(s), ~6 s each\n",
                           need.size(), tables);
  for (GroupedThrottle& g : measure_grouped_throttle(0, need, kThrottleMixTokens, need_formats))
    t->grouped.push_back(std::move(g));
  return tables;
}

}  // namespace

void run_add_models(const ProfileOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<ModelConfig> models = load_profile_models(opts.add_models);  // a bad name fails first
  const std::string file = resolve_machine_path(opts.machine);
  Machine profile = load_machine(file);
  const HostInfo host = discover_host();
  check_profile_is_this_host(profile, file, host);
  // New rows must be timed as the old ones were (executor_launch.hpp): one profile, one way.
  if (const std::string timed = executor_launch(profile); timed != host.executor_launch)
    throw InputError(file, std::string("meta.") + kExecutorLaunchKey,
                     "'" + host.executor_launch + "', as this executor launches its decode kernels; the profile was timed '" +
                         timed + "'. Run the same build as the profile with PEERPLAN_PDL=" + (timed == "pdl" ? "1" : "0") +
                         ", or write a fresh profile with `peerplan profile`");
  std::vector<std::string> names;
  for (const MeasurementInfo* m : select_measurements(opts.only, opts.skip))
    if (m->uses_models) names.push_back(m->name);
  if (names.empty())
    throw InputError("", "--only/--skip", "at least one of gemm, attention, grouped_gemm, elementwise with --add-model");
  const std::vector<std::string> dtypes =
      add_model_dtypes(profile, opts.dtypes_given ? opts.dtypes : std::vector<std::string>{});
  if (const std::string order = w4_layout_for_added_rows(profile, dtypes, host.w4_layout, file); !order.empty())
    profile.meta[kW4LayoutKey] = order;  // the profile's first int4 rows: timed in this executor's order
  if (const int w8 = w8_mma_for_added_rows(profile, dtypes, host.moe_w8_mma, file); w8 >= 0)
    profile.meta[kMoeW8MmaKey] = w8 == 1;  // the profile's first 8-bit expert rows: timed on this kernel
  const AddModelsPlan p = plan_add_models(profile, models, dtypes, names);
  const std::string out = opts.out_given ? opts.out : file;
  if (p.missing.empty()) {
    const size_t tables = add_dispatch_mixes(profile, models, names, p.wanted, p.sweep.duty);
    if (out != file || tables > 0) save_profile(profile, out);
    std::cout << add_models_report(p, MergeCount{}, 0, out);
    if (tables > 0) std::cout << fmt::format("  added {} table(s) of the MoE dispatch's power-throttle mixes\n", tables);
    return;
  }
  std::cerr << fmt::format("profile: measuring {} of {} on GPU 0 ({} token counts, {} samples per point)\n",
                           describe_shapes(p.missing), fmt::join(p.models, ", "), p.sweep.tokens.size(), p.sweep.samples);
  Measurements rows = measure_shape_set(profile, p.missing, p.sweep, opts.progress);
  for (const ShapeNote& n : p.notes) rows.extra["not_applicable"][n.what] = n.why;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AddedShapes a;
  a.by = "profile --add-model";
  a.models = p.models;
  a.date = utc_now_iso8601();
  a.measured = p.missing;
  a.seconds = seconds;
  const MergeCount c = add_measured_shapes(profile, rows, a);
  add_dispatch_mixes(profile, models, names, p.wanted, p.sweep.duty);
  save_profile(profile, out);  // atomic: the old file stays whole until this succeeds
  std::cout << add_models_report(p, c, seconds, out);
}

Measurements measure_shape_set_in_child(const Machine& profile, const ShapeSet& shapes, const ShapeSweep& sweep,
                                        bool progress) {
  TempDir dir("peerplan-measure");
  const std::string machine = dir.file("profile.json"), request = dir.file("request.json"), rows = dir.file("rows.json");
  write_file_atomic(machine, machine_to_json(profile).dump() + "\n");
  write_file_atomic(request, shape_request_to_json(shapes, sweep).dump() + "\n");
  std::vector<std::string> args = {self_exe("the child that times the missing shapes"), "profile",
                                   "--internal-measure-shapes", request, "--machine", machine, "--out", rows};
  if (!progress) args.push_back("--no-progress");
  run_child(args, {}, "measuring the shapes the profile lacks",
            "its error is above; validate --no-measure-missing predicts without them, or measure them first with "
            "`peerplan profile --add-model MODEL --machine FILE`");
  return parse_measurements(JsonIn(load_json_file(rows), rows));
}

void run_measure_shapes_child(const ProfileOptions& opts) {
  const Machine profile = load_machine(opts.machine);
  const nlohmann::json j = load_json_file(opts.measure_shapes_request);
  const ShapeRequest r = shape_request_from_json(JsonIn(j, opts.measure_shapes_request));
  const Measurements rows = measure_shape_set(profile, r.shapes, r.sweep, opts.progress);
  write_file_atomic(opts.out, measurements_to_json(rows).dump() + "\n");
}

}  // namespace peerplan::profiler
