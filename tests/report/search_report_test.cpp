#include "planner/report/search_report.hpp"

#include <sstream>

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
