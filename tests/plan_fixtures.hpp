#pragma once
// Plans that tests build by hand, in one place: a tensor-parallel stage over some GPUs, and a
// pipeline of such stages. Embeddings go on the first stage and the LM head on the last, as the
// shipped strategies place them. And the decode step many pricing tests take.
#include <string>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/plan/plan.hpp"

namespace peerplan::test_plans {

// Stages over `groups` (TP = group size), layers [0, layers) split evenly, the last stage taking
// the remainder; `boundary` is every stage boundary's mode; `name` defaults to "pipeline".
inline Plan tp_pp(const std::vector<std::vector<int>>& groups, int layers, const std::string& boundary = "peer",
                  int micro_batches = 1, const std::string& name = "pipeline") {
  Plan p;
  p.name = name;
  const int n = int(groups.size());
  for (int i = 0; i < n; ++i) {
    PlanStage s;
    s.gpus = groups[size_t(i)];
    s.tp = int(s.gpus.size());
    s.layer_begin = layers * i / n;
    s.layer_end = layers * (i + 1) / n;
    s.embeddings = i == 0;
    s.lm_head = i == n - 1;
    p.stages.push_back(s);
  }
  p.boundary_modes.assign(size_t(n - 1), boundary);
  p.micro_batches = micro_batches;
  return p;
}

// One stage: tensor parallel over `gpus`, all `layers`.
inline Plan tp(const std::vector<int>& gpus, int layers, const std::string& name = "tp") {
  return tp_pp({gpus}, layers, "peer", 1, name);
}

// A decode step of `seqs` sequences at `context` tokens.
inline BatchShape decode(int64_t seqs, int64_t context = 1024) {
  BatchShape b;
  b.decode_seqs = seqs, b.decode_context = context;
  return b;
}

}  // namespace peerplan::test_plans
