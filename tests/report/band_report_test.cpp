// The error band on every reported prediction (issue 23 item 3): the text table, report.md and the
// search JSON show the band prediction_band (planner/cost/prediction_band.hpp) gives each plan.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "planner/core/files.hpp"
#include "planner/cost/prediction_band.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/report/search_report.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;

namespace {
SearchResult run(const char* model, const char* machine, int64_t requests) {
  ModelConfig cfg = load_model_config(resolve_model_path(model));
  static std::vector<std::unique_ptr<Topology>> keep;  // results refer to their topology
  keep.push_back(std::make_unique<Topology>(load_machine(resolve_machine_path(machine))));
  Workload w = load_workload(resolve_workload_path("chat"));
  SearchOptions so;
  so.num_requests = requests;
  return search_plans(cfg, derive_figures(cfg), *keep.back(), w, so);
}
// Llama-3.1-8B on the shipped measured 2xH200 profile: its own shapes measured, ~11-16 % derived.
const SearchResult& measured() {
  static SearchResult r = run("llama-3.1-8b", "h200x2-nvlink", 20);
  return r;
}
// A hypothetical machine: every figure nominal.
const SearchResult& nominal() {
  static SearchResult r = run("llama-3.1-8b", "pcie-gen5x8-2socket", 20);
  return r;
}
std::string first_row(const std::string& table) {
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("  1  ", 0) == 0) return line;
  return "";
}
}  // namespace

TEST(BandReport, MeasuredPlansShowTheValidatedBandOnTtftAndTpot) {
  const SearchResult& r = measured();
  ASSERT_FALSE(r.ranked.empty());
  const std::string t = ranked_table(r);
  const std::string row = first_row(t);
  EXPECT_NE(row.find(" ±10% "), std::string::npos) << row;  // TTFT
  EXPECT_NE(row.find(" ±5% "), std::string::npos) << row;   // TPOT
  EXPECT_NE(t.find("±: error band"), std::string::npos) << t;
  nlohmann::json j = search_to_json(r);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const nlohmann::json& b = j["ranked"][i]["band"];
    const PredictionBand want = prediction_band(r.ranked[i].metrics.provenance);
    ASSERT_TRUE(b.is_object()) << i;
    EXPECT_EQ(b["lower_bound_only"].get<bool>(), want.lower_bound_only);
    EXPECT_DOUBLE_EQ(b["relative"].get<double>(), want.step_relative);
    EXPECT_FALSE(b["basis"].get<std::string>().empty());
  }
  EXPECT_DOUBLE_EQ(j["ranked"][0]["band"]["relative"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(j["ranked"][0]["band"]["ttft_relative"].get<double>(), 0.10);
}

TEST(BandReport, NominalPlansAreLowerBoundsEverywhere) {
  const SearchResult& r = nominal();
  ASSERT_FALSE(r.ranked.empty());
  const std::string row = first_row(ranked_table(r));
  EXPECT_NE(row.find(">="), std::string::npos) << row;
  EXPECT_EQ(row.find("±"), std::string::npos) << row;
  nlohmann::json b = search_to_json(r)["ranked"][0]["band"];
  EXPECT_TRUE(b["lower_bound_only"].get<bool>());
  EXPECT_TRUE(b["relative"].is_null());
  EXPECT_NE(b["basis"].get<std::string>().find("lower bound only"), std::string::npos);
}

TEST(BandReport, MarkdownRankingCarriesTheBand) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("peerplan-band-" + std::to_string(::getpid()));
  OutputSet out;
  stage_report_dir(measured(), dir.string(), out);
  out.commit();
  std::ifstream in(dir / "report.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string md = ss.str();
  fs::remove_all(dir);
  EXPECT_NE(md.find(" ±5% |"), std::string::npos) << md;
  EXPECT_NE(md.find(" ±10% |"), std::string::npos) << md;
  EXPECT_NE(md.find("lower bound only"), std::string::npos) << "the legend says what >= means";
}

TEST(BandReport, UnmeasuredNoteGivesTheBandOfItsFigures) {
  nlohmann::json prov = {{"measured", {{"gemm_shapes", 308}}},
                         {"cost_sources", {{"measured", {{"time_fraction", 0.6}}}, {"fitted", {{"time_fraction", 0.4}}}}},
                         {"fitted_fallback", {{"band_gemm", 0.05}, {"band_attention", 0.08}}}};
  // 5 % + 0.4 x 8 % = 8.2 % on TPOT; 10 % + 3.2 % on TTFT.
  std::string note = unmeasured_note("m", prov);
  EXPECT_NE(note.find("its figures ±8 % TPOT, ±13 % TTFT"), std::string::npos) << note;
  prov["cost_sources"]["derived"] = {{"time_fraction", 0.5}};
  note = unmeasured_note("m", prov);
  EXPECT_NE(note.find("its figures are a lower bound"), std::string::npos) << note;
}
