// The executor's elementwise kernels timed as a decode step runs them (issue 23; the profile's
// "elementwise" table, priced by planner/cost/elementwise_cost.*): the very calls
// profiler/exec/engine_ops.cpp run_elementwise and engine_moe.cpp run_moe_route / run_moe_combine
// issue, with the same arguments (rmsnorm, residual_add, qk_norm, rotary_and_cache into a bf16 cache,
// MLA's mla_rope_and_cache (engine_mla.cpp run_mla_rotary), silu_mul, moe_route, moe_combine), `reps`
// back to back captured in one CUDA graph, the graph
// replayed behind the blocking gate: time per call = region / reps, as the GEMM table. Small kernels
// take several microseconds each however few bytes they move (Qwen1.5-MoE decode ran 5.5 % slower
// than the bytes / HBM-bandwidth floor priced it), so the table holds what the graph really takes.
// One key per (kind, cols) of the models' ops (model_elementwise_shapes: the compiler's own ops at
// each TP degree) over the profile's token counts as rows, on GPU 0. Buffers are allocated once at
// the largest key and rows (profiler/common/elementwise_plan.*: the CPU half, tested in CI).
#include <algorithm>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/routing_model.hpp"
#include "profiler/common/elementwise_plan.hpp"
#include "profiler/common/model_shapes.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/mla.hpp"
#include "profiler/kernels/moe_route.hpp"
#include "profiler/kernels/qk_norm.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/pacing.hpp"
#include "profiler/measure/shape_timing.hpp"

namespace peerplan::profiler {

namespace kn = peerplan::kernels;
using bf16 = __nv_bfloat16;

namespace {

gpu::DeviceBuffer int_buffer(int g, const std::vector<int>& v) {
  gpu::DeviceBuffer d(g, std::max<size_t>(1, v.size()) * 4);
  if (!v.empty()) CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

void time_elementwise_shapes(Context& ctx, const std::set<ElementwiseShapeKey>& keyset, const std::vector<int64_t>& grid) {
  const std::vector<ElementwiseShapeKey> keys = elementwise_timing_keys(keyset);
  std::vector<int64_t> rows;
  for (int64_t r : grid)
    if (r > 0) rows.push_back(r);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  if (keys.empty() || rows.empty()) return;
  const ElementwiseBuffers b = elementwise_buffers(keys, rows);
  const int64_t R = b.max_rows;
  const int g = ctx.measured_gpus().front();
  gpu::ScopedDevice dev(g);
  gpu::Stream st(g);
  auto bf16_buffer = [&](int64_t n, uint32_t seed) {  // pseudo-random values, never zeros
    gpu::DeviceBuffer d(g, size_t(std::max<int64_t>(1, n)) * 2);
    if (n > 0) gpu::launch_fill_bf16(d.get(), size_t(n), seed, st);
    return d;
  };
  const gpu::DeviceBuffer X = bf16_buffer(b.hidden, 21), Z = bf16_buffer(b.z, 22), Y = bf16_buffer(b.y, 23),
                          qkv = bf16_buffer(b.qkv, 24), normw = bf16_buffer(b.norm_w, 25),
                          logits = bf16_buffer(b.logits, 26);
  gpu::DeviceBuffer kcache(g, size_t(std::max<int64_t>(1, b.cache)) * 2), vcache(g, size_t(std::max<int64_t>(1, b.cache)) * 2);
  CUDA_CHECK(cudaMemsetAsync(kcache.get(), 0, kcache.bytes(), st));
  CUDA_CHECK(cudaMemsetAsync(vcache.get(), 0, vcache.bytes(), st));
  // mla_rotary: the decoding tokens' absorbed query rows and the latent cache (engine_mla.cpp).
  const gpu::DeviceBuffer mla_q = bf16_buffer(b.mla_q, 27);
  gpu::DeviceBuffer latent(g, size_t(std::max<int64_t>(1, b.latent_cache)) * 2);
  CUDA_CHECK(cudaMemsetAsync(latent.get(), 0, latent.bytes(), st));
  // Rotary's positions and cache slots: a decode step's (one token per sequence) and a prefill
  // chunk's (consecutive positions), rotary_place.
  std::vector<int> dpos, dslot, ppos, pslot;
  for (int64_t t = 0; t < std::min(R, kEwDecodeRows); ++t) {
    const RotaryPlace p = rotary_place(t, 1, b.layout);
    dpos.push_back(p.position), dslot.push_back(p.slot);
  }
  for (int64_t t = 0; R > kEwDecodeRows && t < R; ++t) {
    const RotaryPlace p = rotary_place(t, R, b.layout);
    ppos.push_back(p.position), pslot.push_back(p.slot);
  }
  const gpu::DeviceBuffer dpos_d = int_buffer(g, dpos), dslot_d = int_buffer(g, dslot), ppos_d = int_buffer(g, ppos),
                          pslot_d = int_buffer(g, pslot);
  // The routing state (engine_moe.cpp ensure_moe_state): one buffer, zeroed once, viewed per key.
  int64_t route_ints = 1;
  for (const ElementwiseShapeKey& k : keys)
    if (k.topk > 0)
      route_ints = std::max(route_ints, kn::moe_route_buffer_ints(R, int(k.topk), int(k.local_experts)));
  gpu::DeviceBuffer rbuf(g, size_t(route_ints) * 4);
  CUDA_CHECK(cudaMemsetAsync(rbuf.get(), 0, rbuf.bytes(), st));
  st.synchronize();

  const routing::RoutingSpec spec;  // uniform, default seed: what the compiler counts by default
  gpu::BlockingGate gate;
  nlohmann::json timed = nlohmann::json::array(), refused = nlohmann::json::array();
  size_t done = 0;
  const size_t total = keys.size() * rows.size();
  for (const ElementwiseShapeKey& k : keys) {
    kn::MoeRouting route;
    if (k.topk > 0) route = kn::moe_routing_view(rbuf.as<int>(), R, int(k.topk), int(k.local_experts));
    kn::MoeRouteArgs ra;  // engine_moe.cpp run_moe_route; the model's experts are the op's cols
    ra.logits = logits.as<bf16>();
    ra.experts = int(k.experts), ra.topk = int(k.topk);
    ra.expert_first = 0, ra.expert_count = int(k.local_experts);
    ra.seed = spec.seed, ra.layer = 0, ra.cdf = nullptr;
    std::string why_not;
    double max_rows_gbps = 0;
    for (int64_t r : rows) {
      ctx.progress.update(double(done++) / double(total), fmt::format("elementwise {} cols={} rows={}", k.kind, k.cols, r));
      const ElementwiseCall c = elementwise_call(k, r);
      // The executor's call with its arguments (engine_ops.cpp run_elementwise, engine_moe.cpp).
      std::function<void()> call;
      if (k.kind == "rms_norm") {
        call = [&, r] { kn::rmsnorm(X.as<bf16>(), normw.as<bf16>(), Z.as<bf16>(), r, k.cols, 1e-5f, st); };
      } else if (k.kind == "add_rms_norm") {  // the block output in Z, the residual stream in X
        call = [&, r] { kn::add_rmsnorm(Z.as<bf16>(), X.as<bf16>(), normw.as<bf16>(), Z.as<bf16>(), r, k.cols, 1e-5f, st); };
      } else if (k.kind == "residual") {
        call = [&, r] { kn::residual_add(X.as<bf16>(), Z.as<bf16>(), r * k.cols, st); };
      } else if (k.kind == "qk_norm") {
        kn::QkNormArgs q;
        q.qkv = qkv.as<bf16>();
        q.row_stride = c.row_stride;
        q.q_weight = normw.as<bf16>();
        q.k_weight = q.q_weight + k.head_dim;
        q.tokens = r;
        q.heads = int(k.heads), q.kv_heads = int(k.kv_heads), q.head_dim = int(k.head_dim);
        q.eps = 1e-6f;
        call = [&, q] { kn::qk_norm(q, st); };
      } else if (k.kind == "rotary") {
        kn::RotaryCache rc;
        rc.qkv = qkv.as<bf16>();
        const bool decode = r <= kEwDecodeRows;
        rc.positions = (decode ? dpos_d : ppos_d).as<int>();
        rc.token_slot = (decode ? dslot_d : pslot_d).as<int>();
        rc.k_cache = kcache.as<bf16>();
        rc.v_cache = vcache.as<bf16>();
        rc.tokens = r;
        rc.heads = int(k.heads), rc.kv_heads = int(k.kv_heads), rc.head_dim = int(k.head_dim);
        rc.max_ctx = int(b.layout.ctx);
        call = [&, rc] { kn::rotary_and_cache(rc, st); };
      } else if (k.kind == "mla_rotary") {
        // engine_mla.cpp run_mla_rotary: a decode step (rows <= kEwDecodeRows) writes each head's
        // rotated q_pe into the absorbed 576-wide rows, a prefill chunk rotates it in place; the
        // latent row goes into the cache either way. Plain rope (theta), as the synthetic run.
        kn::MlaRopeCache mr;
        const bool decode = r <= kEwDecodeRows;
        mr.kv = Y.as<bf16>();
        mr.kv_row_stride = kn::kMlaRow;
        mr.q = qkv.as<bf16>();
        mr.q_row_stride = c.row_stride;
        mr.q_head_stride = kn::kMlaQkDim;
        mr.q_pe_offset = kn::kMlaQkNope;
        mr.q_out = decode ? mla_q.as<bf16>() : nullptr;
        mr.q_out_row_stride = k.heads * kn::kMlaRow;
        mr.norm_weight = normw.as<bf16>();
        mr.positions = (decode ? dpos_d : ppos_d).as<int>();
        mr.token_slot = (decode ? dslot_d : pslot_d).as<int>();
        mr.cache = latent.as<bf16>();
        mr.tokens = r;
        mr.heads = int(k.heads);
        mr.max_ctx = int(b.layout.ctx);
        call = [&, mr] { kn::mla_rope_and_cache(mr, st); };
      } else if (k.kind == "act") {
        call = [&, c] { kn::silu_mul(Y.as<bf16>(), Z.as<bf16>(), c.rows, c.cols, st); };
      } else if (k.kind == "moe_route") {
        kn::MoeRouteArgs a = ra;
        a.tokens = r;
        call = [&, a] { kn::moe_route(a, route, st); };
      } else if (k.kind == "moe_combine") {
        call = [&, r] { kn::moe_combine(route, Y.as<bf16>(), Z.as<bf16>(), r, int(k.topk), k.cols, st); };
      }
      try {
        // Once outside the graph: the kernel's argument checks, CUDA's lazy module load, and (for
        // moe_combine) the routing of these rows that it reads, as moe_route leaves it in a step.
        if (k.kind == "moe_combine") {
          kn::MoeRouteArgs a = ra;
          a.tokens = r;
          kn::moe_route(a, route, st);
        }
        call();
        st.synchronize();
      } catch (const gpu::GpuError&) {
        throw;
      } catch (const std::exception& e) {  // a shape the kernel refuses: noted, the other keys go on
        why_not = e.what();
        break;
      }
      const int reps = elementwise_reps(c);
      gpu::CapturedGraph graph;
      graph.capture(st, [&] {
        for (int i = 0; i < reps; ++i) call();
      });
      graph.launch(st);
      st.synchronize();
      auto region = [&] { return gpu::time_region(&gate, st, {}, [&] { graph.launch(st); }); };
      ctx.ms.elementwise.push_back({g, k.kind, r, k.cols, time_compute_samples(ctx, g, region, reps)});
      max_rows_gbps = c.bytes / ctx.ms.elementwise.back().time.median / 1e9;
    }
    ShapeSet one;
    one.elementwise.insert(k);
    nlohmann::json e = shapes_to_json(one)["elementwise"][0];
    if (!why_not.empty()) {
      ctx.not_applicable(fmt::format("elementwise {} cols={}", k.kind, k.cols), why_not);
      e["refused"] = why_not;
      refused.push_back(e);
    } else {
      e["gbps_at_max_rows"] = max_rows_gbps;
      timed.push_back(e);
    }
  }
  ctx.ms.extra["elementwise"] = {
      {"gpu", g},
      {"rows", rows},
      {"keys", timed},
      {"call", "the executor's kernels with its arguments (profiler/exec/engine_ops.cpp run_elementwise, "
               "engine_moe.cpp, engine_mla.cpp): rmsnorm (eps 1e-5), residual_add, qk_norm (eps 1e-6), "
               "rotary_and_cache (bf16 cache), mla_rope_and_cache (mla_rotary: plain rope, q_pe into the absorbed "
               "rows at decode, in place at prefill), silu_mul, moe_route (uniform routing, default seed, layer 0), "
               "moe_combine"},
      {"timing", "reps calls back to back captured in one CUDA graph, replayed behind the blocking gate; "
                 "time per call = region / reps (reps: about 200 us of kernels, 1..64)"},
      {"rotary_cache", fmt::format("[{} slots][kv_heads][{} positions][head_dim] bf16; rows <= {}: one token per "
                                   "slot (a decode step), more: consecutive positions (a prefill chunk)",
                                   b.layout.slots, b.layout.ctx, kEwDecodeRows)}};
  if (!refused.empty()) ctx.ms.extra["elementwise"]["refused"] = refused;
}

void measure_elementwise(Context& ctx) {
  const auto models = load_profile_models(ctx.opts.models);
  std::set<ElementwiseShapeKey> keys;
  std::vector<ShapeNote> notes;
  for (const ModelConfig& m : models) {
    const std::set<ElementwiseShapeKey> k = model_elementwise_shapes(m, ctx.gpus(), &notes);
    keys.insert(k.begin(), k.end());
  }
  for (const ShapeNote& n : notes) ctx.not_applicable(n.what, n.why);
  if (keys.empty()) {
    ctx.not_applicable("elementwise", "no elementwise shapes (no models given)");
    return;
  }
  time_elementwise_shapes(ctx, keys, ctx.plan.tokens);
  nlohmann::json names = nlohmann::json::array();
  for (const auto& m : models) names.push_back(m.name);
  ctx.ms.extra["elementwise"]["models"] = names;
}

}  // namespace peerplan::profiler
