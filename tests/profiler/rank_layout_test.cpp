#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "profiler/common/rank_layout.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {
RankInfo ri(int rank, const std::string& host, int local, int device, int count = 8, std::string uuid = "") {
  return RankInfo{rank, host, local, 1, device, count, std::move(uuid)};
}
}  // namespace

TEST(RankLayout, OrdersByRankAndGroupsHostsByFirstRank) {
  // Gathered out of order: the layout is indexed by rank; hosts in order of their first rank.
  auto L = make_rank_layout({ri(2, "b", 0, 0), ri(0, "a", 0, 0), ri(3, "b", 1, 1), ri(1, "a", 1, 1)});
  ASSERT_EQ(L.size(), 4);
  EXPECT_EQ(L.hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(L.host_of, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(L.same_host(0, 1));
  EXPECT_FALSE(L.same_host(1, 2));
  EXPECT_EQ(L.ranks_on(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(L.leader_of(1), 2);
}

TEST(RankLayout, RefusesTwoRanksOnOneGpu) {
  // The common launcher mistake: every rank binds GPU 0.
  try {
    make_rank_layout({ri(0, "a", 0, 0), ri(1, "a", 1, 0)});
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("two ranks on a use GPU 0"), std::string::npos) << e.what();
  }
  // Same GPU seen through per-rank CUDA_VISIBLE_DEVICES: caught by UUID.
  EXPECT_THROW(make_rank_layout({ri(0, "a", 0, 0, 1, "GPU-x"), ri(1, "a", 1, 1, 2, "GPU-x")}), RuntimeError);
}

TEST(RankLayout, RefusesMoreRanksThanGpusAndMissingRanks) {
  try {
    make_rank_layout({ri(0, "a", 0, 0, 2), ri(1, "a", 1, 1, 2), ri(2, "a", 2, 2, 2)});
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("has 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one rank per GPU"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_rank_layout({ri(0, "a", 0, 0), ri(0, "a", 1, 1)}), RuntimeError) << "rank 0 twice, rank 1 missing";
  EXPECT_THROW(make_rank_layout({ri(0, "a", 0, 0, 0)}), RuntimeError) << "a rank that sees no GPU";
  EXPECT_THROW(make_rank_layout({}), RuntimeError);
}

TEST(RankLayout, SplitHostsMakesEveryRankItsOwnHost) {
  auto L = make_rank_layout({ri(0, "a", 0, 0), ri(1, "a", 1, 1)}, true);
  EXPECT_EQ(L.hosts.size(), 2u);
  EXPECT_FALSE(L.same_host(0, 1));
}

TEST(RankLayout, JsonRoundTripAndFieldErrors) {
  RankInfo r = ri(3, "node7", 1, 1, 4, "GPU-abc");
  r.memory_bytes = int64_t(141) << 30;  // validate --mpi checks plans against it
  RankInfo back = rank_info_from_json(rank_info_to_json(r).dump(), "rank 3");
  EXPECT_EQ(back.memory_bytes, int64_t(141) << 30);
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.host, "node7");
  EXPECT_EQ(back.device, 1);
  EXPECT_EQ(back.device_count, 4);
  EXPECT_EQ(back.uuid, "GPU-abc");
  // Descriptions written before memory_bytes existed (meta.mpi of older profiles) still read.
  EXPECT_EQ(rank_info_from_json(R"({"rank":0,"host":"x","local_rank":0,"local_size":1,"device":0,"device_count":1})", "r")
                .memory_bytes,
            0);
  try {
    rank_info_from_json(R"({"rank":-1,"host":"x","local_rank":0,"local_size":1,"device":0,"device_count":1})", "rank 9");
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }
}

TEST(PairPlan, OneHostMeasuresEveryOrderedPair) {
  auto L = make_rank_layout({ri(0, "a", 0, 0), ri(1, "a", 1, 1), ri(2, "a", 2, 2)});
  auto p = plan_pairs(L, false);
  EXPECT_EQ(p.intra.size(), 6u) << "3 GPUs: 3 x 2 ordered pairs, all on the host";
  EXPECT_TRUE(p.inter.empty());
  EXPECT_TRUE(p.inferred.empty());
}

TEST(PairPlan, CrossHostPairsSampledByHostLeaders) {
  // 2 hosts x 4 GPUs: 2 x 12 intra pairs; 32 cross pairs of which 2 (leader->leader each way) measured.
  std::vector<RankInfo> v;
  for (int r = 0; r < 8; ++r) v.push_back(ri(r, r < 4 ? "a" : "b", r % 4, r % 4));
  auto L = make_rank_layout(v);
  auto p = plan_pairs(L, false);
  EXPECT_EQ(p.intra.size(), 24u);
  ASSERT_EQ(p.inter.size(), 2u);
  EXPECT_EQ(p.inter[0], (std::pair<int, int>{0, 4}));
  EXPECT_EQ(p.inter[1], (std::pair<int, int>{4, 0}));
  EXPECT_EQ(p.inferred.size(), 30u);
  for (const auto& [pair, from] : p.inferred) {
    EXPECT_FALSE(L.same_host(pair.first, pair.second));
    EXPECT_EQ(L.host_of[size_t(pair.first)], L.host_of[size_t(from.first)]) << "inferred from the same host pair";
  }
  EXPECT_EQ(plan_pairs(L, true).inter.size(), 32u) << "--all-pairs measures every cross-host pair";
}

TEST(RankLayout, SmokeTestModeLetsRanksShareAGpu) {
  // PEERPLAN_MPI_SHARE_GPU=1 on a one-GPU machine: two ranks on GPU 0 are accepted and marked.
  auto L = make_rank_layout({ri(0, "a", 0, 0, 1), ri(1, "a", 1, 0, 1)}, false, true);
  EXPECT_TRUE(L.shared_gpus);
  EXPECT_EQ(plan_pairs(L, false).intra.size(), 2u);
  EXPECT_THROW(make_rank_layout({ri(0, "a", 0, 0, 1), ri(1, "a", 1, 0, 1)}), RuntimeError) << "refused without it";
}
