// The executor's rank bus over real MPI (2 ranks in CI, no GPU): what rank 0 posts is what every
// other rank receives, in order; NCCL ids reach a group's members; per-op times sum on rank 0.
#include <gtest/gtest.h>

#include <cstring>

#include "planner/core/error.hpp"
#include "profiler/exec/mpi_bus.hpp"
#include "profiler/mpi/comm.hpp"

using namespace peerplan;
using namespace peerplan::exec;

namespace {
// A layout that passes the one-rank-per-GPU check: each rank claims its local rank's GPU on a
// host with enough GPUs (no CUDA here).
MpiBus make_bus() {
  profiler::RankInfo me = describe_mpi_rank();
  me.device_count = me.local_size;
  return MpiBus(me);
}
}  // namespace

TEST(ExecBus, IterationsArriveInRankZerosOrder) {
  MpiBus bus = make_bus();
  ASSERT_EQ(bus.ranks(), mpi::world_size());
  EXPECT_EQ(bus.rank(), mpi::world_rank());
  EXPECT_EQ(bus.device(), mpi::local_rank()) << "CUDA ordinal = local rank";
  std::vector<ExecMessage> sent;
  for (int i = 0; i < 5; ++i) {
    ExecMessage m{ExecCommand::Launch, i % 2, 0, 0, {}};
    for (int s = 0; s <= i; ++s) m.seqs.push_back(SeqRun{s, s == 0 ? 16 : 1, 16 + i, s == 0});
    sent.push_back(m);
  }
  sent.push_back(ExecMessage{ExecCommand::Stop, 0, 0, 0, {}});
  if (bus.rank() == 0) {
    for (const auto& m : sent) bus.post(m);
  } else {
    for (const auto& m : sent) EXPECT_EQ(bus.receive(), m);
  }
  // Only rank 0 posts, and it receives nothing (a mismatched broadcast would hang): refused
  // before any MPI call.
  if (bus.rank() == 0) EXPECT_THROW(bus.receive(), RuntimeError);
  else EXPECT_THROW(bus.post(sent[0]), RuntimeError);
  bus.barrier();
}

TEST(ExecBus, NcclIdReachesEveryMemberAndTimesSumOnRootAndMinIsShared) {
  MpiBus bus = make_bus();
  const int n = bus.ranks(), me = bus.rank();
  // The whole world as one group: its first member's 128 bytes (NCCL's id size) reach the others.
  std::vector<int> group;
  for (int r = 0; r < n; ++r) group.push_back(r);
  char id[128];
  std::memset(id, me == 0 ? 0x5a : 0, sizeof id);
  bus.share_id(id, sizeof id, group);
  for (char c : id) ASSERT_EQ(c, char(0x5a));
  // Each rank "timed" only the op whose first GPU it owns: op r took r+1 ms.
  std::vector<double> mine(size_t(n), 0.0);
  mine[size_t(me)] = (me + 1) * 1e-3;
  const std::vector<double> sum = bus.sum_on_root(mine);
  if (me == 0) {
    ASSERT_EQ(sum.size(), size_t(n));
    for (int r = 0; r < n; ++r) EXPECT_DOUBLE_EQ(sum[size_t(r)], (r + 1) * 1e-3);
  } else {
    EXPECT_TRUE(sum.empty());
  }
  // KV slots: the smallest GPU decides for everyone.
  EXPECT_EQ(bus.min_over_ranks(100 - me), 100 - (n - 1));
  bus.barrier();
}
