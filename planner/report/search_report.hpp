#pragma once
// Search results for people and programs: the ranked terminal table, JSON, CSV, and a Markdown
// report directory with plots drawn by scripts/plot_report.py.
#include <string>

#include <nlohmann/json.hpp>

#include "planner/report/pareto.hpp"
#include "planner/search/search.hpp"

namespace peerplan {
class OutputSet;
}

namespace peerplan {

// The ranked table (ANSI-free, fixed width) followed by the verdict and advice. `model_arg`: the
// --model argument as the user gave it, for the command in unmeasured_note ("": the model's name).
std::string ranked_table(const SearchResult& r, size_t max_rows = 30, const std::string& model_arg = "");
// "measured 62% · interpolated 30% · nominal 8%" from a metrics provenance (by simulated time).
std::string cost_source_summary(const nlohmann::json& provenance);
// One line for people when more than a quarter of a plan's step time is fitted or roofline-priced
// on a machine file that has measured tables: how much, the band, and the exact command that adds
// the model's shapes to that machine file (`peerplan profile --add-model MODEL_ARG --machine
// FILE`, FILE = provenance "machine_file"; add_model_command in planner/topology/shape_set.hpp).
// `model_arg`: the --model argument as given ("": `model`). Empty otherwise (and always for
// machines without measurements).
std::string unmeasured_note(const std::string& model, const nlohmann::json& prov, const std::string& model_arg = "");

// A plan's two throughput figures (docs/simulator.md, "Pareto front"): output tokens/s over all the
// plan's GPUs (plan.num_gpus()), and tokens/s per user = 1 / TPOT p50 (0 when TPOT p50 is 0: no
// request produced a second token).
ParetoPoint throughput_point(const CandidateResult& c);
// Indices into r.ranked of the plans on the Pareto front of those figures (pareto_front's order).
std::vector<size_t> search_pareto(const SearchResult& r);

nlohmann::json search_to_json(const SearchResult& r);   // format "peerplan.search", version 1; "pareto": the front
std::string search_to_csv(const SearchResult& r);       // one row per simulated candidate, then the rejected;
                                                        // last column `pareto`: true for the front

// Stages DIR/report.md, DIR/search.json and DIR/metrics/<rank>.json (per-request timings, for the
// CDFs) in `out` (written with the command's other outputs, all or none); creates DIR/metrics.
void stage_report_dir(const SearchResult& r, const std::string& dir, OutputSet& out);
// Draws DIR/*.png from those files via scripts/plot_report.py when python3 with matplotlib is
// available; returns a note about plotting (empty when the plots were drawn).
std::string draw_report_plots(const std::string& dir);
// Both, on their own.
std::string write_report_dir(const SearchResult& r, const std::string& dir);

}  // namespace peerplan
