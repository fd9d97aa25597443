// Run as `mpirun --oversubscribe -np 2 test_mpi` (ctest does): the CPU side of the MPI path with
// real MPI: collectives of the wrapper, rank bookkeeping from real processes, and the merge of
// per-rank results gathered over MPI into one profile.
#include <gtest/gtest.h>

#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/common/profile_merge.hpp"
#include "profiler/common/rank_layout.hpp"
#include "profiler/mpi/comm.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

TEST(MpiComm, GatherBroadcastAndReduceAcrossRanks) {
  int me = mpi::world_rank(), n = mpi::world_size();
  ASSERT_GE(n, 1);
  // Strings of different lengths (rank r sends r+1 copies of its tag) arrive in rank order.
  std::string mine(size_t(me + 1), char('a' + me % 26));
  auto all = mpi::gather_strings(mine, 0);
  if (me == 0) {
    ASSERT_EQ(all.size(), size_t(n));
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[size_t(r)], std::string(size_t(r + 1), char('a' + r % 26)));
  } else {
    EXPECT_TRUE(all.empty()) << "only the root receives";
  }
  auto every = mpi::allgather_strings(mine);
  ASSERT_EQ(every.size(), size_t(n));
  EXPECT_EQ(every[size_t(n - 1)], std::string(size_t(n), char('a' + (n - 1) % 26)));
  EXPECT_EQ(mpi::bcast_string(me == 0 ? "from-root" : "ignored", 0), "from-root");
  EXPECT_DOUBLE_EQ(mpi::allreduce_max(double(me)), double(n - 1));
  EXPECT_DOUBLE_EQ(mpi::allreduce_sum(1.0), double(n));
  EXPECT_EQ(mpi::any(me == n - 1), true) << "the last rank's flag reaches everyone";
  EXPECT_EQ(mpi::any(false), false);
  mpi::barrier();
}

TEST(MpiComm, PointToPointChecksTheSize) {
  int me = mpi::world_rank(), n = mpi::world_size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks (ctest runs this under mpirun -np 2)";
  if (me == 0) {
    int v = 42;
    mpi::send_bytes(&v, sizeof v, 1, 7);
    mpi::send_bytes(&v, sizeof v, 1, 8);
  } else if (me == 1) {
    int v = 0;
    mpi::recv_bytes(&v, sizeof v, 0, 7);
    EXPECT_EQ(v, 42);
    char too_big[8];
    EXPECT_THROW(mpi::recv_bytes(too_big, sizeof too_big, 0, 8), RuntimeError) << "4 bytes sent, 8 expected";
  }
  mpi::barrier();
}

TEST(MpiLayout, RanksDescribeThemselvesAndRankZeroBuildsTheLayout) {
  int me = mpi::world_rank(), n = mpi::world_size();
  RankInfo mine{me, mpi::processor_name(), mpi::local_rank(), mpi::local_size(), mpi::local_rank(), mpi::local_size(), ""};
  auto all = mpi::allgather_strings(rank_info_to_json(mine).dump());
  std::vector<RankInfo> infos;
  for (int r = 0; r < n; ++r) infos.push_back(rank_info_from_json(all[size_t(r)], "rank " + std::to_string(r)));
  RankLayout L = make_rank_layout(infos);
  EXPECT_EQ(L.size(), n);
  // Local ranks on each host are 0..k-1 and distinct, so devices never collide.
  for (int h = 0; h < int(L.hosts.size()); ++h) {
    auto on = L.ranks_on(h);
    for (size_t i = 0; i < on.size(); ++i) EXPECT_EQ(L.ranks[size_t(on[i])].local_rank, int(i));
  }
}

TEST(MpiMerge, PerRankResultsGatheredIntoOneProfile) {
  int me = mpi::world_rank(), n = mpi::world_size();
  if (n > 2) GTEST_SKIP() << "the stand-in host discovery has 2 GPUs";
  // Each rank "measures" its GPU (local ordinal 0: every rank is its own host here) and renames it
  // to its global id before sending, as the profiler does.
  Measurements ms;
  TransferCurve c{-1, 0, "h2d", "", {}};
  c.points.push_back({int64_t(1) << 20, compute_stats({0.01 * (me + 1)})});
  ms.transfers.push_back(c);
  ms.hbm_gbps = {4000.0 + me};
  remap_gpu_ids(ms, {{0, me}});  // rank 1: hbm_gbps {0, 4001}, which the plain schema refuses
  RankInfo mine{me, "host" + std::to_string(me), 0, 1, 0, 2, ""};
  auto infos = mpi::gather_strings(rank_info_to_json(mine).dump(), 0);
  auto results = mpi::gather_strings(rank_result_to_json(ms), 0);
  if (me != 0) return;
  MergeInput in;
  std::vector<RankInfo> ri;
  for (int r = 0; r < n; ++r) ri.push_back(rank_info_from_json(infos[size_t(r)], "rank"));
  in.layout = make_rank_layout(ri);
  for (int r = 0; r < n; ++r) {
    Machine h = load_machine(find_data_file("models/hardware/h200x2-nvlink.json"));
    h.host = "host" + std::to_string(r);
    h.measurements.reset();
    in.host_machines.push_back(h);
    in.rank_results.push_back(rank_result_from_json(results[size_t(r)], "rank result"));
  }
  Machine m = merge_mpi_profile(in);
  EXPECT_EQ(m.gpu_count(), n);
  ASSERT_EQ(m.measurements->transfers.size(), size_t(n));
  for (int r = 0; r < n; ++r) {
    const auto* t = m.measurements->find_transfer(-1, r, "h2d");
    ASSERT_NE(t, nullptr) << "rank " << r << "'s curve under its global id";
    EXPECT_DOUBLE_EQ(t->points[0].time.median, 0.01 * (r + 1));
  }
  EXPECT_EQ(m.meta["mpi"]["hosts"].size(), size_t(n));
  ASSERT_EQ(m.measurements->hbm_gbps.size(), size_t(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(m.measurements->hbm_gbps[size_t(r)], 4000.0 + r) << "every rank's HBM figure arrives";
}
