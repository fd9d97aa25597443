// The engine's device memory: per-GPU state for each GPU of the plan this process drives, scratch
// buffers sized for the worst-case iterations, the KV cache of the GPU's layers, the per-iteration
// metadata (token positions, cache slots, sequence lengths) and its upload.
#include <algorithm>

#include "planner/compile/graph_batch.hpp"
#include "planner/plan/sharding.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/quant.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;

void Engine::make_gpu_states() {
  for (size_t si = 0; si < plan_.stages.size(); ++si) {
    const PlanStage& st = plan_.stages[si];
    const StageLayout lay = stage_layout(plan_, si);
    for (size_t r = 0; r < st.gpus.size(); ++r) {
      if (!local(st.gpus[r])) continue;  // MPI: another rank's GPU
      auto g = std::make_unique<GpuState>();
      g->id = st.gpus[r];
      g->dev = bus_ ? bus_->device() : g->id;
      g->stage = int(si);
      g->rank = int(r);
      g->dp = lay.dp;
      g->tp = lay.tp;
      const AttnShard a = attn_shard(cfg_, fig_.layers[size_t(st.layer_begin)], lay.tp);
      g->heads = a.heads;
      g->kv_heads = a.kv_heads;
      g->head_dim = a.qk_dim;
      state_[g->id] = std::move(g);
    }
  }
}

void Engine::enable_peer_access() {
  // Peer access both ways between GPUs of the plan, or explicitly none with --p2p off.
  if (!opt_.p2p || bus_) return;  // MPI: NCCL sets up peer paths between the ranks' processes itself
  for (int a : gpus_)
    for (int b : gpus_) {
      if (a == b) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can) continue;
      gpu::ScopedDevice d(a);
      cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else CUDA_CHECK(e);
    }
}

std::map<int, Engine::ScratchNeed> Engine::scratch_needs(const std::vector<OpGraph>& worst) const {
  std::map<int, ScratchNeed> need;
  std::map<int, int64_t> moe_tokens;  // per GPU: tokens of its last MoeRoute (x top-k: its entries)
  for (const OpGraph& g : worst)
    for (const Op& op : g.ops)
      for (int id : op.gpus) {
        ScratchNeed& n = need[id];
        if (op.kind == OpKind::Gemm) {
          n.x = std::max(n.x, op.m * op.k * op.batch_count);
          n.y = std::max(n.y, op.m * op.n * op.batch_count);
        } else if (op.kind == OpKind::GroupedGemm) {
          // Routed rows: gate_up reads Z's tokens and writes Y, down reads Z's rows (engine_moe.cpp).
          // The device may route up to every (token, expert) entry here (the compiler's rows can be
          // a mean over layers), so the buffers take all of them.
          const int64_t rows = std::max(op.m, moe_tokens[id] * cfg_.experts_per_token);
          n.y = std::max(n.y, rows * op.n);
          // With the activation in gate_up's epilogue its rows go to Y's end, past down's [rows][hidden].
          if (op.act_epilogue) n.y = std::max(n.y, rows * (op.n / 2 + cfg_.hidden) + 256);
          n.z = std::max(n.z, rows * op.k);
          // Prefill-sized gate_up may take cuBLAS per expert (engine_moe.cpp), which gathers the
          // rows behind the tokens in Z; sized here so the executor runs the path the profile timed.
          if (gathers_tokens(op) && moe_tokens[id] > kGraphTimedMaxRows)
            n.z = std::max(n.z, gathered_first(moe_tokens[id], op.k) + rows * op.k);
        } else if (is_collective(op.kind)) {
          n.y = std::max(n.y, op.bytes / 2 + 8);
          n.z = std::max(n.z, op.bytes / 2 + 8);
        } else if (op.kind == OpKind::Attention) {
          n.z = std::max(n.z, (op.attn_batch * op.attn_q_len + 8) * op.attn_heads * op.attn_head_dim);
          n.kv_fp8 = n.kv_fp8 || op.kv_dtype == DType::FP8_E4M3;
        } else if (op.kind == OpKind::Elementwise) {
          n.z = std::max(n.z, int64_t(op.mem_bytes / 2) + 8);
          if (op.ew == EwKind::MoeCombine) n.z = std::max(n.z, op.ew_rows * op.ew_cols + 8);
          if (op.ew == EwKind::MoeRoute) moe_tokens[id] = op.ew_rows;
        }
      }
  return need;
}

void Engine::allocate(GpuState& g, const ScratchNeed& need) {
  const int64_t H = cfg_.hidden;
  const int64_t tok_cap = std::max(max_tokens_, padded_batch(kv_slots_)) + 8;
  const int64_t seq_cap = std::max<int64_t>(padded_batch(kv_slots_), max_tokens_) + 8;
  const int dev = g.dev;  // CUDA ordinal (= id in one process; the local rank under MPI)
  const int id = g.id;
  gpu::ScopedDevice d(dev);
  g.stream = gpu::Stream(dev);
  g.copy[0] = gpu::Stream(dev);
  g.copy[1] = gpu::Stream(dev);
  g.gemm = std::make_unique<gpu::GemmRunner>(dev);
  g.qgemm = std::make_unique<gpu::QuantGemmRunner>(dev);
  g.kv_fp8 = need.kv_fp8;
  g.cap_x = need.x + 8;
  g.cap_y = need.y + 8;
  g.cap_z = std::max(need.z, need.y) + 8;
  if (cfg_.mla) {
    // MLA: Y holds the kv_b output of a full prefill scratch (engine_mla.cpp reads each group's
    // rows from it; kMlaKvB = 256 per head), Z the attention outputs of a mixed iteration's tokens
    // at up to 576 per head (the absorbed decode's 512, after the prefill's 192).
    const MlaScratch sz = mla_sizes(g.heads);  // planner/compile/mla_memory.hpp: check_memory counts these
    g.cap_y = std::max(g.cap_y, sz.kv_b_out / 2);
    g.cap_z = std::max(g.cap_z, sz.attn_out / 2);
  }
  g.X = gpu::DeviceBuffer(dev, size_t(g.cap_x) * 2);
  g.Y = gpu::DeviceBuffer(dev, size_t(g.cap_y) * 2);
  g.Z = gpu::DeviceBuffer(dev, size_t(g.cap_z) * 2);
  g.hidden = gpu::DeviceBuffer(dev, size_t(tok_cap * H) * 2);
  const int64_t qkv_w = (g.heads + 2 * g.kv_heads) * g.head_dim;
  g.qkv = gpu::DeviceBuffer(dev, size_t(tok_cap * qkv_w) * 2);
  g.normw = gpu::DeviceBuffer(dev, size_t(H) * 2);
  kn::fill_random(g.X.as<bf16>(), g.cap_x, opt_.seed * 31 + id, 1.0f, g.stream);
  kn::fill_random(g.Y.as<bf16>(), g.cap_y, opt_.seed * 37 + id, 1.0f, g.stream);
  kn::fill_random(g.Z.as<bf16>(), g.cap_z, opt_.seed * 41 + id, 1.0f, g.stream);
  kn::fill_random(g.hidden.as<bf16>(), tok_cap * H, opt_.seed * 43 + id, 1.0f, g.stream);
  kn::fill_random(g.qkv.as<bf16>(), tok_cap * qkv_w, opt_.seed * 47 + id, 1.0f, g.stream);
  kn::fill_value(g.normw.as<bf16>(), H, 1.0f, g.stream);
  if (cfg_.qk_norm) {  // Qwen3's q_norm and k_norm: one head_dim vector each, shared by the layers as normw
    g.qknormw = gpu::DeviceBuffer(dev, size_t(2 * g.head_dim) * 2);
    kn::fill_value(g.qknormw.as<bf16>(), 2 * g.head_dim, 1.0f, g.stream);
  }
  if (cfg_.mla) {
    allocate_mla(g, tok_cap);  // its own decode workspace
    allocate_latent_cache(g);
  } else {
    // Split-K workspace: the chunk length depends on the batch, so size for the worst batch.
    size_t ws = 256;
    for (int64_t b = 1; b <= std::max(padded_batch(kv_slots_), max_tokens_); ++b)
      ws = std::max(ws, kn::decode_attention_workspace_bytes(int(b), int(g.heads), int(g.head_dim), int(max_ctx_),
                                                             int(g.kv_heads), sm_count_));
    g.attn_ws = gpu::DeviceBuffer(dev, ws);
    allocate_kv_cache(g);
  }
  allocate_metadata(g, tok_cap, seq_cap);
  for (int s = 0; s < in_flight_; ++s) {
    g.recv.emplace_back(dev, size_t(tok_cap * H) * 2 * 2);  // fused norms send two [tokens][H] parts
    g.start.emplace_back(dev);
    g.done.emplace_back(dev);
  }
  g.staging = gpu::PinnedHostBuffer(size_t(tok_cap * H) * 2 * 2);
  g.epoch = gpu::Event(dev);
  if (bus_) {
    g.finish = gpu::Stream(dev);
    g.token = gpu::DeviceBuffer(dev, 256);
    CUDA_CHECK(cudaMemsetAsync(g.token.get(), 0, 256, g.stream));
  }
  for (int i = 0; i < 256; ++i) g.pool.emplace_back(dev, cudaEventDisableTiming);
}

void Engine::allocate_kv_cache(GpuState& g) {
  // KV cache of this GPU's layers: kv_slots + 1 slots (the last one absorbs padded sequences).
  const PlanStage& st = plan_.stages[size_t(g.stage)];
  // FP8 KV cache: one byte per element, random e4m3 codes (kSyntheticKvScale).
  const int64_t elems = (kv_slots_ + 1) * g.kv_heads * max_ctx_ * g.head_dim;
  const size_t kv_bytes = size_t(elems) * (g.kv_fp8 ? 1 : 2);
  for (int64_t l = st.layer_begin; l < st.layer_end; ++l) {
    gpu::DeviceBuffer k(g.dev, kv_bytes), v(g.dev, kv_bytes);
    if (g.kv_fp8) {
      kn::fill_random_fp8(k.as<uint8_t>(), elems, opt_.seed * 53 + uint64_t(l), g.stream);
      kn::fill_random_fp8(v.as<uint8_t>(), elems, opt_.seed * 59 + uint64_t(l), g.stream);
    } else {
      kn::fill_random(k.as<bf16>(), elems, opt_.seed * 53 + uint64_t(l), 1.0f, g.stream);
      kn::fill_random(v.as<bf16>(), elems, opt_.seed * 59 + uint64_t(l), 1.0f, g.stream);
    }
    g.kv[int(l)] = {std::move(k), std::move(v)};
  }
}

void Engine::allocate_metadata(GpuState& g, int64_t tok_cap, int64_t seq_cap) {
  int64_t off = 0;
  auto take = [&](int64_t n) { int64_t o = off; off += (n + 31) / 32 * 32; return o; };
  g.o_pos = take(tok_cap);
  g.o_slot = take(tok_cap);
  g.o_ids = take(tok_cap);
  g.o_qstart = take(seq_cap + 1);
  g.o_pflen = take(seq_cap);
  g.o_pfslot = take(seq_cap);
  g.o_dclen = take(seq_cap);
  g.o_dcslot = take(seq_cap);
  g.o_pfctx = take(2 * seq_cap + 2);  // MLA: per prefill group, its sequences' context prefix sums
  g.meta_ints = off;
  g.meta = gpu::DeviceBuffer(g.dev, size_t(off) * 4);
  CUDA_CHECK(cudaMemsetAsync(g.meta.get(), 0, size_t(off) * 4, g.stream));
  for (int s = 0; s < in_flight_; ++s) g.meta_host.emplace_back(size_t(off) * 4);
}

// MLA prefill (engine_mla.cpp): the prefilling sequences in groups of at most the scratch's slots,
// each group with its own prefix sums of the contexts (the kv_b rows it expands, from row 0), laid
// out group after group with one extra entry each at o_pfctx.
void Engine::mla_prefill_groups(GpuState& g, int* h) {
  g.mla_groups.clear();
  g.mla_group_rows.clear();
  int64_t at = g.o_pfctx;
  for (int64_t a = 0; a < g.npf_seqs; a += g.mla_slots) {
    const int n = int(std::min<int64_t>(g.mla_slots, g.npf_seqs - a));
    int64_t rows = 0;
    h[at++] = 0;
    for (int i = 0; i < n; ++i) h[at++] = int(rows += h[g.o_pflen + a + i]);
    g.mla_groups.emplace_back(a, n);
    g.mla_group_rows.push_back(rows);
  }
}

void Engine::upload_meta(const std::vector<SeqRun>& seqs, int slot) {
  for (auto& [id, gp] : state_) {
    GpuState& g = *gp;
    int* h = g.meta_host[size_t(slot)].as<int>();
    g.ntok = g.npf_seqs = g.ndc = g.npf_tok = g.max_q = 0;
    int64_t tok = 0;
    std::vector<const SeqRun*> mine;
    for (size_t i = 0; i < seqs.size(); ++i)
      if (g.dp <= 1 || int(i % size_t(g.dp)) == g.rank % g.dp) mine.push_back(&seqs[i]);
    h[g.o_qstart] = 0;
    for (const SeqRun* q : mine) {
      const int first = q->context - q->new_tokens;
      for (int t = 0; t < q->new_tokens; ++t) {
        h[g.o_pos + tok] = first + t;
        h[g.o_slot + tok] = q->slot;
        h[g.o_ids + tok] = int((tok * 2654435761ull + uint64_t(q->slot) * 97) % uint64_t(cfg_.vocab));
        ++tok;
      }
      if (q->prefill) {
        h[g.o_pflen + g.npf_seqs] = q->context;
        h[g.o_pfslot + g.npf_seqs] = q->slot;
        ++g.npf_seqs;
        h[g.o_qstart + g.npf_seqs] = int(tok);
        g.npf_tok += q->new_tokens;
        g.max_q = std::max<int64_t>(g.max_q, q->new_tokens);
      } else {
        h[g.o_dclen + g.ndc] = q->context;
        h[g.o_dcslot + g.ndc] = q->slot;
        ++g.ndc;
      }
    }
    g.ntok = tok;
    if (g.mla) mla_prefill_groups(g, h);
    gpu::ScopedDevice d(g.dev);
    CUDA_CHECK(cudaMemcpyAsync(g.meta.get(), h, size_t(g.meta_ints) * 4, cudaMemcpyHostToDevice, g.stream));
  }
}

}  // namespace peerplan::exec
