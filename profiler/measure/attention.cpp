// Attention kernel times of the executor's own calls (profiler/kernels/attention.hpp: prefill through
// cuDNN's fused attention where it runs, else the own kernel), on GPU 0, for the head configurations
// of the profiled models at each TP degree (heads/tp, kv_heads/tp):
//   decode:  batch x context grid, one new token per sequence;
//   prefill: q_len new tokens over a cached context (q_len <= context), the chunks of chunked prefill.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "planner/cost/attention_grid.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/mla.hpp"
#include "profiler/kernels/quant.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/model_shapes.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/pacing.hpp"
#include "profiler/measure/shape_timing.hpp"

namespace peerplan::profiler {


namespace {

// The grid timed for each head configuration (issue 18) is planner/cost/attention_grid.hpp's
// attention_grid_plan (chosen offline on the study grid: scripts/attention_grid_design.py), with
// rows added where the kernels' launches step: cuDNN's waves of query tiles (attention_wave_rows)
// and the decode kernels' split plans (decode_regime_rows, mla_decode_regime_rows).
AttentionGridPlan make_grid(bool quick, int max_context) {
  // PEERPLAN_ATTENTION_GRID=study / fine-prefill: the studies the default grid is chosen from offline.
  return attention_grid_plan(quick, max_context, attention_grid_mode(std::getenv("PEERPLAN_ATTENTION_GRID")));
}

// Decode rows on both sides of each batch where decode_attention's launch steps
// (decode_attention_launch: split-K count, cluster, or one more wave of split blocks; waves x the
// longest chunk jumping by > 10 % at some grid context). Between grid rows such a step was
// interpolated across: batch 72 (576 blocks of 8 kv heads against one wave of 528) was priced
// 9-12 % low, batch 5 11-12 % (H200, 2026-12-04, session 7/8 profiles).
std::vector<int> decode_regime_rows(const AttentionGridPlan& grid, int heads, int kv, int hd, int sms) {
  return attention_launch_step_rows(grid, [&](int b, int c) {
    const kernels::DecodeLaunch l = kernels::decode_attention_launch(b, heads, hd, c, kv, sms);
    return LaunchSpan{double(l.waves) * l.chunk, l.cluster ? 1 : 0};
  });
}

// The same for mla_decode (its split count falls as 2 x SMs / batch: 16 heads, batch 52 -> 53 takes
// 4 splits instead of 5, +25 % per call at long context).
std::vector<int> mla_decode_regime_rows(const AttentionGridPlan& grid, int heads, int sms) {
  return attention_launch_step_rows(grid, [&](int b, int c) { return mla_decode_launch_span(b, heads, c, sms); });
}

// Prefill as the executor runs it: eager calls (prefill and mixed iterations are not graphs).
SampleStats time_eager(Context& ctx, gpu::Stream& s, gpu::BlockingGate& gate, const std::function<void()>& launch) {
  launch();  // first call outside timing (lazy module load, cuDNN graph build)
  s.synchronize();
  return time_compute_samples(ctx, s.device(), [&] { return gpu::time_region(&gate, s, {}, launch); });
}

// Decode as the executor runs it: inside a CUDA graph (decode steps are replayed graphs), `reps`
// calls back to back per region, as the GEMM rows. One launch per region put the event and gate
// latency into every small point (8B, batch 1, 256 tokens: 10.6 us, above batch 2's 7.6 us) and
// decode steps ran 5-7 % under their price (H200, 2026-12-04, session 8).
// `copies`: the calls rotate over that many inputs (launch(r) takes the call's index), and reps
// is rounded up so each is read equally often.
SampleStats time_in_graph(Context& ctx, gpu::Stream& s, gpu::BlockingGate& gate, const std::function<void(int)>& launch,
                          double est_s, int copies) {
  launch(0);  // first call outside timing (lazy module load)
  s.synchronize();
  int reps = std::clamp(int(200e-6 / std::max(est_s, 1e-6)), 1, 32);
  reps = copies * ((reps + copies - 1) / copies);
  gpu::CapturedGraph graph;
  graph.capture(s, [&] {
    for (int r = 0; r < reps; ++r) launch(r);
  });
  return time_compute_samples(ctx, s.device(), [&] { return gpu::time_region(&gate, s, {}, [&] { graph.launch(s); }); },
                              reps);
}

// One head configuration on GPU g: decode over (batch, context), then prefill chunks over
// (q_len, context), each grid plus its held-back points (indices into ms.attention in *held).
void time_config(Context& ctx, const AttentionGridPlan& grid, int g, int sms, gpu::Stream& s, gpu::BlockingGate& gate,
                 int heads, int kv, int hd, std::vector<size_t>* held) {
  const int max_ctx = grid.contexts.back();
  const int max_batch = grid.batches.back();
  const int max_q = std::max(grid.q_lens.back(), max_batch);
  const int64_t tokens = std::max<int64_t>(std::min<int64_t>(int64_t(max_batch) * max_ctx, grid.max_tokens), max_ctx);
  const size_t kv_elems = size_t(tokens) * kv * hd;
  gpu::DeviceBuffer kc(g, kv_elems * 2), vc(g, kv_elems * 2);
  gpu::launch_fill_bf16(kc.get(), kv_elems, 3, s);
  gpu::launch_fill_bf16(vc.get(), kv_elems, 4, s);
  const size_t q_rows = size_t(max_q);
  gpu::DeviceBuffer q(g, q_rows * heads * hd * 2), out(g, q_rows * heads * hd * 2);
  gpu::launch_fill_bf16(q.get(), q_rows * heads * hd, 5, s);
  gpu::DeviceBuffer lens(g, sizeof(int) * 1024), qstart(g, sizeof(int) * 2), slot0(g, sizeof(int));
  constexpr int64_t kMaxSlotSets = 64;
  gpu::DeviceBuffer slots(g, sizeof(int) * size_t(kMaxSlotSets) * size_t(std::max(max_batch, 1)));
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, g));
  CUDA_CHECK(cudaMemsetAsync(slot0.get(), 0, sizeof(int), s));
  s.synchronize();
  auto time_it = [&](const std::function<void()>& launch) { return time_eager(ctx, s, gate, launch); };
  auto time_graph = [&](const std::function<void(int)>& launch, double est_s, int copies) {
    return time_in_graph(ctx, s, gate, launch, est_s, copies);
  };
  auto decode = [&](int b, int c, bool held_back) {
    if (int64_t(b) * c > grid.max_tokens) return;
    std::vector<int> h(size_t(b), c);
    CUDA_CHECK(cudaMemcpy(lens.get(), h.data(), sizeof(int) * size_t(b), cudaMemcpyHostToDevice));
    size_t ws_bytes = kernels::decode_attention_workspace_bytes(b, heads, hd, c, kv, sms);
    gpu::DeviceBuffer ws(g, std::max<size_t>(ws_bytes, 256));
    kernels::DecodeAttention a;
    a.q = q.as<__nv_bfloat16>();
    a.q_row_stride = int64_t(heads) * hd;
    a.k_cache = kc.as<__nv_bfloat16>();
    a.v_cache = vc.as<__nv_bfloat16>();
    a.seq_lens = lens.as<int>();
    a.out = out.as<__nv_bfloat16>();
    a.workspace = ws.as<float>();
    a.batch = b; a.heads = heads; a.kv_heads = kv; a.head_dim = hd; a.max_ctx = c;
    const double kv_bytes = double(b) * c * kv * hd * 2.0 * 2.0;  // K and V, bf16
    // Consecutive calls read disjoint slots of the cache, as many sets as together exceed 4x the
    // L2: in a decode step every layer's weights pass through the L2 between two attention calls,
    // so their KV is never L2-resident. Calls on one set read a KV that fits the L2 from it
    // (Qwen1.5-MoE, 16 kv heads, batch 1 at 4k: 36 MB), and its decode steps at batch 1 and 2 ran
    // 12 % and 7 % over their price while batch 3-4 matched (H200, session 8 E).
    const int64_t sets = std::max<int64_t>(1, tokens / c / b);  // disjoint slot sets the buffers hold
    const int copies = int(std::clamp<double>(std::ceil(4.0 * l2_bytes / kv_bytes), 1.0,
                                              double(std::min<int64_t>(sets, kMaxSlotSets))));
    std::vector<int> sl(size_t(copies) * size_t(b));
    for (size_t i = 0; i < sl.size(); ++i) sl[i] = int(i);  // set j: slots j*b .. j*b + b - 1
    CUDA_CHECK(cudaMemcpy(slots.get(), sl.data(), sizeof(int) * sl.size(), cudaMemcpyHostToDevice));
    auto st = time_graph(
        [&](int r) {
          a.slots = slots.as<int>() + size_t(r % copies) * size_t(b);
          kernels::decode_attention(a, sms, s);
        },
        kv_bytes / 3e12 + 4e-6, copies);
    if (held_back) held->push_back(ctx.ms.attention.size());
    ctx.ms.attention.push_back({g, "decode", b, 1, c, heads, kv, hd, "bf16", st});
  };
  // Prefill as the executor calls it: a slot table (one sequence in slot 0), a cache of the
  // grid's largest context (the executor's cache capacity), the new tokens the last q_len.
  auto prefill = [&](int L, int c, bool held_back) {
    int qs[2] = {0, L};
    CUDA_CHECK(cudaMemcpy(lens.get(), &c, sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(qstart.get(), qs, sizeof qs, cudaMemcpyHostToDevice));
    kernels::PrefillAttention a;
    a.q = q.as<__nv_bfloat16>();
    a.q_row_stride = int64_t(heads) * hd;
    a.k_cache = kc.as<__nv_bfloat16>();
    a.v_cache = vc.as<__nv_bfloat16>();
    a.slots = slot0.as<int>();
    a.q_start = qstart.as<int>();
    a.seq_lens = lens.as<int>();
    a.out = out.as<__nv_bfloat16>();
    a.num_seqs = 1; a.max_q_len = L;
    a.heads = heads; a.kv_heads = kv; a.head_dim = hd; a.max_ctx = max_ctx;
    auto st = time_it([&] { kernels::prefill_attention(a, s); });
    if (held_back) held->push_back(ctx.ms.attention.size());
    ctx.ms.attention.push_back({g, "prefill", 1, L, c, heads, kv, hd, "bf16", st});
  };
  const bool steps = sms > 0 && !grid.quick;
  const AttentionGridPoints pts =
      attention_grid_points(grid, steps ? decode_regime_rows(grid, heads, kv, hd, sms) : std::vector<int>{},
                            steps ? attention_wave_rows(heads, sms, grid.q_lens.back()) : std::vector<int>{});
  for (auto [b, c, h] : pts.decode) decode(b, c, h);
  for (auto [L, c, h] : pts.prefill) prefill(L, c, h);
}

// MLA (docs/attention.md "MLA"): one of the two shapes of a rank of `heads` heads on GPU g, as the
// executor runs it (profiler/exec/engine_mla.cpp run_mla_attention), over its own phase's grid:
//   decode:  mla_decode over a latent cache [slots][max_ctx][576] (the absorbed MQA: heads over one
//            576-wide latent row, v 512), in a CUDA graph as decode steps; rows heads, kv_heads 1,
//            head_dim 576, v_dim 512. The grid's CUDA-graph batches (<= 256) and contexts under its
//            batch x context cap (2 Mi latent rows, 2.4 GB), and its held-back points.
//   prefill: mla_prefill_expand (the kv_b GEMM's output -> K [k_nope | k_pe], V [v | 0], 192 wide)
//            then prefill_attention at head_dim 192 over that scratch (cuDNN where it runs), eager;
//            the op's time is both launches, as the executor's attn_prefill. Rows heads = kv_heads,
//            head_dim 192, v_dim 128. One sequence in a scratch of one slot (the executor's holds up
//            to 16: the same per-sequence extents), the grid's q_lens and contexts.
// Decode rows at mla_decode's split-count steps (mla_decode_regime_rows), prefill rows at wave boundaries.
void time_mla_config(Context& ctx, const AttentionGridPlan& grid, int g, int sms, gpu::Stream& s, gpu::BlockingGate& gate,
                     int heads, bool prefill_phase, std::vector<size_t>* held) {
  namespace kn = peerplan::kernels;
  const int max_ctx = grid.contexts.back();
  const int max_batch = grid.batches.back();
  // The softmax scale of the executor's synthetic run (no YaRN mscale: the time does not depend on it).
  const float scale = kn::mla_softmax_scale(kn::kMlaQkNope, kn::kMlaRope, 0, 1);
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, g));
  const bool steps = sms > 0 && !grid.quick;
  const AttentionGridPoints pts =
      attention_grid_points(grid, !prefill_phase && steps ? mla_decode_regime_rows(grid, heads, sms) : std::vector<int>{},
                            prefill_phase && steps ? attention_wave_rows(heads, sms, grid.q_lens.back()) : std::vector<int>{});
  if (!prefill_phase) {
    const int64_t tokens = std::max<int64_t>(std::min<int64_t>(int64_t(max_batch) * max_ctx, grid.max_tokens), max_ctx);
    int max_rows = max_batch;
    for (auto [b, c, h] : pts.decode) max_rows = std::max(max_rows, b);
    gpu::DeviceBuffer cache(g, size_t(tokens) * kn::kMlaRow * 2);
    gpu::launch_fill_bf16(cache.get(), size_t(tokens) * kn::kMlaRow, 3, s);
    const size_t q_elems = size_t(max_rows) * size_t(heads) * kn::kMlaRow;
    gpu::DeviceBuffer q(g, q_elems * 2), out(g, size_t(max_rows) * size_t(heads) * kn::kMlaLatent * 2);
    gpu::launch_fill_bf16(q.get(), q_elems, 5, s);
    constexpr int64_t kMaxSlotSets = 64;
    gpu::DeviceBuffer lens(g, sizeof(int) * size_t(max_rows)),
        slots(g, sizeof(int) * size_t(kMaxSlotSets) * size_t(max_rows));
    s.synchronize();
    for (const auto& pt : pts.decode) {
      const int b = std::get<0>(pt), c = std::get<1>(pt);  // named copies: the graph's lambda captures b
      const bool held_back = std::get<2>(pt);
      if (int64_t(b) * c > grid.max_tokens) continue;
      std::vector<int> h(size_t(b), c);
      CUDA_CHECK(cudaMemcpy(lens.get(), h.data(), sizeof(int) * size_t(b), cudaMemcpyHostToDevice));
      gpu::DeviceBuffer ws(g, std::max<size_t>(kn::mla_decode_workspace_bytes(b, heads, c, sms), 256));
      kn::MlaDecode d;
      d.q = q.as<__nv_bfloat16>();
      d.q_row_stride = int64_t(heads) * kn::kMlaRow;
      d.cache = cache.as<__nv_bfloat16>();
      d.seq_lens = lens.as<int>();
      d.out = out.as<__nv_bfloat16>();
      d.workspace = ws.as<float>();
      d.batch = b, d.heads = heads, d.max_ctx = c, d.scale = scale;
      // Cold latent rows, as decode_attention's rows read (time_config: consecutive calls on disjoint
      // slot sets together over 4x the L2; in a step every layer's weights pass between two calls).
      const double cache_bytes = double(b) * c * kn::kMlaRow * 2.0;
      const int64_t sets = std::max<int64_t>(1, tokens / c / b);
      const int copies = int(std::clamp<double>(std::ceil(4.0 * l2_bytes / cache_bytes), 1.0,
                                                double(std::min<int64_t>(sets, kMaxSlotSets))));
      std::vector<int> sl(size_t(copies) * size_t(b));
      for (size_t i = 0; i < sl.size(); ++i) sl[i] = int(i);  // set j: slots j*b .. j*b + b - 1
      CUDA_CHECK(cudaMemcpy(slots.get(), sl.data(), sizeof(int) * sl.size(), cudaMemcpyHostToDevice));
      const SampleStats st = time_in_graph(
          ctx, s, gate,
          [&](int r) {
            d.slots = slots.as<int>() + size_t(r % copies) * size_t(b);
            kn::mla_decode(d, sms, s);
          },
          cache_bytes / 3e12 + 4e-6, copies);
      if (held_back) held->push_back(ctx.ms.attention.size());
      AttentionTime a{g, "decode", b, 1, c, heads, 1, kn::kMlaRow, "bf16", st};
      a.v_dim = kn::kMlaLatent;
      ctx.ms.attention.push_back(a);
    }
    return;
  }
  // Prefill: the kv_b GEMM's output of the context's rows, the latent cache (k_pe), the expanded
  // scratch, q as the q_b projection's [tokens][heads][192], the output [tokens][heads][192].
  const size_t kvb_elems = size_t(max_ctx) * size_t(heads) * kn::kMlaKvB;
  const size_t scratch_elems = size_t(heads) * size_t(max_ctx) * kn::kMlaQkDim;
  const int max_q = grid.q_lens.back();
  const size_t q_elems = size_t(max_q) * size_t(heads) * kn::kMlaQkDim;
  gpu::DeviceBuffer kvb(g, kvb_elems * 2), cache(g, size_t(max_ctx) * kn::kMlaRow * 2);
  gpu::DeviceBuffer kx(g, scratch_elems * 2), vx(g, scratch_elems * 2), q(g, q_elems * 2), out(g, q_elems * 2);
  gpu::launch_fill_bf16(kvb.get(), kvb_elems, 6, s);
  gpu::launch_fill_bf16(cache.get(), size_t(max_ctx) * kn::kMlaRow, 7, s);
  gpu::launch_fill_bf16(q.get(), q_elems, 5, s);
  // Zeros, as the executor's scratch (allocate_mla): rows past a context must be finite.
  CUDA_CHECK(cudaMemsetAsync(kx.get(), 0, kx.bytes(), s));
  CUDA_CHECK(cudaMemsetAsync(vx.get(), 0, vx.bytes(), s));
  gpu::DeviceBuffer lens(g, sizeof(int)), qstart(g, sizeof(int) * 2), ctxstart(g, sizeof(int) * 2), slot0(g, sizeof(int));
  CUDA_CHECK(cudaMemsetAsync(slot0.get(), 0, sizeof(int), s));
  s.synchronize();
  for (auto [L, c, held_back] : pts.prefill) {
    const int qs[2] = {0, L}, cs[2] = {0, c};
    CUDA_CHECK(cudaMemcpy(lens.get(), &c, sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(qstart.get(), qs, sizeof qs, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(ctxstart.get(), cs, sizeof cs, cudaMemcpyHostToDevice));
    kn::MlaPrefillExpand e;
    e.kv_b = kvb.as<__nv_bfloat16>();
    e.kv_b_row_stride = int64_t(heads) * kn::kMlaKvB;
    e.cache = cache.as<__nv_bfloat16>();
    e.slots = slot0.as<int>();
    e.ctx_start = ctxstart.as<int>();
    e.k_out = kx.as<__nv_bfloat16>();
    e.v_out = vx.as<__nv_bfloat16>();
    e.total_ctx = c;
    e.num_seqs = 1, e.heads = heads, e.max_ctx = max_ctx, e.cache_max_ctx = max_ctx;
    kn::PrefillAttention p;
    p.q = q.as<__nv_bfloat16>();
    p.q_row_stride = int64_t(heads) * kn::kMlaQkDim;
    p.k_cache = kx.as<__nv_bfloat16>();
    p.v_cache = vx.as<__nv_bfloat16>();
    p.slots = slot0.as<int>();  // the executor's identity table of its scratch (mla_ident)
    p.q_start = qstart.as<int>();
    p.seq_lens = lens.as<int>();
    p.out = out.as<__nv_bfloat16>();
    p.num_seqs = 1, p.max_q_len = L;
    p.heads = p.kv_heads = heads;
    p.head_dim = kn::kMlaQkDim;
    p.max_ctx = max_ctx;
    p.num_slots = 1;
    p.scale = scale;
    const SampleStats st = time_eager(ctx, s, gate, [&] {
      kn::mla_prefill_expand(e, s);
      kn::prefill_attention(p, s);
    });
    if (held_back) held->push_back(ctx.ms.attention.size());
    AttentionTime a{g, "prefill", 1, L, c, heads, heads, kn::kMlaQkDim, "bf16", st};
    a.v_dim = kn::kMlaVDim;
    ctx.ms.attention.push_back(a);
  }
}

}  // namespace

void time_attention_shapes(Context& ctx, const std::set<AttentionShapeKey>& keys, int64_t max_context) {
  std::set<std::tuple<int, int, int>> configs;
  std::set<std::pair<int, bool>> mla;  // (heads, prefill): MLA's absorbed decode / expanded prefill
  for (const AttentionShapeKey& k : keys) {
    if (k.kv_dtype != "bf16") {  // the grid below reads a bf16 cache
      ctx.not_applicable(fmt::format("attention heads {} kv {} dim {} ({} KV cache)", k.heads, k.kv_heads, k.head_dim,
                                     k.kv_dtype),
                         "the profiler times attention over a bf16 KV cache");
      continue;
    }
    if (attention_v_dim(k.v_dim, k.head_dim) != k.head_dim) {  // MLA: one of its two shapes (attention_shape_key)
      const bool dec = k.phase == "decode" && k.kv_heads == 1 && k.head_dim == kernels::kMlaRow &&
                       k.v_dim == kernels::kMlaLatent;
      const bool pre = k.phase == "prefill" && k.kv_heads == k.heads && k.head_dim == kernels::kMlaQkDim &&
                       k.v_dim == kernels::kMlaVDim;
      std::string why = kernels::mla_shape_refusal(kernels::kMlaLatent, kernels::kMlaRope, kernels::kMlaQkNope,
                                                   kernels::kMlaVDim, int(k.heads), false);
      if (why.empty() && !dec && !pre)
        why = fmt::format("v_dim {} with head_dim {} ({}): the executor runs MLA's absorbed decode (kv heads 1, 576 / 512) "
                          "and expanded prefill (kv heads = heads, 192 / 128) only",
                          k.v_dim, k.head_dim, k.phase.empty() ? "both phases" : k.phase);
      if (why.empty()) mla.insert({int(k.heads), pre});
      else
        ctx.not_applicable(fmt::format("attention heads {} kv {} dim {} v {}", k.heads, k.kv_heads, k.head_dim, k.v_dim),
                           why);
      continue;
    }
    const std::string why = kernels::attention_shape_refusal(int(k.heads), int(k.kv_heads), int(k.head_dim),
                                                             kernels::prefill_attention_path());  // bf16 cache
    if (why.empty()) configs.insert({int(k.heads), int(k.kv_heads), int(k.head_dim)});
    else ctx.not_applicable(fmt::format("attention heads {} kv {} dim {}", k.heads, k.kv_heads, k.head_dim), why);
  }
  if (configs.empty() && mla.empty()) return;
  const AttentionGridPlan grid = make_grid(ctx.plan.quick, int(max_context));
  const int g = ctx.measured_gpus().front();  // GPU 0, or an MPI rank's own GPU
  gpu::ScopedDevice dev(g);
  int sms = ctx.machine.gpus[size_t(g)].sm_count;
  gpu::Stream s(g);
  gpu::BlockingGate gate;
  size_t step = 0;
  std::vector<size_t> held;
  const double total = double(configs.size() + mla.size());
  for (auto [heads, kv, hd] : configs) {
    ctx.progress.update(double(step++) / total, fmt::format("heads {} kv {} dim {}", heads, kv, hd));
    time_config(ctx, grid, g, sms, s, gate, heads, kv, hd, &held);
  }
  for (auto [heads, prefill] : mla) {
    ctx.progress.update(double(step++) / total, fmt::format("MLA {} heads {}", prefill ? "prefill" : "decode", heads));
    time_mla_config(ctx, grid, g, sms, s, gate, heads, prefill, &held);
  }
  // Interpolation error at the held-back points (priced without any of them), by the rule the planner
  // prices with on this GPU: prefill through the wave model over its SMs (attention_from_table(..., sms)).
  const std::vector<double> err = attention_grid_holdout(ctx.ms.attention, held, sms);
  nlohmann::json hb = nlohmann::json::array();
  double worst = 0;
  int over = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    const AttentionTime& a = ctx.ms.attention[held[i]];
    hb.push_back({{"phase", a.phase}, {"batch", a.batch}, {"q_len", a.q_len}, {"context", a.context},
                  {"heads", a.heads}, {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim},
                  {"interpolation_error", std::isnan(err[i]) ? nlohmann::json() : nlohmann::json(err[i])}});
    if (a.v_dim > 0 && a.v_dim != a.head_dim) hb.back()["v_dim"] = a.v_dim;  // MLA's points
    if (!std::isnan(err[i])) worst = std::max(worst, std::abs(err[i]));
    if (!std::isnan(err[i]) && std::abs(err[i]) > 0.03) ++over;
  }
  nlohmann::json wave_rows = nlohmann::json::object();  // per head count: the rows added at wave boundaries
  nlohmann::json regime_rows = nlohmann::json::object();  // per head configuration: decode rows at launch steps
  for (auto [heads, kv, hd] : configs)
    if (!grid.quick && sms > 0) {
      wave_rows[fmt::format("heads {}", heads)] = attention_wave_rows(heads, sms, grid.q_lens.back());
      regime_rows[fmt::format("heads {} kv {} dim {}", heads, kv, hd)] = decode_regime_rows(grid, heads, kv, hd, sms);
    }
  for (auto [heads, prefill] : mla)
    if (!grid.quick && sms > 0) {
      if (prefill) wave_rows[fmt::format("heads {}", heads)] = attention_wave_rows(heads, sms, grid.q_lens.back());
      else regime_rows[fmt::format("MLA heads {}", heads)] = mla_decode_regime_rows(grid, heads, sms);
    }
  const std::string rule = sms > 0 ? fmt::format("prefill: wave model over {} SMs; decode: attended pairs", sms)
                                   : std::string("attended pairs (SM count unknown)");
  fmt::print(stderr, "attention grid: {} points, {} held back, worst interpolation error {:.1f} %, {} over 3 % (target 3 %; {})\n",
             ctx.ms.attention.size(), held.size(), 100 * worst, over, rule);
  ctx.ms.extra["attention"] = {
      {"gpu", g},
      {"kernels", "peerplan::kernels::decode_attention / prefill_attention (profiler/kernels)"},
      {"prefill_path", kernels::prefill_attention_last_path()},
      {"kv_layout", "[slots][kv_heads][max_ctx][head_dim]; decode: max_ctx = the context timed; prefill: one "
                    "sequence in slot 0 of a cache of the grid's largest context"},
      {"grid", {{"decode_batches", grid.batches}, {"contexts", grid.contexts}, {"prefill_q_lens", grid.q_lens},
                {"prefill_wave_rows", wave_rows}, {"decode_regime_rows", regime_rows}}},
      {"held_back", hb},
      {"held_back_rule", rule},
      {"worst_interpolation_error", worst}};
  if (!mla.empty()) {
    nlohmann::json shapes = nlohmann::json::array();
    for (auto [heads, prefill] : mla) shapes.push_back({{"heads", heads}, {"phase", prefill ? "prefill" : "decode"}});
    ctx.ms.extra["attention"]["mla"] = {
        {"shapes", shapes},
        {"decode", "peerplan::kernels::mla_decode over a latent cache [slots][context][576], kv_heads 1, head_dim 576, "
                   "v_dim 512, in a CUDA graph over cold slot sets; the grid's batches and contexts, rows at its split-count steps"},
        {"prefill", "peerplan::kernels::mla_prefill_expand + prefill_attention at head_dim 192 (v padded: v_dim 128), "
                    "both launches timed as the executor's attn_prefill; one sequence, scratch of one slot"}};
  }
}

void measure_attention(Context& ctx) {
  std::vector<ShapeNote> notes;
  const ShapeSet shapes = model_shape_set(load_profile_models(ctx.opts.models), ctx.gpus(), {"bf16"}, &notes);
  for (const ShapeNote& n : notes) ctx.not_applicable(n.what, n.why);
  if (shapes.attention.empty()) {
    ctx.not_applicable("attention", "no model with an attention shape the kernels run");
    return;
  }
  time_attention_shapes(ctx, shapes.attention, shapes.attention_max_context);
}

}  // namespace peerplan::profiler
