// Multi-head latent attention (DeepSeek-V2/V3) in the executor, as the compiler emits it and vLLM's
// MLA backend runs it (docs/attention.md "MLA"): one latent cache per layer ([slots][max_ctx][576]:
// normalised latent + rotated k_pe) instead of K and V; the rotary op is the fused cache write +
// rope; prefill expands the attended tokens' K and V per head (kv_b GEMM, then mla_prefill_expand)
// into a scratch KV cache that the ordinary prefill attention reads at head_dim 192; decode runs the
// absorbed MQA over the latent rows (mla_decode), between the two batched GEMMs the graph holds.
#include <algorithm>
#include <string>

#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/mla.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;

// The refusal (attention_support.cpp, CPU code without the CUDA headers) names the shape these
// kernels take; the two must agree.
static_assert(kn::kMlaSupportedLatent == kn::kMlaLatent && kn::kMlaSupportedRope == kn::kMlaRope &&
                  kn::kMlaSupportedNope == kn::kMlaQkNope && kn::kMlaSupportedVDim == kn::kMlaVDim &&
                  kn::kMlaSupportedMaxHeads == kn::kMlaMaxHeads,
              "attention_support.hpp's MLA shape differs from the kernels' (profiler/kernels/mla.hpp)");

// The scratch's sizes are planner/compile/mla_memory.hpp's (mla_scratch): the planner's memory
// check counts the same bytes, so a plan it accepts is one these allocations fit.
MlaScratch Engine::mla_sizes(int64_t heads) const {
  return mla_scratch(cfg_, heads, max_ctx_, max_tokens_, kv_slots_, sm_count_);
}

void Engine::allocate_mla(GpuState& g, int64_t tok_cap) {
  const int dev = g.dev;
  g.mla = true;
  const MlaScratch sz = mla_sizes(g.heads);
  g.mla_slots = int(sz.slots);
  g.mla_k = gpu::DeviceBuffer(dev, size_t(sz.expanded_kv / 2));
  g.mla_v = gpu::DeviceBuffer(dev, size_t(sz.expanded_kv / 2));
  // Zeros, not random: an attention kernel may multiply a masked weight 0 by a row past a context,
  // which must be finite (mla.hpp).
  CUDA_CHECK(cudaMemsetAsync(g.mla_k.get(), 0, g.mla_k.bytes(), g.stream));
  CUDA_CHECK(cudaMemsetAsync(g.mla_v.get(), 0, g.mla_v.bytes(), g.stream));
  // The scratch's slot table: slot i = the call's sequence i (a table, not nullptr, so the cuDNN
  // graph warmed at start-up is the one the calls use).
  std::vector<int> ident(size_t(g.mla_slots));
  for (int i = 0; i < g.mla_slots; ++i) ident[size_t(i)] = i;
  g.mla_ident = gpu::DeviceBuffer(dev, ident.size() * 4);
  CUDA_CHECK(cudaMemcpyAsync(g.mla_ident.get(), ident.data(), ident.size() * 4, cudaMemcpyHostToDevice, g.stream));
  g.stream.synchronize();  // `ident` leaves scope
  // The absorbed queries of the decoding tokens: [tokens][heads][576] (tok_cap tokens: the sizes'
  // own token capacity is the same max(max_tokens, padded kv_slots) + 8).
  if (sz.absorbed_q != tok_cap * g.heads * kn::kMlaRow * 2)
    throw RuntimeError("executor: MLA absorbed-query rows sized " + std::to_string(sz.absorbed_q) +
                       " bytes by planner/compile/mla_memory.hpp, the engine's token capacity needs " +
                       std::to_string(tok_cap * g.heads * kn::kMlaRow * 2));
  g.mla_q = gpu::DeviceBuffer(dev, size_t(sz.absorbed_q));
  kn::fill_random(g.mla_q.as<bf16>(), tok_cap * g.heads * kn::kMlaRow, opt_.seed * 61 + uint64_t(g.id), 1.0f, g.stream);
  // Softmax scale without YaRN's mscale: the weights are synthetic, and the time does not depend on it.
  g.mla_scale = kn::mla_softmax_scale(int(cfg_.qk_nope_head_dim), int(cfg_.qk_rope_head_dim), 0, 1);
  // Split-K partials over every decode batch it runs (mla_decode_workspace_bytes's own formula).
  g.attn_ws = gpu::DeviceBuffer(dev, size_t(sz.decode_workspace));
}

void Engine::allocate_latent_cache(GpuState& g) {
  // One latent row per token (kv_slots + 1 slots: the last absorbs padded sequences).
  const PlanStage& st = plan_.stages[size_t(g.stage)];
  const int64_t elems = (kv_slots_ + 1) * max_ctx_ * kn::kMlaRow;
  for (int64_t l = st.layer_begin; l < st.layer_end; ++l) {
    gpu::DeviceBuffer c(g.dev, size_t(elems) * 2);
    kn::fill_random(c.as<bf16>(), elems, opt_.seed * 53 + uint64_t(l), 1.0f, g.stream);
    g.latent[int(l)] = std::move(c);
  }
}

// The rotary op of an MLA layer: kv_a_layernorm of the latent, rope of k_pe, the cache row written,
// and every head's q_pe rotated. The kv_a projection's [tokens][576] output is in Y (the GEMM's),
// the q projection's [tokens][heads][192] in qkv. Prefill tokens keep q in place (the expanded
// attention reads it so); decoding tokens' q_pe goes into their absorbed 576-wide rows.
void Engine::run_mla_rotary(const Op& op, GpuState& g) {
  auto call = [&](int64_t first, int64_t tokens, bf16* q_out) {
    if (tokens <= 0) return;
    kn::MlaRopeCache r;
    r.kv = g.Y.as<bf16>() + first * kn::kMlaRow;
    r.kv_row_stride = kn::kMlaRow;
    r.q = g.qkv.as<bf16>() + first * g.heads * kn::kMlaQkDim;
    r.q_row_stride = g.heads * kn::kMlaQkDim;
    r.q_head_stride = kn::kMlaQkDim;
    r.q_pe_offset = kn::kMlaQkNope;
    r.q_out = q_out;
    r.q_out_row_stride = g.heads * kn::kMlaRow;
    r.norm_weight = g.normw.as<bf16>();
    r.positions = g.m(g.o_pos) + first;
    r.token_slot = g.m(g.o_slot) + first;
    r.cache = g.latent.at(op.layer).as<bf16>();
    r.tokens = tokens;
    r.heads = int(g.heads);
    r.max_ctx = int(max_ctx_);
    kn::mla_rope_and_cache(r, g.stream);
  };
  call(0, g.npf_tok, nullptr);
  call(g.npf_tok, g.ntok - g.npf_tok, g.mla_q.as<bf16>());
}

void Engine::run_mla_attention(const Op& op, GpuState& g) {
  const bf16* cache = g.latent.at(op.layer).as<bf16>();
  if (op.attn_prefill) {
    // Sequences in groups of at most mla_slots (the scratch's), each group: expand, then attend.
    // The kv_b GEMM's output (Y) holds each group's attended rows from row 0.
    for (size_t gi = 0; gi < g.mla_groups.size(); ++gi) {
      const auto [a, n] = g.mla_groups[gi];
      kn::MlaPrefillExpand e;
      e.kv_b = g.Y.as<bf16>();
      e.kv_b_row_stride = g.heads * kn::kMlaKvB;
      e.cache = cache;
      e.slots = g.m(g.o_pfslot) + a;
      e.ctx_start = g.m(g.o_pfctx) + a + int64_t(gi);  // the group's own prefix sums (upload_meta)
      e.k_out = g.mla_k.as<bf16>();
      e.v_out = g.mla_v.as<bf16>();
      e.total_ctx = g.mla_group_rows[gi];
      e.num_seqs = n;
      e.heads = int(g.heads);
      e.max_ctx = int(max_ctx_);
      e.cache_max_ctx = int(max_ctx_);
      kn::mla_prefill_expand(e, g.stream);
      kn::PrefillAttention p;
      p.q = g.qkv.as<bf16>();
      p.q_row_stride = g.heads * kn::kMlaQkDim;
      p.k_cache = g.mla_k.as<bf16>();
      p.v_cache = g.mla_v.as<bf16>();
      p.slots = g.mla_ident.as<int>();
      p.q_start = g.m(g.o_qstart) + a;  // absolute token offsets: q and out are indexed from row 0
      p.seq_lens = g.m(g.o_pflen) + a;
      p.out = g.Z.as<bf16>();
      p.num_seqs = n;
      p.max_q_len = int(g.max_q);
      p.heads = p.kv_heads = int(g.heads);
      p.head_dim = kn::kMlaQkDim;
      p.max_ctx = int(max_ctx_);
      p.num_slots = g.mla_slots;
      p.scale = g.mla_scale;
      kn::prefill_attention(p, g.stream);
    }
    return;
  }
  kn::MlaDecode d;
  d.q = g.mla_q.as<bf16>();
  d.q_row_stride = g.heads * kn::kMlaRow;
  d.cache = cache;
  d.slots = g.m(g.o_dcslot);
  d.seq_lens = g.m(g.o_dclen);
  d.out = g.Z.as<bf16>() + g.npf_tok * g.heads * kn::kMlaQkDim;  // after the prefill's output
  d.workspace = g.attn_ws.as<float>();
  d.batch = int(g.ndc);
  d.heads = int(g.heads);
  d.max_ctx = int(max_ctx_);
  d.scale = g.mla_scale;
  kn::mla_decode(d, sm_count_, g.stream);
}

}  // namespace peerplan::exec
