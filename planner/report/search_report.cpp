#include "planner/report/search_report.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/text.hpp"
#include "planner/cost/prediction_band.hpp"
#include "planner/report/pareto.hpp"
#include "planner/topology/shape_set.hpp"

namespace peerplan {

namespace fs = std::filesystem;

std::string cost_source_summary(const nlohmann::json& prov) {
  if (!prov.contains("cost_sources") || !prov["cost_sources"].is_object()) return "-";
  std::string s;
  for (const char* k : {"measured", "interpolated", "extrapolated", "fitted", "derived", "nominal"}) {
    if (!prov["cost_sources"].contains(k)) continue;
    double f = prov["cost_sources"][k].value("time_fraction", 0.0);
    if (f < 0.005) continue;
    s += fmt::format("{}{} {:.0f}%", s.empty() ? "" : ", ", k, 100 * f);
  }
  // Collectives over groups spanning hosts without a measured curve (planner/cost/cross_host_collective.hpp).
  if (prov.contains("inferred_collectives") && prov["inferred_collectives"].is_array() &&
      !prov["inferred_collectives"].empty())
    s += fmt::format("{}cross-host collectives inferred ({} group{})", s.empty() ? "" : "; ",
                     prov["inferred_collectives"].size(), prov["inferred_collectives"].size() == 1 ? "" : "s");
  return s.empty() ? "-" : s;
}

std::string unmeasured_note(const std::string& model, const nlohmann::json& prov, const std::string& model_arg) {
  // Only a machine file with measured GEMM tables can be completed by profiling the model on it.
  if (!prov.contains("measured") || !prov["measured"].is_object() || prov["measured"].value("gemm_shapes", 0) == 0 ||
      !prov.contains("cost_sources") || !prov["cost_sources"].is_object())
    return "";
  const nlohmann::json& cs = prov["cost_sources"];
  auto frac = [&](const char* k) { return cs.contains(k) ? cs[k].value("time_fraction", 0.0) : 0.0; };
  const double fitted = frac("fitted"), rough = frac("derived") + frac("nominal");
  if (fitted + rough <= 0.25) return "";
  std::string band;
  if (fitted > 0 && prov.contains("fitted_fallback") && prov["fitted_fallback"].is_object()) {
    const nlohmann::json& f = prov["fitted_fallback"];
    band = fmt::format(" (fitted {:.0f} %: about ±{:.0f} % for GEMMs, ±{:.0f} % for attention", 100 * fitted,
                       100 * f.value("band_gemm", 0.0), 100 * f.value("band_attention", 0.0));
    band += rough > 0 ? fmt::format("; roofline {:.0f} %: a lower bound only)", 100 * rough) : ")";
  } else {
    band = fmt::format(" (roofline: a lower bound only)");
  }
  const PredictionBand pb = prediction_band(prov);  // the band the table shows (prediction_band.hpp)
  const std::string figures = pb.lower_bound_only
                                  ? std::string("; its figures are a lower bound")
                                  : fmt::format("; its figures ±{:.0f} % TPOT, ±{:.0f} % TTFT", 100 * pb.step_relative,
                                                100 * pb.ttft_relative);
  const std::string file = prov.contains("machine_file") && prov["machine_file"].is_string()
                               ? prov["machine_file"].get<std::string>()
                               : std::string();
  const std::string command = add_model_command(model_arg.empty() ? model : model_arg, file);
  return fmt::format("Note: {:.0f} % of {}'s step time is not from measured points{}{}; measure its shapes into "
                     "the machine file (on the host it profiles; nothing else is re-measured) with: {}\n",
                     100 * (fitted + rough), escape_control(model), band, pb.known ? figures : "",
                     escape_control(command));
}

namespace {

std::string ms(double s) { return fmt::format("{:.2f}", s * 1e3); }
// Names come from input files and scripts: control characters are shown escaped (planner/core/text.hpp).
std::string trunc(const std::string& raw, size_t n) {
  std::string s = escape_control(raw);
  return s.size() <= n ? s : s.substr(0, n - 1) + "~";
}
std::string esc(const std::string& s) { return escape_control(s); }
// The capacity column: "-" when not searched, "<x" when it misses even at the lowest rate tried,
// ">=x" when it meets at the highest.
std::string capacity_cell(const Capacity& c) {
  if (!c.searched) return "-";
  if (c.rate_rps <= 0) return c.miss_rps > 0 ? fmt::format("<{:.2f}", c.miss_rps) : "?";
  return (c.miss_rps > 0 ? "" : ">=") + fmt::format("{:.2f}", c.rate_rps);
}
nlohmann::json capacity_json(const Capacity& c) {
  if (!c.searched) return nullptr;
  return {{"rate_rps", c.rate_rps},
          {"output_tokens_per_s", c.output_tokens_per_s},
          {"miss_rps", c.miss_rps > 0 ? nlohmann::json(c.miss_rps) : nlohmann::json()},
          {"tolerance", c.tolerance},
          {"probes", c.probes},
          {"note", c.note}};
}
std::string esc(const nlohmann::json& p, const char* key, const std::string& def) { return escape_control(p.value(key, def)); }
// A search over several number formats (--dtypes / --kv-dtypes) shows each plan's "w/kv" in a
// column; a search over one shows none, as before.
std::string format_cell(const SearchResult& r, const CandidateResult& c, const char* f = " {:<10}") {
  return r.multi_format() ? fmt::format(fmt::runtime(f), r.formats[c.format].label()) : "";
}
std::string format_head(const SearchResult& r, const char* head, const char* f = " {:<10}") {
  return r.multi_format() ? fmt::format(fmt::runtime(f), head) : "";
}

}  // namespace

ParetoPoint throughput_point(const CandidateResult& c) {
  const Metrics& m = c.metrics;
  const int gpus = c.plan.num_gpus();
  return {gpus > 0 ? m.output_tokens_per_s / double(gpus) : 0.0, m.tpot.p50 > 0 ? 1.0 / m.tpot.p50 : 0.0};
}

std::vector<size_t> search_pareto(const SearchResult& r) {
  std::vector<ParetoPoint> pts;
  for (const auto& c : r.ranked) pts.push_back(throughput_point(c));
  return pareto_front(pts);
}

namespace {

// The front as a table section: the text report and Markdown share the rows.
struct FrontRow {
  size_t rank;
  const CandidateResult* c;
  ParetoPoint p;
};
std::vector<FrontRow> front_rows(const SearchResult& r) {
  std::vector<FrontRow> rows;
  for (size_t i : search_pareto(r)) rows.push_back({i, &r.ranked[i], throughput_point(r.ranked[i])});
  return rows;
}
constexpr const char* kParetoDefinition =
    "tokens/s per GPU = output tokens/s / the plan's GPUs; tokens/s per user = 1 / TPOT p50; on the front: no other "
    "plan is at least as good in both and better in one";

// What the ± and >= on TTFT / TPOT mean (planner/cost/prediction_band.hpp, docs/simulator.md "Error band").
constexpr const char* kBandLegend =
    "  ±: error band from how the figure was priced (measured points: the validated ±5 % TPOT, ±10 % TTFT; fitted "
    "adds its leave-one-model-out error by share); >=: a lower bound only (over 20 % of step time from rooflines or "
    "nominal links)\n";

}  // namespace

std::string ranked_table(const SearchResult& r, size_t max_rows, const std::string& model_arg) {
  std::ostringstream o;
  const Workload& w = r.workload;
  o << fmt::format("Workload {}: {} requests, {} at {:.2f} req/s, SLO TTFT <= {:.0f} ms and TPOT <= {:.0f} ms; "
                   "objective: {}\n",
                   esc(w.name), w.num_requests, w.arrival == Workload::Arrival::Poisson ? "Poisson" : "trace", w.rate_rps,
                   w.slo_ttft_s * 1e3, w.slo_tpot_s * 1e3, to_string(r.objective));
  const auto& p = r.provenance;
  o << fmt::format("Machine {} ({}{}{}); costs: see 'priced from'. {} candidates simulated in {:.2f} s.\n\n",
                   esc(p, "machine", "?"), esc(p, "origin", "?"),
                   p.value("host", std::string()).empty() ? "" : ", host " + esc(p, "host", ""),
                   p.value("date", std::string()).empty() ? "" : ", " + esc(p, "date", ""), r.ranked.size(),
                   r.wall_s);
  if (!r.ranked.empty()) {
    const CandidateResult& top = r.ranked[size_t(r.recommended >= 0 ? r.recommended : 0)];
    o << unmeasured_note(top.metrics.model, top.metrics.provenance, model_arg);
    if (top.metrics.provenance.contains("moe_routing"))
      o << "MoE routing (plan " << trunc(top.plan.name, 40) << "): " << routing::summary_text(top.metrics.provenance["moe_routing"]) << "\n";
    o << fmt::format("{:>3}  {:<34}{} {:>4} {:>4} {:>12} {:>11} {:>9} {:>9} {:>6} {:>8} {:>8} {:>6}  {}\n", "#", "plan",
                     format_head(r, "w/kv"), "gpus", "p2p", "TTFT p50", "TPOT p50", "E2E p99", "out tok/s", "SLO%", "goodput", "capacity",
                     "comm%", "priced from");
    o << fmt::format("{:>3}  {:<34}{} {:>4} {:>4} {:>12} {:>11} {:>9} {:>9} {:>6} {:>8} {:>8} {:>6}\n", "", "",
                     format_head(r, ""), "", "", "ms",
                     "ms", "s", "", "", "req/s", "req/s", "");
    for (size_t i = 0; i < r.ranked.size() && i < max_rows; ++i) {
      const CandidateResult& c = r.ranked[i];
      const Metrics& m = c.metrics;
      std::string mark = int(i) == r.recommended ? " *" : "";
      const PredictionBand band = prediction_band(m.provenance);
      o << fmt::format("{:>3}  {:<34}{} {:>4} {:>4} {:>12} {:>11} {:>9.2f} {:>9.0f} {:>6.1f} {:>8.2f} {:>8} {:>6.1f}  {}{}\n",
                       i + 1, trunc(c.plan.name, 34), format_cell(r, c), c.plan.num_gpus(),
                       c.plan.num_gpus() > 1 ? (c.p2p ? "on" : "off") : "-",
                       with_band(ms(m.ttft.p50), band.ttft_relative, band),
                       with_band(ms(m.tpot.p50), band.step_relative, band), m.e2e.p99,
                       m.output_tokens_per_s, 100 * m.slo_attainment, m.goodput_rps, capacity_cell(c.capacity),
                       100 * c.comm_fraction, cost_source_summary(m.provenance), mark);
    }
    if (r.ranked.size() > max_rows) o << fmt::format("     ... {} more (see --json / --csv)\n", r.ranked.size() - max_rows);
    o << fmt::format("  * recommended; SLO% = requests within TTFT and TPOT; capacity = highest rate within the SLOs "
                     "(>= {:.0f}% and all finished; '-': not searched, --capacity searches every plan)\n",
                     100 * r.slo_threshold);
    o << kBandLegend;
    const std::vector<FrontRow> front = front_rows(r);
    o << fmt::format("\nPareto front ({} of {} plans; {}):\n", front.size(), r.ranked.size(), kParetoDefinition);
    o << fmt::format("{:>3}  {:<34}{} {:>4} {:>4} {:>10} {:>11}\n", "#", "plan", format_head(r, "w/kv"), "gpus", "p2p",
                     "tok/s/GPU", "tok/s/user");
    for (const FrontRow& f : front)
      o << fmt::format("{:>3}  {:<34}{} {:>4} {:>4} {:>10.1f} {:>11.1f}{}\n", f.rank + 1, trunc(f.c->plan.name, 34),
                       format_cell(r, *f.c), f.c->plan.num_gpus(), f.c->plan.num_gpus() > 1 ? (f.c->p2p ? "on" : "off") : "-", f.p.per_gpu,
                       f.p.per_user, int(f.rank) == r.recommended ? "  (recommended)" : "");
  }
  if (!r.rejected.empty()) {
    o << fmt::format("\n{} candidate{} did not run:\n", r.rejected.size(), r.rejected.size() == 1 ? "" : "s");
    for (size_t i = 0; i < r.rejected.size() && i < 8; ++i)
      o << "  - " << esc(r.rejected[i].plan.name) << format_cell(r, r.rejected[i], " [{}]") << ": "
        << trunc(r.rejected[i].why_not, 200) << "\n";
    if (r.rejected.size() > 8) o << fmt::format("  ... {} more\n", r.rejected.size() - 8);
  }
  o << "\n" << escape_control(r.verdict, true) << "\n";
  for (const auto& a : r.advice) o << "  - " << escape_control(a, true) << "\n";
  return o.str();
}

nlohmann::json search_to_json(const SearchResult& r) {
  nlohmann::json j;
  j["format"] = "peerplan.search";
  j["version"] = 1;
  j["objective"] = to_string(r.objective);
  j["workload"] = {{"name", r.workload.name},
                   {"rate_rps", r.workload.rate_rps},
                   {"num_requests", r.workload.num_requests},
                   {"seed", r.workload.seed}};
  j["provenance"] = r.provenance;
  j["precision"] = r.precision;
  if (r.multi_format()) {  // each format's precision; ranked / rejected plans name theirs
    j["formats"] = nlohmann::json::array();
    for (const SearchFormat& f : r.formats) {
      nlohmann::json p = precision_json(f.cfg, f.fig);
      p["label"] = f.label();
      j["formats"].push_back(p);
    }
    if (r.recommended >= 0) j["recommended_format"] = r.formats[r.ranked[size_t(r.recommended)].format].label();
  }
  j["wall_s"] = r.wall_s;
  j["verdict"] = r.verdict;
  j["advice"] = r.advice;
  j["slo_threshold"] = r.slo_threshold;
  j["recommended"] = r.recommended >= 0 ? nlohmann::json(r.ranked[size_t(r.recommended)].plan.name) : nlohmann::json();
  j["capacity"] = r.recommended >= 0 ? capacity_json(r.ranked[size_t(r.recommended)].capacity) : nlohmann::json();
  j["gpu_steps"] = nlohmann::json::array();
  for (const GpuStep& g : r.gpu_steps) {
    const CandidateResult& c = r.ranked[size_t(g.rank)];
    j["gpu_steps"].push_back({{"gpus", g.gpus},
                              {"rank", g.rank + 1},
                              {"plan", c.plan.name},
                              {"meets_slos", c.meets_slos},
                              {"tpot_p50_s", c.metrics.tpot.p50},
                              {"e2e_p99_s", c.metrics.e2e.p99},
                              {"goodput_rps", c.metrics.goodput_rps}});
  }
  j["ranked"] = nlohmann::json::array();
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const CandidateResult& c = r.ranked[i];
    j["ranked"].push_back({{"rank", i + 1},
                           {"plan", plan_to_json(c.plan)},
                           {"strategy_file", c.strategy_file},
                           {"gpus", c.plan.num_gpus()},
                           {"p2p", c.p2p},
                           {"score", c.score},
                           {"meets_slos", c.meets_slos},
                           {"capacity", capacity_json(c.capacity)},
                           {"comm_fraction", c.comm_fraction},
                           {"bottleneck", c.bottleneck},
                           {"fix", c.fix},
                           {"kv_max_seqs", c.memory.max_seqs_that_fit},
                           {"band", band_to_json(prediction_band(c.metrics.provenance))},
                           {"metrics", metrics_to_json(c.metrics, false)}});
    if (r.multi_format()) {
      const SearchFormat& f = r.formats[c.format];
      j["ranked"].back()["format"] = {{"label", f.label()}, {"weights", f.weights}, {"kv_dtype", f.kv},
                                      {"weight_bytes", f.fig.weight_bytes}, {"kv_bytes_per_token", f.fig.kv_bytes_per_token}};
    }
  }
  // tokens/s per GPU against tokens/s per user (1 / TPOT p50): the non-dominated plans (pareto.hpp).
  j["pareto"] = nlohmann::json::array();
  for (const FrontRow& f : front_rows(r))
    j["pareto"].push_back({{"rank", f.rank + 1},
                           {"plan", f.c->plan.name},
                           {"gpus", f.c->plan.num_gpus()},
                           {"p2p", f.c->p2p},
                           {"tokens_per_s_per_gpu", f.p.per_gpu},
                           {"tokens_per_s_per_user", f.p.per_user}});
  if (r.multi_format())
    for (size_t i = 0; i < j["pareto"].size(); ++i) j["pareto"][i]["format"] = format_cell(r, r.ranked[j["pareto"][i]["rank"].get<size_t>() - 1], "{}");
  j["rejected"] = nlohmann::json::array();
  for (const auto& c : r.rejected)
  {
    j["rejected"].push_back({{"plan", c.plan.name}, {"strategy_file", c.strategy_file}, {"why", c.why_not}});
    if (r.multi_format()) j["rejected"].back()["format"] = r.formats[c.format].label();
  }
  return j;
}

std::string search_to_csv(const SearchResult& r) {
  auto q = [](const std::string& s) {
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
  };
  std::ostringstream o;
  o << "rank,plan,strategy,gpus,p2p,fits,ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,tpot_p99_ms,e2e_p50_s,e2e_p99_s,"
       "output_tokens_per_s,slo_attainment,goodput_rps,comm_fraction,busiest_link,priced_from,why_not,pareto"
    << (r.multi_format() ? ",weights,kv_dtype\n" : "\n");
  auto fmt_cols = [&](const CandidateResult& c) {
    return r.multi_format() ? "," + r.formats[c.format].weights + "," + r.formats[c.format].kv : std::string();
  };
  std::vector<bool> on_front(r.ranked.size(), false);
  for (size_t i : search_pareto(r)) on_front[i] = true;
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const CandidateResult& c = r.ranked[i];
    const Metrics& m = c.metrics;
    o << fmt::format("{},{},{},{},{},true,{:.4f},{:.4f},{:.4f},{:.4f},{:.5f},{:.5f},{:.2f},{:.4f},{:.4f},{:.4f},{},{},,{}{}\n", i + 1,
                     q(c.plan.name), q(c.plan.strategy), c.plan.num_gpus(), c.p2p ? "on" : "off", m.ttft.p50 * 1e3,
                     m.ttft.p99 * 1e3, m.tpot.p50 * 1e3, m.tpot.p99 * 1e3, m.e2e.p50, m.e2e.p99, m.output_tokens_per_s,
                     m.slo_attainment, m.goodput_rps, c.comm_fraction, q(m.busiest_link),
                     q(cost_source_summary(m.provenance)), on_front[i] ? "true" : "false", fmt_cols(c));
  }
  for (const auto& c : r.rejected)
    o << fmt::format(",{},{},{},{},false,,,,,,,,,,,,,{},false{}\n", q(c.plan.name), q(c.plan.strategy), c.plan.num_gpus(),
                     c.p2p ? "on" : "off", q(c.why_not), fmt_cols(c));
  return o.str();
}

void stage_report_dir(const SearchResult& r, const std::string& dir, OutputSet& out) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "metrics", ec);
  if (ec) throw InputError("", "--report", "a directory peerplan can create and write (" + dir + ": " + ec.message() + ")");
  out.add("--report", (fs::path(dir) / "search.json").string(), search_to_json(r).dump(2) + "\n");
  const size_t keep = std::min<size_t>(r.ranked.size(), 8);  // CDFs of the top plans
  nlohmann::json index = nlohmann::json::array();
  for (size_t i = 0; i < keep; ++i) {
    std::string f = fmt::format("metrics/{:02d}.json", i + 1);
    out.add("--report", (fs::path(dir) / f).string(), metrics_to_json(r.ranked[i].metrics, true).dump() + "\n");
    index.push_back({{"rank", i + 1}, {"plan", r.ranked[i].plan.name}, {"file", f}});
  }
  out.add("--report", (fs::path(dir) / "metrics" / "index.json").string(), index.dump(2) + "\n");

  std::ostringstream md;
  const auto& p = r.provenance;
  md << "# peerplan plan report\n\n";
  md << fmt::format("- **Machine**: {} ({}{}{})\n", esc(p, "machine", "?"), esc(p, "origin", "?"),
                    p.value("host", std::string()).empty() ? "" : ", host " + esc(p, "host", ""),
                    p.value("date", std::string()).empty() ? "" : ", dated " + esc(p, "date", ""));
  md << fmt::format("- **Workload**: {} — {} requests at {:.2f} req/s (seed {}), objective **{}**\n", esc(r.workload.name),
                    r.workload.num_requests, r.workload.rate_rps, r.workload.seed, to_string(r.objective));
  md << fmt::format("- **Search**: {} plans simulated, {} rejected, {:.2f} s wall\n\n", r.ranked.size(), r.rejected.size(),
                    r.wall_s);
  md << "## Verdict\n\n" << escape_control(r.verdict, true) << "\n\n";
  for (const auto& a : r.advice) md << "- " << escape_control(a, true) << "\n";
  md << "\n## Ranking\n\n";
  md << "| # | plan |" << format_head(r, " weights/KV |", "{}")
     << " GPUs | P2P | TTFT p50 (ms) | TPOT p50 (ms) | E2E p99 (s) | out tok/s | SLO % | goodput (req/s) | capacity (req/s) | comm % | priced from |\n";
  md << "|---|---|" << format_head(r, "---|", "{}") << "---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& c = r.ranked[i];
    const auto& m = c.metrics;
    const PredictionBand band = prediction_band(m.provenance);
    md << fmt::format("| {}{} | `{}` |{} {} | {} | {} | {} | {:.2f} | {:.0f} | {:.1f} | {:.2f} | {} | {:.1f} | {} |\n",
                      i + 1, int(i) == r.recommended ? " ★" : "", esc(c.plan.name), format_cell(r, c, " {} |"), c.plan.num_gpus(),
                      c.plan.num_gpus() > 1 ? (c.p2p ? "on" : "off") : "-",
                      with_band(fmt::format("{:.1f}", m.ttft.p50 * 1e3), band.ttft_relative, band),
                      with_band(fmt::format("{:.2f}", m.tpot.p50 * 1e3), band.step_relative, band), m.e2e.p99,
                      m.output_tokens_per_s, 100 * m.slo_attainment, m.goodput_rps, capacity_cell(c.capacity), 100 * c.comm_fraction,
                      cost_source_summary(m.provenance));
  }
  md << "\n## Pareto front\n\n" << kParetoDefinition << ".\n\n";
  md << "| # | plan |" << format_head(r, " weights/KV |", "{}") << " GPUs | P2P | tokens/s per GPU | tokens/s per user |\n|---|---|"
     << format_head(r, "---|", "{}") << "---|---|---|---|\n";
  for (const FrontRow& f : front_rows(r))
    md << fmt::format("| {}{} | `{}` |{} {} | {} | {:.1f} | {:.1f} |\n", f.rank + 1, int(f.rank) == r.recommended ? " ★" : "",
                      esc(f.c->plan.name), format_cell(r, *f.c, " {} |"), f.c->plan.num_gpus(), f.c->plan.num_gpus() > 1 ? (f.c->p2p ? "on" : "off") : "-",
                      f.p.per_gpu, f.p.per_user);
  md << "\n![Tokens/s per GPU against tokens/s per user](pareto.png)\n";
  if (!r.rejected.empty()) {
    md << "\n## Did not run\n\n";
    for (const auto& c : r.rejected)
      md << "- `" << esc(c.plan.name) << "`" << format_cell(r, c, " ({})") << ": " << esc(c.why_not) << "\n";
  }
  md << "\n## Plots\n\n";
  md << "![Latency CDF per plan](latency_cdf.png)\n\n![Where GPU time goes](time_split.png)\n\n"
        "![Link utilisation](link_util.png)\n\n";
  md << "## Where the figures come from\n\n";
  md << "Every op is priced from the machine file: *measured* (a measured point of that shape), *interpolated* "
        "(between measured points), *extrapolated* (alpha-beta fit or scaling beyond them), *derived* (a roofline "
        "or ring estimate from measured peaks) or *nominal* (datasheet figures). The 'priced from' column gives "
        "each share of simulated time. " << kBandLegend + 2 << "\nAssumptions used where nothing was measured:\n\n```json\n"
     << p.value("assumptions", nlohmann::json::object()).dump(2) << "\n```\n";
  out.add("--report", (fs::path(dir) / "report.md").string(), md.str());
}

std::string write_report_dir(const SearchResult& r, const std::string& dir) {
  OutputSet out;
  stage_report_dir(r, dir, out);
  out.commit();
  return draw_report_plots(dir);
}

std::string draw_report_plots(const std::string& dir) {
  // Plots: scripts/plot_report.py (matplotlib). Missing python is not an error: say how to draw them.
  std::string script;
  try {
    script = find_data_file("scripts/plot_report.py");
  } catch (const std::exception&) {
    return "plots not drawn: scripts/plot_report.py not found (set PEERPLAN_HOME to the peerplan checkout)";
  }
  // The first python3 on PATH may be a virtualenv without matplotlib; the system one often has it.
  bool drawn = false;
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    std::string cmd = std::string(py) + " '" + script + "' '" + dir + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) {
      drawn = true;
      break;
    }
  }
  if (!drawn)
    return "plots not drawn (python3 with matplotlib needed); draw them later with: python3 " + script + " " + dir;
  return "";
}

}  // namespace peerplan
