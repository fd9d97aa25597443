// `peerplan validate --compare PRED MEAS` end to end on the built binary (no GPU needed).
#include <gtest/gtest.h>

#include "run_command.hpp"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/sim/metrics.hpp"

using namespace peerplan;

namespace {


Metrics one_request(double ttft, double finish) {
  RequestTiming r{1, 0.0, ttft, finish, 100, 11};
  Metrics m = compute_metrics({r}, Slo{});
  m.plan = "single[0]";
  return m;
}

}  // namespace

TEST(ValidateCli, CompareTwoMetricsFilesPrintsErrorsAndWritesTheReport) {
  // One request, 10 output tokens after the first: TPOT = (finish - first) / 10.
  // predicted: TTFT 20 ms, TPOT 5 ms; measured: TTFT 25 ms, TPOT 5 ms -> TTFT -20 %, TPOT 0 %.
  const auto dir = std::filesystem::temp_directory_path() / "peerplan_validate_cli";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "pred.json") << metrics_to_json(one_request(0.020, 0.070)).dump();
  std::ofstream(dir / "meas.json") << metrics_to_json(one_request(0.025, 0.075)).dump();
  int rc = -1;
  std::string out = run(std::string(PEERPLAN_BINARY) + " validate --compare " + (dir / "pred.json").string() + " " +
                            (dir / "meas.json").string() + " --out " + (dir / "report").string(),
                        &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("-20.0%"), std::string::npos) << out;  // TTFT p50
  EXPECT_NE(out.find("+0.0%"), std::string::npos) << out;   // TPOT p50
  EXPECT_TRUE(std::filesystem::exists(dir / "report" / "validation.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "report" / "validation.md"));
}

TEST(ValidateCli, MissingMetricsFileIsAnInputErrorExit2) {
  int rc = -1;
  std::string out = run(std::string(PEERPLAN_BINARY) + " validate --compare /nonexistent/a.json /nonexistent/b.json", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("/nonexistent/a.json"), std::string::npos) << out;
}
