// `peerplan plan --allreduce` (issue 17): each plan with a TP group and P2P on is also simulated
// under the requested all-reduce settings, and a peer-memory kernel makes TP2 decode faster on the
// shipped 2xH200 profile, where NCCL costs 18-19 us per small all-reduce.
#include <gtest/gtest.h>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/search/search.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;

TEST(AllReduceSearch, VariantsAreSimulatedAndTheEngineRuleBeatsNcclForTp2Decode) {
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  Topology topo(load_machine(resolve_machine_path("h200x2-nvlink")));
  Workload w = load_workload(resolve_workload_path("chat"));
  SearchOptions so;
  so.num_requests = 20;
  so.capacity_recommended = false;
  so.allreduce = {ArSetting::Nccl, ArSetting::AutoVllm};
  SearchResult r = search_plans(cfg, derive_figures(cfg), topo, w, so);
  const CandidateResult *nccl = nullptr, *vllm = nullptr;
  for (const auto& c : r.ranked) {
    if (c.plan.name == "tp2[0,1]") nccl = &c;
    if (c.plan.name == "tp2[0,1] ar:auto:vllm") vllm = &c;
    EXPECT_EQ(c.plan.name.find("p2p-off ar:"), std::string::npos) << "no all-reduce variant with P2P off";
    if (!c.plan.p2p) EXPECT_EQ(c.plan.allreduce, ArSetting::Nccl) << c.plan.name;
    if (c.plan.num_gpus() == 1) EXPECT_EQ(c.plan.name.find(" ar:"), std::string::npos) << "one GPU: no variant";
  }
  ASSERT_NE(nccl, nullptr);
  ASSERT_NE(vllm, nullptr);
  EXPECT_EQ(vllm->plan.allreduce, ArSetting::AutoVllm);
  EXPECT_LT(vllm->metrics.tpot.p50, nccl->metrics.tpot.p50) << "one-shot below 8 MiB instead of NCCL's ~18 us";
  EXPECT_TRUE(vllm->metrics.provenance.contains("peer_allreduce"));
}
