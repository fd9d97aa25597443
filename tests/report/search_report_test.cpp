#include "planner/report/search_report.hpp"

#include <sstream>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;

namespace {
const SearchResult& result() {
  static SearchResult r = [] {
    ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
    Machine m = load_machine(resolve_machine_path("pcie-gen5x8-2socket"));
    static Topology topo(m);
    Workload w = load_workload(resolve_workload_path("chat"));
    SearchOptions so;
    so.num_requests = 40;
    return search_plans(cfg, derive_figures(cfg), topo, w, so);
  }();
  return r;
}
}  // namespace

TEST(SearchReport, TableMarksTheRecommendationAndSaysWhereCostsCameFrom) {
  std::string t = ranked_table(result());
  EXPECT_NE(t.find(" *\n"), std::string::npos) << t;
  EXPECT_NE(t.find("nominal"), std::string::npos) << "a hypothetical machine is priced from nominal specs";
  EXPECT_NE(t.find("Recommended: "), std::string::npos);
}

TEST(SearchReport, CsvHasOneRowPerCandidate) {
  std::string csv = search_to_csv(result());
  std::istringstream in(csv);
  std::string line;
  size_t rows = 0;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("rank,plan,", 0), 0u);
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, result().ranked.size() + result().rejected.size());
}

TEST(SearchReport, JsonCarriesRankingVerdictAndProvenance) {
  nlohmann::json j = search_to_json(result());
  EXPECT_EQ(j["format"], "peerplan.search");
  EXPECT_EQ(j["ranked"].size(), result().ranked.size());
  EXPECT_EQ(j["recommended"], result().ranked[size_t(result().recommended)].plan.name);
  EXPECT_EQ(j["provenance"]["origin"], "nominal");
  EXPECT_TRUE(j["provenance"].contains("assumptions"));
}

TEST(SearchReport, JsonParetoFrontOfTokensPerGpuAndPerUser) {
  const SearchResult& r = result();
  nlohmann::json j = search_to_json(r);
  ASSERT_TRUE(j["pareto"].is_array());
  ASSERT_FALSE(j["pareto"].empty());
  // Each entry: figures recomputed here from the ranked plan (output tok/s / GPUs, 1 / TPOT p50).
  std::vector<std::pair<double, double>> front;
  for (const auto& e : j["pareto"]) {
    const size_t i = e["rank"].get<size_t>() - 1;
    ASSERT_LT(i, r.ranked.size());
    const CandidateResult& c = r.ranked[i];
    EXPECT_EQ(e["plan"], c.plan.name);
    EXPECT_EQ(e["gpus"], c.plan.num_gpus());
    EXPECT_DOUBLE_EQ(e["tokens_per_s_per_gpu"].get<double>(), c.metrics.output_tokens_per_s / c.plan.num_gpus());
    EXPECT_DOUBLE_EQ(e["tokens_per_s_per_user"].get<double>(), 1.0 / c.metrics.tpot.p50);
    front.push_back({e["tokens_per_s_per_gpu"].get<double>(), e["tokens_per_s_per_user"].get<double>()});
  }
  // No ranked plan dominates a front entry; every plan off the front is dominated by one on it.
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const double g = r.ranked[i].metrics.output_tokens_per_s / r.ranked[i].plan.num_gpus();
    const double u = 1.0 / r.ranked[i].metrics.tpot.p50;
    bool on = false, dominated = false;
    for (const auto& e : j["pareto"]) on = on || e["rank"].get<size_t>() == i + 1;
    for (const auto& [fg, fu] : front) {
      EXPECT_FALSE(g >= fg && u >= fu && (g > fg || u > fu)) << r.ranked[i].plan.name << " dominates a front plan";
      dominated = dominated || (fg >= g && fu >= u && (fg > g || fu > u));
    }
    EXPECT_TRUE(on || dominated) << r.ranked[i].plan.name;
  }
  // The CSV marks the same plans.
  std::istringstream in(search_to_csv(r));
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find(",why_not,pareto"), std::string::npos);
  size_t marked = 0;
  while (std::getline(in, line)) marked += line.size() >= 5 && line.compare(line.size() - 5, 5, ",true") == 0;
  EXPECT_EQ(marked, j["pareto"].size());
  EXPECT_NE(ranked_table(r).find("Pareto front ("), std::string::npos);
}

TEST(SearchReport, CapacityColumnAndJsonFields) {
  const SearchResult& r = result();
  ASSERT_GE(r.recommended, 0);
  const Capacity& cap = r.ranked[size_t(r.recommended)].capacity;
  ASSERT_TRUE(cap.searched);
  std::string t = ranked_table(r);
  EXPECT_NE(t.find("capacity"), std::string::npos) << t;
  // The recommended row carries its capacity, the others '-' (only the recommended is searched).
  std::istringstream in(t);
  std::string line;
  bool rec_row = false;
  while (std::getline(in, line))
    if (line.size() > 2 && line.compare(line.size() - 2, 2, " *") == 0) {
      rec_row = true;
      std::string want = (cap.miss_rps > 0 ? "" : ">=") + fmt::format("{:.2f}", cap.rate_rps);
      EXPECT_NE(line.find(" " + want + " "), std::string::npos) << line;
    }
  EXPECT_TRUE(rec_row) << t;
  nlohmann::json j = search_to_json(r);
  EXPECT_EQ(j["objective"], "gpus");
  EXPECT_DOUBLE_EQ(j["slo_threshold"].get<double>(), 0.99);
  EXPECT_DOUBLE_EQ(j["capacity"]["rate_rps"].get<double>(), cap.rate_rps);
  EXPECT_DOUBLE_EQ(j["capacity"]["output_tokens_per_s"].get<double>(), cap.output_tokens_per_s);
  EXPECT_EQ(j["capacity"]["tolerance"], 0.05);
  EXPECT_EQ(j["capacity"]["probes"], cap.probes);
  const auto& rec = j["ranked"][size_t(r.recommended)];
  EXPECT_DOUBLE_EQ(rec["capacity"]["rate_rps"].get<double>(), cap.rate_rps);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    EXPECT_EQ(j["ranked"][i]["meets_slos"], r.ranked[i].meets_slos);
    if (int(i) != r.recommended) EXPECT_TRUE(j["ranked"][i]["capacity"].is_null());
  }
  ASSERT_EQ(j["gpu_steps"].size(), r.gpu_steps.size());
  for (const auto& g : j["gpu_steps"]) {
    EXPECT_EQ(j["ranked"][g["rank"].get<size_t>() - 1]["gpus"], g["gpus"]);
    EXPECT_TRUE(g.contains("tpot_p50_s") && g.contains("e2e_p99_s") && g.contains("goodput_rps"));
  }
}
