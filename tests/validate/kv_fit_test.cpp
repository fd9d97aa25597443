// executor_kv_slots (planner/validate/kv_fit.hpp): the executor's KV cache from the planner's one
// memory model, with the free memory measured at run time as the GPUs' capacity.
#include <gtest/gtest.h>

#include <climits>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/validate/kv_fit.hpp"

using namespace peerplan;

namespace {

struct Inputs {
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  ModelFigures fig = derive_figures(cfg);
  Machine machine = load_machine(resolve_machine_path("h200x2-nvlink"));
};

Plan on(std::vector<int> gpus) {
  Plan p;
  p.name = "tp";
  PlanStage s;
  s.gpus = gpus;
  s.tp = int(gpus.size());
  s.layer_end = 32;
  s.embeddings = s.lm_head = true;
  p.stages.push_back(s);
  return p;
}

constexpr int64_t GiB = int64_t(1) << 30;

}  // namespace

TEST(ExecutorKvSlots, IsCheckMemoryOnTheFreeBytesLessThePaddingSlot) {
  // One H200 with 120 GiB free, 8B model, 10 241-token slots: the slots are what check_memory
  // leaves for the KV cache on 120 GiB, over one sequence's KV bytes, minus the padding slot.
  Inputs in;
  const Plan p = on({0});
  const int64_t ctx = 10241, tokens = 8192;
  Machine free_machine = in.machine;
  free_machine.gpus[0].memory_bytes = 120 * GiB;
  MemoryOptions mo;
  mo.max_seqs = 1;
  mo.context = ctx;
  mo.max_batched_tokens = tokens;
  const GpuMemory g = check_memory(p, in.cfg, in.fig, free_machine, mo).gpus.at(0);
  const int64_t expect = (g.capacity - g.weights - g.activations - g.reserve) / g.kv_cache - 1;
  EXPECT_EQ(executor_kv_slots(p, in.cfg, in.fig, in.machine, {{0, 120 * GiB}}, ctx, tokens), expect);
  // 8B, bf16: 128 KiB of K and V per token, so a 10 241-token slot is 1.25 GiB; 120 GiB less
  // ~15 GiB of weights and ~14 GiB of reserve holds between 60 and 90 of them.
  EXPECT_GT(expect, 60);
  EXPECT_LT(expect, 90);
}

TEST(ExecutorKvSlots, LessFreeMemoryMeansFewerSlotsAndTooLittleIsNegative) {
  Inputs in;
  const Plan p = on({0});
  const int64_t a = executor_kv_slots(p, in.cfg, in.fig, in.machine, {{0, 120 * GiB}}, 4097, 8192);
  const int64_t b = executor_kv_slots(p, in.cfg, in.fig, in.machine, {{0, 60 * GiB}}, 4097, 8192);
  EXPECT_GT(a, b);
  EXPECT_LT(executor_kv_slots(p, in.cfg, in.fig, in.machine, {{0, 16 * GiB}}, 4097, 8192), 1)
      << "16 GiB free cannot hold the 15 GiB of weights and a reserve: nothing fits";
}

TEST(ExecutorKvSlots, TheTightestListedGpuDecidesAndUnlistedGpusAreNotLookedAt) {
  // TP2: GPU 1 has half the free memory of GPU 0, so it bounds the slots. Under MPI a rank lists
  // only its own GPU; a rank idle in the plan lists none (INT64_MAX: it does not bound the minimum).
  Inputs in;
  const Plan p = on({0, 1});
  const int64_t both = executor_kv_slots(p, in.cfg, in.fig, in.machine, {{0, 120 * GiB}, {1, 60 * GiB}}, 4097, 8192);
  const int64_t gpu1 = executor_kv_slots(p, in.cfg, in.fig, in.machine, {{1, 60 * GiB}}, 4097, 8192);
  const int64_t gpu0 = executor_kv_slots(p, in.cfg, in.fig, in.machine, {{0, 120 * GiB}}, 4097, 8192);
  EXPECT_EQ(both, gpu1);
  EXPECT_GT(gpu0, gpu1);
  EXPECT_EQ(executor_kv_slots(p, in.cfg, in.fig, in.machine, {}, 4097, 8192), INT64_MAX);
}

TEST(ExecutorKvSlots, TensorParallelHalvesEachGpusShareSoMoreSlotsFit) {
  // TP2 splits weights and KV heads over two GPUs: with the same free memory per GPU, each holds
  // half of every sequence's KV, so more than twice the TP1 slots fit (the weights halve too).
  Inputs in;
  const int64_t tp1 = executor_kv_slots(on({0}), in.cfg, in.fig, in.machine, {{0, 120 * GiB}}, 4097, 8192);
  const int64_t tp2 = executor_kv_slots(on({0, 1}), in.cfg, in.fig, in.machine, {{0, 120 * GiB}, {1, 120 * GiB}}, 4097, 8192);
  EXPECT_GT(tp2, 2 * tp1);
}

TEST(ExecutorKvSlots, SlidingWindowLayersHoldTheFullContextInTheExecutor) {
  // Mistral-7B-v0.1: 4096-token windows on every layer (issue 18). The planner's memory check
  // holds 4096 tokens of KV per sequence; the executor's cache holds max_ctx in every layer (it
  // attends to the band of a full-context cache), so its slots are those of full attention.
  ModelConfig w = load_model_config(resolve_model_path("mistral-7b"));
  ASSERT_EQ(w.window_of(0), 4096);
  ModelConfig full = w;
  full.layer_window.clear();
  Machine m = load_machine(resolve_machine_path("h200x2-nvlink"));
  const Plan p = on({0});
  const int64_t ctx = 32769, tokens = 8192;
  const int64_t slots = executor_kv_slots(p, w, derive_figures(w), m, {{0, 120 * GiB}}, ctx, tokens);
  EXPECT_EQ(slots, executor_kv_slots(p, full, derive_figures(full), m, {{0, 120 * GiB}}, ctx, tokens));
  // 32k tokens x 128 KiB = 4 GiB a slot: ~105 GiB after weights and reserve hold about 25, not 200.
  EXPECT_GT(slots, 15);
  EXPECT_LT(slots, 30);
}
