#include "profiler/common/profile_extend.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/topology/executor_launch.hpp"

namespace peerplan::profiler {

void check_profile_is_this_host(const Machine& profile, const std::string& file, const HostInfo& host) {
  const std::string why = profile_host_mismatch(profile, host);
  if (why.empty()) return;
  throw InputError(file, "host",
                   why + ". --add-model adds measurements to a profile of THIS host (points of other GPUs would "
                         "be mixed with its own): run `peerplan profile --out this-host.json` here first, or check "
                         "CUDA_VISIBLE_DEVICES");
}

std::string w4_layout_for_added_rows(const Machine& profile, const std::vector<std::string>& dtypes,
                                     const std::string& host_layout, const std::string& file) {
  if (std::find(dtypes.begin(), dtypes.end(), "int4") == dtypes.end() || host_layout.empty()) return "";
  const bool has_int4 = profile.measurements &&
                        (std::any_of(profile.measurements->gemms.begin(), profile.measurements->gemms.end(),
                                     [](const GemmTime& g) { return g.dtype == "int4"; }) ||
                         std::any_of(profile.measurements->grouped_gemms.begin(), profile.measurements->grouped_gemms.end(),
                                     [](const GroupedGemmTime& g) { return g.dtype == "int4"; }));
  if (!has_int4) return host_layout;
  const std::string timed = w4_layout_timed(profile);
  if (timed == host_layout) return "";
  throw InputError(file, std::string("meta.") + kW4LayoutKey,
                   "'" + host_layout + "', the int4 word order this executor reads; the profile's W4A16 rows were timed "
                   "in '" + timed + "'. Run with PEERPLAN_W4_LAYOUT=" + timed +
                   " to add rows in its order, or write a fresh profile with `peerplan profile`");
}

int w8_mma_for_added_rows(const Machine& profile, const std::vector<std::string>& dtypes, int host_w8_mma,
                          const std::string& file) {
  auto eight_bit = [](const std::string& d) { return d == "fp8" || d == "int8"; };
  if (std::none_of(dtypes.begin(), dtypes.end(), eight_bit) || host_w8_mma < 0) return -1;
  const bool has = profile.measurements &&
                   std::any_of(profile.measurements->grouped_gemms.begin(), profile.measurements->grouped_gemms.end(),
                               [&](const GroupedGemmTime& g) { return eight_bit(g.dtype); });
  if (!has) return host_w8_mma;
  const int timed = moe_w8_mma_timed(profile);
  if (timed == host_w8_mma) return -1;
  throw InputError(file, std::string("meta.") + kMoeW8MmaKey,
                   std::string(host_w8_mma == 1 ? "true" : "false") +
                       ", as this executor runs 8-bit experts' tiled groups; the profile's fp8 / int8 grouped rows were "
                       "timed with " + (timed == 1 ? "true" : "false") + ". Run with PEERPLAN_MOE_W8_MMA=" +
                       std::to_string(timed) + " to add rows as they were timed, or write a fresh profile with "
                       "`peerplan profile`");
}

std::vector<std::string> add_model_dtypes(const Machine& profile, const std::vector<std::string>& requested) {
  if (!requested.empty()) return requested;
  std::vector<std::string> out;
  if (profile.measurements) {
    std::set<std::string> have;
    for (const GemmTime& g : profile.measurements->gemms) have.insert(g.dtype);
    for (const std::string& d : profiler_gemm_dtypes())  // the profiler's order (bf16 first)
      if (have.count(d)) out.push_back(d);
  }
  if (out.empty()) out.push_back("bf16");
  return out;
}

AddModelsPlan plan_add_models(const Machine& profile, const std::vector<ModelConfig>& models,
                              const std::vector<std::string>& dtypes, const std::vector<std::string>& measurements) {
  AddModelsPlan p;
  for (const ModelConfig& m : models) p.models.push_back(m.name);
  p.wanted = model_shape_set(models, profile.gpu_count(), dtypes, &p.notes);
  auto selected = [&](const char* name) {
    return std::find(measurements.begin(), measurements.end(), name) != measurements.end();
  };
  if (!selected("gemm")) p.wanted.gemms.clear();
  if (!selected("attention")) p.wanted.attention.clear();
  if (!selected("grouped_gemm")) p.wanted.grouped.clear();
  if (!selected("elementwise")) p.wanted.elementwise.clear();
  static const Measurements none;
  p.missing = missing_shapes(p.wanted, profile.measurements ? *profile.measurements : none);
  p.sweep = shape_sweep_of(profile);
  return p;
}

std::string add_models_report(const AddModelsPlan& p, const MergeCount& rows, double seconds, const std::string& out) {
  std::string s = fmt::format("{}: {} of the models' shapes; the profile already had {}.\n", fmt::join(p.models, ", "),
                              describe_shapes(p.wanted), p.wanted.size() - p.missing.size());
  for (const ShapeNote& n : p.notes) s += fmt::format("  not timed: {}: {}\n", n.what, n.why);
  if (p.missing.empty()) return s + fmt::format("Nothing to measure: {} is unchanged.\n", out);
  s += fmt::format("Measured {} shape{} ({}) in {:.1f} s: {} rows added ({} GEMM, {} attention, {} grouped{}, {} "
                   "elementwise){}.\n",
                   p.missing.size(), p.missing.size() == 1 ? "" : "s", describe_shapes(p.missing), seconds,
                   rows.added(), rows.gemms, rows.attention, rows.grouped,
                   rows.expert ? fmt::format(" + {} one-expert", rows.expert) : std::string(), rows.elementwise,
                   rows.duplicates ? fmt::format(", {} already there", rows.duplicates) : std::string());
  return s + fmt::format("Wrote {}.\n", out);
}

nlohmann::json shape_request_to_json(const ShapeSet& shapes, const ShapeSweep& sweep) {
  return {{"shapes", shapes_to_json(shapes)},
          {"sweep", {{"tokens", sweep.tokens}, {"samples", sweep.samples}, {"warmup", sweep.warmup}, {"quick", sweep.quick},
                     {"duty", sweep.duty}}}};
}

ShapeRequest shape_request_from_json(const JsonIn& j) {
  ShapeRequest r;
  r.shapes = shapes_from_json(j.object("shapes"));
  const JsonIn sw = j.object("sweep");
  const JsonIn tokens = sw.array("tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t t = tokens[i].as_integer();
    if (t < 1) tokens[i].fail("", "a positive token count");
    r.sweep.tokens.push_back(t);
  }
  r.sweep.samples = int(sw.positive_int("samples"));
  r.sweep.warmup = int(sw.nonnegative_int("warmup"));
  r.sweep.quick = sw.boolean("quick");
  if (sw.has("duty")) {
    r.sweep.duty = sw.positive("duty");
    if (r.sweep.duty > 1) sw.fail("duty", "a share of time in (0, 1]");
  }
  return r;
}

}  // namespace peerplan::profiler
