// The executor's rank bus over real MPI (2 ranks in CI, no GPU): what rank 0 posts is what every
// other rank receives, in order; NCCL ids reach a group's members; per-op times sum on rank 0.
#include <gtest/gtest.h>

#include <cstring>

#include "planner/core/error.hpp"
#include "profiler/common/rank_preflight.hpp"
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

TEST(ExecBus, EveryRankGetsEveryRanksHostUuidAndMemoryForThePreflight) {
  // validate --mpi: each rank describes its GPU (here made up: no CUDA in CI); MpiBus's gather
  // gives every rank the same list, so the plan-vs-GPUs check refuses or passes on all alike.
  const int64_t gib = int64_t(1) << 30;
  profiler::RankInfo me = describe_mpi_rank();
  me.device_count = me.local_size;
  me.uuid = "GPU-0000000" + std::to_string(me.rank);
  me.memory_bytes = (me.rank + 1) * 10 * gib;
  MpiBus bus(me);
  const auto& ranks = bus.layout().ranks;
  ASSERT_EQ(int(ranks.size()), bus.ranks());
  for (int r = 0; r < bus.ranks(); ++r) {
    EXPECT_EQ(ranks[size_t(r)].uuid, "GPU-0000000" + std::to_string(r));
    EXPECT_EQ(ranks[size_t(r)].memory_bytes, (r + 1) * 10 * gib) << "rank " << r << "'s memory reached rank " << me.rank;
    EXPECT_EQ(ranks[size_t(r)].host, mpi::allgather_strings(me.host)[size_t(r)]);
  }
  // A profile of exactly these GPUs, and a plan over all of them needing 9 GiB per GPU: passes.
  Machine prof;
  prof.name = "these";
  prof.origin = "measured";
  prof.measurements = Measurements{};
  Plan plan;
  plan.name = "tp";
  PlanStage st;
  MemoryReport mem;
  for (int r = 0; r < bus.ranks(); ++r) {
    GpuSpec g;
    g.id = r;
    g.uuid = ranks[size_t(r)].uuid;
    prof.gpus.push_back(g);
    st.gpus.push_back(r);
    mem.gpus.push_back(GpuMemory{r, 100 * gib, 9 * gib, 0, 0, 0});
  }
  st.tp = int(st.gpus.size());
  plan.stages = {st};
  EXPECT_TRUE(profiler::preflight_ranks(plan, "p.json", prof, "m.json", ranks, mem).empty());
  // 11 GiB per GPU does not fit rank 0's 10 GiB: every rank refuses, naming rank 0.
  for (auto& g : mem.gpus) g.weights = 11 * gib;
  try {
    profiler::preflight_ranks(plan, "p.json", prof, "m.json", ranks, mem);
    ADD_FAILURE() << "rank " << me.rank << " accepted a plan rank 0's GPU cannot hold";
  } catch (const InputError& e) {
    EXPECT_NE(e.expected().find("rank 0 (host"), std::string::npos) << e.expected();
  }
  bus.barrier();
}
