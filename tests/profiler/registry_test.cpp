#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "planner/core/error.hpp"
#include "profiler/common/registry.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

static std::vector<std::string> names(const std::vector<const MeasurementInfo*>& v) {
  std::vector<std::string> out;
  for (auto* m : v) out.push_back(m->name);
  return out;
}

TEST(Registry, NamesAreUniqueAndDescribed) {
  std::set<std::string> seen;
  for (const auto& m : measurement_table()) {
    EXPECT_TRUE(seen.insert(m.name).second) << "duplicate name " << m.name << ": --only would be ambiguous";
    EXPECT_GT(std::string(m.description).size(), 10u) << m.name << " needs a description for --list";
    EXPECT_GT(m.est_seconds, 0) << m.name << " needs a time estimate for the ETA";
  }
  // The measurements are all present.
  for (const char* n : {"p2p_ce", "p2p_ce_bidir", "p2p_sm", "nop2p_runtime", "host_staged", "latency_ce", "latency_sm",
                        "h2d_d2h", "hbm", "nccl", "nccl_nop2p", "gemm", "attention", "launch_overhead", "grouped_gemm",
                        "elementwise"})
    EXPECT_NE(find_measurement(n), nullptr) << n;
}

TEST(Registry, NoOptionsSelectsEverythingInTableOrder) {
  auto all = select_measurements({}, {});
  ASSERT_EQ(all.size(), measurement_table().size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_STREQ(all[i]->name, measurement_table()[i].name);
}

TEST(Registry, OnlyAcceptsNamesGroupsAndCommaLists) {
  EXPECT_EQ(names(select_measurements({"hbm"}, {})), std::vector<std::string>{"hbm"});
  // "latency" is a group: both latency measurements, in table order.
  EXPECT_EQ(names(select_measurements({"latency"}, {})), (std::vector<std::string>{"latency_ce", "latency_sm"}));
  // Comma list with spaces, order follows the table not the argument.
  EXPECT_EQ(names(select_measurements({"p2p_ce_bidir, p2p_ce"}, {})), (std::vector<std::string>{"p2p_ce", "p2p_ce_bidir"}));
}

TEST(Registry, SkipRemovesAfterOnly) {
  auto v = names(select_measurements({"collective"}, {"nccl_nop2p"}));
  EXPECT_EQ(v, (std::vector<std::string>{"nccl", "peer_allreduce"}));
  auto all_but_compute = names(select_measurements({}, {"compute"}));
  for (const auto& n : all_but_compute) EXPECT_NE(find_measurement(n)->group, std::string("compute")) << n;
}

TEST(Registry, UnknownNameIsAnInputErrorListingValidNames) {
  try {
    select_measurements({"p2p_cee"}, {});
    FAIL() << "an unknown name must be rejected, not ignored";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--only");
    std::string msg = e.what();
    EXPECT_NE(msg.find("p2p_cee"), std::string::npos) << msg;
    EXPECT_NE(msg.find("p2p_ce_bidir"), std::string::npos) << "the valid names should be listed: " << msg;
  }
  EXPECT_THROW(select_measurements({}, {"nope"}), InputError);
}

TEST(Registry, SelectingNothingIsAnError) {
  // --only hbm --skip hbm leaves nothing: say so instead of writing an empty profile.
  EXPECT_THROW(select_measurements({"hbm"}, {"hbm"}), InputError);
}

TEST(Registry, ListShowsEveryMeasurement) {
  std::string s = format_measurement_list();
  for (const auto& m : measurement_table()) EXPECT_NE(s.find(m.name), std::string::npos) << m.name;
}

// --- one table, two run modes (single process, --mpi) ---

TEST(Registry, RowsKnowTheirIndexAndMpiEntry) {
  // The entries' tables (measure/table.cpp, mpi/profile_mpi.cpp) are indexed by the row number:
  // a row whose index disagrees with its position would run another measurement's code.
  const auto& t = measurement_table();
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].index, i) << t[i].name;
  // What --mpi runs today: per-GPU figures on each rank, GEMM/attention on rank 0, the peer paths
  // and NCCL through their own MPI code; SM peer access, latencies, runtime staging and NCCL
  // without P2P are single-process only.
  EXPECT_EQ(find_measurement("hbm")->mpi, MpiRun::EachRank);
  EXPECT_EQ(find_measurement("gemm")->mpi, MpiRun::RankZero);
  EXPECT_EQ(find_measurement("nccl")->mpi, MpiRun::Own);
  EXPECT_EQ(find_measurement("p2p_sm")->mpi, MpiRun::None);
  EXPECT_TRUE(find_measurement("attention")->uses_models) << "attention times the models' shapes";
  EXPECT_TRUE(find_measurement("elementwise")->uses_models) << "elementwise times the models' kernels";
  EXPECT_EQ(find_measurement("elementwise")->mpi, MpiRun::RankZero);
  EXPECT_FALSE(find_measurement("hbm")->uses_models) << "hbm needs no --model";
}

TEST(Registry, MpiSelectsOnlyMeasurementsWithAnMpiEntry) {
  // No options under --mpi: every measurement that has an MPI entry, in table order; none without.
  auto v = names(select_measurements({}, {}, RunMode::Mpi));
  EXPECT_EQ(v, (std::vector<std::string>{"launch_overhead", "hbm", "h2d_d2h", "p2p_ce", "p2p_ce_bidir", "host_staged",
                                         "nccl", "peer_allreduce", "gemm", "attention", "grouped_gemm",
                                         "elementwise"}));
  // A group selects its members that run under --mpi: transfer without p2p_sm and nop2p_runtime.
  EXPECT_EQ(names(select_measurements({"transfer"}, {}, RunMode::Mpi)),
            (std::vector<std::string>{"p2p_ce", "p2p_ce_bidir", "host_staged"}));
  // The single-process mode is unchanged by the MPI column: p2p_sm is in its transfer group.
  auto sp = names(select_measurements({"transfer"}, {}));
  EXPECT_NE(std::find(sp.begin(), sp.end(), "p2p_sm"), sp.end());
}

TEST(Registry, MpiRefusesASingleProcessMeasurementListingTheValidOnes) {
  // Asking --mpi for p2p_sm used to be recorded as "not applicable" after the run; it is an
  // input error now, naming the measurement, how to get it, and what does run with --mpi.
  try {
    select_measurements({"p2p_sm"}, {}, RunMode::Mpi);
    FAIL() << "--mpi --only p2p_sm must be refused: p2p_sm has no MPI entry";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--only");
    std::string msg = e.what();
    EXPECT_NE(msg.find("'p2p_sm' runs only in a single process"), std::string::npos) << msg;
    EXPECT_NE(msg.find("without --mpi"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host_staged"), std::string::npos) << "valid --mpi names listed: " << msg;
    EXPECT_EQ(msg.find("latency_sm,"), std::string::npos) << "a name --mpi cannot run is not offered: " << msg;
  }
  // A group with no member that runs under --mpi is refused too (latency: both single-process).
  EXPECT_THROW(select_measurements({"latency"}, {}, RunMode::Mpi), InputError);
  // --skip follows the same rule: an unsupported name is refused, not silently accepted.
  EXPECT_THROW(select_measurements({}, {"nccl_nop2p"}, RunMode::Mpi), InputError);
  EXPECT_THROW(select_measurements({"p2p_cee"}, {}, RunMode::Mpi), InputError);
}

TEST(Registry, ListShowsHowEachMeasurementRunsWithMpi) {
  std::string s = format_measurement_list();
  EXPECT_NE(s.find("WITH --MPI"), std::string::npos) << s;
  // Each row's line carries its MPI column ("-" for single-process only).
  auto line_of = [&](const std::string& name) {
    size_t at = s.find("\n" + name + " ");
    return at == std::string::npos ? std::string() : s.substr(at + 1, s.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line_of("hbm").find("each rank"), std::string::npos) << line_of("hbm");
  EXPECT_NE(line_of("gemm").find("rank 0"), std::string::npos) << line_of("gemm");
  EXPECT_NE(line_of("latency_ce").find(" - "), std::string::npos) << line_of("latency_ce");
}
