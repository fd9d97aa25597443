// Op dispatch: each compute op of the graph becomes the kernel an inference engine runs for it
// (cuBLASLt GEMMs on synthetic weights, the executor's attention kernels, the elementwise kernel
// the compiler typed the op with); collectives and sends go to engine_comm.cpp.
#include <algorithm>
#include <functional>
#include <set>
#include <tuple>

#include "planner/core/error.hpp"
#include "profiler/common/pdl_switch.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/qk_norm.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;

void Engine::run_op(const Op& op, int slot, std::vector<cudaEvent_t>* send_done) {
  if (is_collective(op.kind)) return ncclgroup_collective(op);
  if (op.kind == OpKind::Send) return bus_ ? send_between_ranks(op, slot) : send_in_process(op, slot, send_done);
  GpuState& g = gpu(op.gpus[0]);
  gpu::ScopedDevice d(g.dev);
  switch (op.kind) {
    case OpKind::Gemm: return run_gemm(op, g);
    case OpKind::GroupedGemm: return run_grouped_gemm(op, g);
    case OpKind::Embedding: return run_embedding(g);
    case OpKind::Attention: return run_attention(op, g);
    case OpKind::Elementwise: return run_elementwise(op, g);
    default: return;
  }
}

void Engine::settle_new_weights(GpuState& g) {
  if (kn::pdl::enabled()) g.stream.synchronize();  // outside capture: weights exist before a graph is captured
}

void Engine::run_gemm(const Op& op, GpuState& g) {
  if (op.wdtype != DType::BF16) return run_quant_gemm(op, g);
  const std::string& key = op.name;
  auto it = g.weights.find(key);
  const int64_t welems = op.n * op.k * op.batch_count;
  if (it == g.weights.end() || int64_t(it->second.bytes()) < welems * 2) {
    gpu::DeviceBuffer w(g.dev, size_t(welems) * 2);
    kn::fill_random(w.as<bf16>(), welems, opt_.seed * 1000003 + std::hash<std::string>{}(key), 0.02f, g.stream);
    it = g.weights.insert_or_assign(key, std::move(w)).first;
    settle_new_weights(g);
  }
  // Rows per call: all of them, unless X or Y cannot hold them (MLA's prefill kv_b GEMM over every
  // attended token of several long sequences): then in row chunks, as vLLM's MLA prefill loops over
  // its bounded workspace. The scratch buffers always hold the worst iteration's other GEMMs.
  const int64_t fit = std::min(g.cap_x / std::max<int64_t>(1, op.k * op.batch_count),
                               g.cap_y / std::max<int64_t>(1, op.n * op.batch_count));
  const int64_t rows = std::max<int64_t>(1, std::min(op.m, fit));
  if (op.act_epilogue) {  // SiLU(gate) * up into Z, as the activation op would write it (act_fusion.hpp)
    if (op.batch_count != 1 || op.m > rows)
      throw RuntimeError("executor: op " + op.name + ": an activation epilogue on a batched or chunked GEMM (the "
                         "compiler marks decode-sized gate_up GEMMs only: planner/compile/act_fusion.hpp)");
    return g.gemm->run_gate_up_act(g.X.as<bf16>(), it->second.as<bf16>(), g.Y.as<bf16>(), g.Z.as<bf16>(), op.m, op.n,
                                   op.k, g.stream);
  }
  // batch_count > 1 (MLA's absorbed per-head products; no other Gemm op has it since routed experts
  // became GroupedGemm): one strided-batched call, as torch.bmm, product e on X, W and Y's e-th slice.
  for (int64_t r0 = 0; r0 < op.m; r0 += rows) {
    const int64_t m = std::min(rows, op.m - r0);
    g.gemm->run(g.X.as<bf16>(), it->second.as<bf16>(), g.Y.as<bf16>(), m, op.n, op.k, g.stream, op.batch_count);
  }
}

void Engine::run_embedding(GpuState& g) {
  const int64_t H = cfg_.hidden;
  const int64_t vocab_local = (cfg_.vocab + g.tp - 1) / g.tp;
  auto it = g.weights.find("embed");
  if (it == g.weights.end()) {
    gpu::DeviceBuffer w(g.dev, size_t(vocab_local * H) * 2);
    kn::fill_random(w.as<bf16>(), vocab_local * H, opt_.seed * 7919 + g.id, 0.02f, g.stream);
    it = g.weights.emplace("embed", std::move(w)).first;
  }
  // Fused norms: the rows into Z and the residual stream zeroed, so the first layer's add_rmsnorm
  // adds them (the compiler's Embedding bytes); else into the residual stream.
  if (fused_norm_)
    kn::embedding_gather(g.m(g.o_ids), it->second.as<bf16>(), g.Z.as<bf16>(), g.ntok, vocab_local, H, g.stream,
                         g.hidden.as<bf16>());
  else
    kn::embedding_gather(g.m(g.o_ids), it->second.as<bf16>(), g.hidden.as<bf16>(), g.ntok, vocab_local, H, g.stream);
}

namespace {
// Prefill and decode attention read the layer's K/V cache in the same way: bf16, or e4m3 with the
// synthetic per-tensor scale.
template <class Args, class Kv>
void point_at_kv_cache(Args& a, Kv& kv, bool fp8) {
  if (fp8) {
    a.k_cache_fp8 = kv.first.template as<uint8_t>();
    a.v_cache_fp8 = kv.second.template as<uint8_t>();
    a.k_scale = a.v_scale = kSyntheticKvScale;
  } else {
    a.k_cache = kv.first.template as<bf16>();
    a.v_cache = kv.second.template as<bf16>();
  }
}
}  // namespace

void Engine::run_attention(const Op& op, GpuState& g) {
  if (g.mla) return run_mla_attention(op, g);
  auto& kv = g.kv.at(op.layer);
  const int64_t qkv_w = (g.heads + 2 * g.kv_heads) * g.head_dim;
  // The layer's sliding window (issue 18; 0: full): Mistral-7B-v0.1 every layer, gpt-oss every
  // other one (ModelConfig::window_of). The kernels attend to the band only, as the compiler prices it.
  const int window = int(cfg_.window_of(op.layer));
  if (op.attn_prefill) {
    kn::PrefillAttention a;
    a.q = g.qkv.as<bf16>();
    a.q_row_stride = qkv_w;
    point_at_kv_cache(a, kv, g.kv_fp8);
    a.slots = g.m(g.o_pfslot);
    a.q_start = g.m(g.o_qstart);
    a.seq_lens = g.m(g.o_pflen);
    a.out = g.Z.as<bf16>();
    a.num_seqs = int(g.npf_seqs);
    a.max_q_len = int(g.max_q);
    a.heads = int(g.heads);
    a.kv_heads = int(g.kv_heads);
    a.head_dim = int(g.head_dim);
    a.max_ctx = int(max_ctx_);
    a.num_slots = int(kv_slots_);
    a.window = window;
    return kn::prefill_attention(a, g.stream);
  }
  kn::DecodeAttention a;
  a.q = g.qkv.as<bf16>() + g.npf_tok * qkv_w;
  a.q_row_stride = qkv_w;
  point_at_kv_cache(a, kv, g.kv_fp8);
  a.slots = g.m(g.o_dcslot);
  a.seq_lens = g.m(g.o_dclen);
  a.out = g.Z.as<bf16>() + g.npf_tok * g.heads * g.head_dim;
  a.workspace = g.attn_ws.as<float>();
  a.batch = int(g.ndc);
  a.heads = int(g.heads);
  a.kv_heads = int(g.kv_heads);
  a.head_dim = int(g.head_dim);
  a.max_ctx = int(max_ctx_);
  a.window = window;
  kn::decode_attention(a, sm_count_, g.stream);
}

void Engine::run_elementwise(const Op& op, GpuState& g) {
  // Norms, QK-norm, residual adds and rotary run over the tokens this GPU holds in this iteration (g.ntok,
  // from the uploaded metadata; the compiler's ew_rows is the per-rank share rounded up when
  // dp > 1); the activation over the compiler's [rows][cols], as the GEMMs around it.
  cudaStream_t s = g.stream;
  switch (op.ew) {
    case EwKind::RmsNorm:
      return kn::rmsnorm(g.hidden.as<bf16>(), g.normw.as<bf16>(), g.Z.as<bf16>(), g.ntok, op.ew_cols, 1e-5f, s);
    case EwKind::AddRmsNorm:  // the block output (Z) into the residual stream, normalised back into Z
      return kn::add_rmsnorm(g.Z.as<bf16>(), g.hidden.as<bf16>(), g.normw.as<bf16>(), g.Z.as<bf16>(), g.ntok,
                             op.ew_cols, 1e-5f, s);
    case EwKind::Residual: return kn::residual_add(g.hidden.as<bf16>(), g.Z.as<bf16>(), g.ntok * op.ew_cols, s);
    case EwKind::QkNorm: {
      // Qwen3: q and k heads of the qkv rows normalised in place before rotary (eps: Qwen3's
      // rms_norm_eps; the time does not depend on it).
      kn::QkNormArgs q;
      q.qkv = g.qkv.as<bf16>();
      q.row_stride = (g.heads + 2 * g.kv_heads) * g.head_dim;
      q.q_weight = g.qknormw.as<bf16>();
      q.k_weight = q.q_weight + g.head_dim;
      q.tokens = g.ntok;
      q.heads = int(g.heads);
      q.kv_heads = int(g.kv_heads);
      q.head_dim = int(g.head_dim);
      q.eps = 1e-6f;
      return kn::qk_norm(q, s);
    }
    case EwKind::MlaRotary: return run_mla_rotary(op, g);
    case EwKind::Rotary: {
      if (g.mla)
        throw RuntimeError("executor: op " + op.name + " is a standard rotary on an MLA model (planner/compile/"
                           "compiler.cpp emits EwKind::MlaRotary for MLA layers)");
      kn::RotaryCache r;
      r.qkv = g.qkv.as<bf16>();
      r.positions = g.m(g.o_pos);
      r.token_slot = g.m(g.o_slot);
      auto& kv = g.kv.at(op.layer);
      if (g.kv_fp8) {
        r.k_cache_fp8 = kv.first.as<uint8_t>();
        r.v_cache_fp8 = kv.second.as<uint8_t>();
        r.k_scale = r.v_scale = kSyntheticKvScale;
      } else {
        r.k_cache = kv.first.as<bf16>();
        r.v_cache = kv.second.as<bf16>();
      }
      r.tokens = g.ntok;
      r.heads = int(g.heads);
      r.kv_heads = int(g.kv_heads);
      r.head_dim = int(g.head_dim);
      r.max_ctx = int(max_ctx_);
      return kn::rotary_and_cache(r, s);
    }
    case EwKind::Act: {
      // SiLU(gate) * up: the gate_up GEMM's [rows][2 * cols] output in Y; cols in whole 8-element
      // vectors (the kernel's), as the engine always ran it.
      const int64_t cols = std::max<int64_t>(8, op.ew_cols);
      const int64_t rows = std::max<int64_t>(1, op.ew_rows);
      return kn::silu_mul(g.Y.as<bf16>(), g.Z.as<bf16>(), rows, cols / 8 * 8, s);
    }
    case EwKind::MoeRoute: return run_moe_route(op, g);
    case EwKind::MoeCombine: return run_moe_combine(op, g);
    case EwKind::None: break;
  }
  throw RuntimeError("executor: elementwise op " + op.name + " has no kind (planner/compile/compiler.cpp types every "
                     "elementwise op it emits)");
}

int64_t Engine::warm_gemm_plans(int64_t max_tokens, int64_t max_seqs) {
  // The GEMM dimensions depend on the total token count (and, for the LM head, on the number of
  // sequences), so one-sequence prefills of every length and decodes of every batch cover them.
  // Then one GEMM per distinct kernel configuration, at its smallest M: cuBLASLt's first call of a
  // kernel costs ~2.5 ms of host time (measured: 2.4-3.5 ms for 8B shapes on H200), which
  // otherwise lands inside the first serving iterations that need it (as TTFT).
  std::set<std::tuple<int, int64_t, int64_t, int64_t, int64_t>> seen;  // (gpu, m, n, k, batch)
  std::set<std::tuple<int, int64_t, int64_t, uint64_t>> quant_warm;  // (gpu, n, k, kernel)
  // (gpu, n, k, batch, algo) -> smallest M
  std::map<std::tuple<int, int64_t, int64_t, int64_t, uint64_t>, int64_t> kernels;
  auto add = [&](const BatchShape& sh) {
    for (const Op& op : compile(sh).ops) {
      if (op.kind != OpKind::Gemm || !local(op.gpus[0])) continue;
      if (op.wdtype != DType::BF16) {  // quantized: run each distinct kernel once (engine_quant.cpp)
        GpuState& gq = gpu(op.gpus[0]);
        const uint64_t algo = gq.qgemm->prepare(op.wdtype, gpu::Fp8Scaling::PerTensor, op.m, op.n, op.k);
        if (quant_warm.emplace(op.gpus[0], op.n, op.k, algo ^ uint64_t(op.wdtype)).second) run_quant_gemm(op, gq);
        continue;
      }
      if (!seen.emplace(op.gpus[0], op.m, op.n, op.k, op.batch_count).second) continue;
      const uint64_t algo = gpu(op.gpus[0]).gemm->prepare(op.m, op.n, op.k, op.batch_count);
      auto [it, fresh] = kernels.emplace(std::make_tuple(op.gpus[0], op.n, op.k, op.batch_count, algo), op.m);
      if (!fresh) it->second = std::min(it->second, op.m);
    }
  };
  for (int64_t t = 1; t <= max_tokens; ++t) add(BatchShape{1, t, t, 0, 0});
  for (int64_t b = 1; b <= padded_batch(max_seqs); ++b) add(BatchShape{0, 0, 0, b, 2});
  for (const auto& [key, m] : kernels) {
    const auto& [id, n, k, batch, algo] = key;
    GpuState& g = gpu(id);
    if (m * k * batch > g.cap_x || m * n * batch > g.cap_y) continue;  // X/Y hold the largest iteration's
    // The weights: borrowed from Z when they fit there, else allocated for the call (start-up only).
    gpu::DeviceBuffer w;
    const bf16* wp = nullptr;
    if (n * k * batch <= g.cap_z) wp = g.Z.as<bf16>();
    else {
      w = gpu::DeviceBuffer(g.dev, size_t(n * k * batch) * 2);
      wp = w.as<bf16>();
    }
    g.gemm->run(g.X.as<bf16>(), wp, g.Y.as<bf16>(), m, n, k, g.stream, batch);
    if (w.get()) g.stream.synchronize();
  }
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  warm_kernels_ = int64_t(kernels.size() + quant_warm.size());
  return int64_t(seen.size());
}

}  // namespace peerplan::exec
