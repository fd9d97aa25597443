// The executor's MLA buffers beyond weights and the latent cache (planner/compile/mla_memory.hpp:
// one set of formulas for profiler/exec/engine_mla.cpp, engine_alloc.cpp and check_memory): the
// prefill expansion scratch, the kv_b output, the absorbed query / output rows and the decode
// workspace, and the memory check that counts them, refusing a plan that fits only without them.
#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/compile/mla_memory.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "planner/validate/kv_fit.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;

namespace {

ModelConfig v2_lite() { return load_model_config(resolve_model_path("deepseek-v2-lite")); }
Machine h200x2() { return load_machine(resolve_machine_path("h200x2-nvlink")); }  // 132 SMs each

}  // namespace

TEST(MlaScratch, DeepSeekV2LiteAtOneGpuAnd4kContext) {
  // 16 heads, 4096-token contexts, 8192 batched tokens, 256 sequences, 132 SMs.
  const ModelConfig c = v2_lite();
  const MlaScratch s = mla_scratch(c, 16, 4096, 8192, 256, 132);
  // A slot: K and V of 16 heads x 4096 x 192 bf16 = 48 MiB; 1 GiB holds 21, capped at 16.
  EXPECT_EQ(s.slots, 16);
  EXPECT_EQ(s.expanded_kv, 2LL * 16 * 16 * 4096 * 192 * 2);   // 768 MiB
  EXPECT_EQ(s.kv_b_out, (16LL * 4096 * 16 * 256 + 8) * 2);    // 512 MiB: 16 contexts' kv_b rows
  const int64_t tok_cap = 8192 + 8;                            // max(tokens, padded 256) + 8
  EXPECT_EQ(s.absorbed_q, tok_cap * 16 * 576 * 2);
  EXPECT_EQ(s.attn_out, (tok_cap * 16 * 576 + 8) * 2);
  // Split-K at 16 heads: 2 CTAs per SM, so rows x splits reach 264 (2 x 132), 513 fp32 each per head.
  EXPECT_EQ(s.decode_workspace, 264LL * 16 * 513 * 4);
  EXPECT_EQ(s.total(), s.expanded_kv + s.kv_b_out + s.absorbed_q + s.attn_out + s.decode_workspace);
  // Long contexts: one sequence per group whatever its size (128k: 3 GiB of K and V at 16 heads).
  const MlaScratch l = mla_scratch(c, 16, 131072, 8192, 256, 132);
  EXPECT_EQ(l.slots, 1);
  EXPECT_EQ(l.expanded_kv, 2LL * 16 * 131072 * 192 * 2);
  // A model without MLA has none.
  ModelConfig plain = c;
  plain.mla = false;
  EXPECT_EQ(mla_scratch(plain, 16, 4096, 8192, 256, 132).total(), 0);
}

TEST(MlaScratch, DecodeWorkspaceIsTheKernelsSplitFormula) {
  // One row at 4096 tokens: 264 resident CTAs but at most one chunk per 128 tokens: 32 splits.
  EXPECT_EQ(mla_decode_split_count(1, 16, 4096, 132, 16), 32);
  EXPECT_EQ(mla_decode_workspace_bytes_for(1, 16, 4096, 132, 512), 1LL * 16 * 32 * 513 * 4);
  // 128 heads at tile 64: 2 groups, 1 CTA per SM: 66 splits for one row, capped by the context.
  EXPECT_EQ(mla_decode_split_count(1, 128, 1 << 20, 132, 64), 66);
  // A batch filling a wave has no split-K and no workspace.
  EXPECT_EQ(mla_decode_workspace_bytes_for(300, 16, 4096, 132, 512), 0);
}

TEST(MlaMemory, CheckMemoryCountsTheExecutorsMlaScratch) {
  const ModelConfig c = v2_lite();
  const ModelFigures f = derive_figures(c);
  const Machine m = h200x2();
  MemoryOptions mo;
  mo.max_seqs = 64, mo.context = 4096, mo.max_batched_tokens = 8192;
  const MemoryReport r = check_memory(test_plans::tp({0}, int(c.layers)), c, f, m, mo);
  ASSERT_EQ(r.gpus.size(), 1u);
  const GpuMemory& g = r.gpus[0];
  EXPECT_EQ(g.mla_scratch, mla_scratch(c, 16, 4096, 8192, 64, 132).total());
  EXPECT_GT(g.mla_scratch, int64_t(1) << 30) << "768 MiB of expanded K/V and 512 MiB of kv_b output at least";
  EXPECT_EQ(g.used(), g.weights + g.kv_cache + g.activations + g.mla_scratch + g.reserve);
  // At TP 2 each GPU expands its 8 heads: the scratch follows the shard.
  const MemoryReport r2 = check_memory(test_plans::tp({0, 1}, int(c.layers)), c, f, m, mo);
  for (const GpuMemory& g2 : r2.gpus) EXPECT_EQ(g2.mla_scratch, mla_scratch(c, 8, 4096, 8192, 64, 132).total());
  // A standard model has none.
  const ModelConfig llama = load_model_config(resolve_model_path("llama-3.1-8b"));
  EXPECT_EQ(check_memory(test_plans::tp({0}, int(llama.layers)), llama, derive_figures(llama), m, mo).gpus[0].mla_scratch,
            0);
}

TEST(MlaMemory, APlanThatFitsOnlyWithoutTheScratchIsRefusedNamingIt) {
  // A GPU with room for weights, KV, activations and reserve but not the scratch: refused, and the
  // reason names the MLA scratch (not the KV cache or the weights).
  const ModelConfig c = v2_lite();
  const ModelFigures f = derive_figures(c);
  Machine m = h200x2();
  MemoryOptions mo;
  mo.max_seqs = 64, mo.context = 4096, mo.max_batched_tokens = 8192;
  mo.reserve_fraction = 0;  // a reserve that does not move with the capacity below
  const Plan p = test_plans::tp({0}, int(c.layers));
  const GpuMemory full = check_memory(p, c, f, m, mo).gpus.at(0);
  m.gpus[0].memory_bytes = full.used() - full.mla_scratch / 2;  // the scratch half fits
  const MemoryReport r = check_memory(p, c, f, m, mo);
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.why.find("MLA scratch"), std::string::npos) << r.why;
  EXPECT_NE(r.why.find("fits without the MLA scratch"), std::string::npos) << r.why;
  EXPECT_LT(r.max_seqs_that_fit, mo.max_seqs) << "the scratch takes room the KV cache would have had";
  // With the scratch's room it fits.
  m.gpus[0].memory_bytes = full.used();
  EXPECT_TRUE(check_memory(p, c, f, m, mo).fits);
}

TEST(MlaMemory, ExecutorKvSlotsLeaveRoomForTheScratch) {
  // The executor sizes its latent cache from check_memory on the free bytes: the slots are what is
  // left after the scratch too, or its allocation would fail after the cache took the memory.
  const ModelConfig c = v2_lite();
  const ModelFigures f = derive_figures(c);
  const Machine m = h200x2();
  const Plan p = test_plans::tp({0}, int(c.layers));
  const int64_t free_bytes = int64_t(40) << 30, ctx = 32768, tokens = 8192;
  Machine now = m;
  now.gpus[0].memory_bytes = free_bytes;
  MemoryOptions mo;
  mo.max_seqs = 1, mo.context = ctx, mo.max_batched_tokens = tokens;
  const GpuMemory g = check_memory(p, c, f, now, mo).gpus.at(0);
  ASSERT_GT(g.mla_scratch, 0);
  const int64_t expect = (g.capacity - g.weights - g.activations - g.mla_scratch - g.reserve) / g.kv_cache - 1;
  EXPECT_EQ(executor_kv_slots(p, c, f, m, {{0, free_bytes}}, ctx, tokens), expect);
}
