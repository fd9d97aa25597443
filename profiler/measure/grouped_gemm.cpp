// Grouped expert GEMM times (issue 14) through the executor's own call (kernels/moe_expert_gemm.hpp's
// moe_expert_gemm, after a device routing by moe_route), on GPU 0, for every MoE model of the
// profile: each expert shape per TP degree with all experts local, and at TP 1 each EP shard of
// E/ep experts, over the token grid. Tokens are routed as the compiler counts them
// (planner/model/routing_model.hpp: uniform, the default seed; layer 0, and at decode sizes more
// layers, one per busiest-expert row count), so each entry records
// the rows, touched experts and busiest expert the time belongs to. gate_up gathers its tokens,
// down reads its rows in sorted order, as in the executor. Weights rotate over copies that
// together exceed L2, so each call reads its experts from HBM as a decode step does.
// Token counts up to the largest CUDA-graph batch are decode steps, which the executor replays as
// graphs: the grouped kernel, timed behind a gate. Above it the call is an eager iteration's, and
// moe_expert_gemm may take cuBLASLt per expert (profiler/common/moe_cublas_rule.hpp): then it is
// timed as the executor pays it, the offsets' copy, the host synchronisation and the launches after
// it included (no gate: the synchronisation would wait for the gate's spin kernel).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "planner/model/model_config.hpp"
#include "planner/model/routing_model.hpp"
#include "profiler/common/dispatch_formats.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/quant_shapes.hpp"
#include "profiler/common/mxfp4_expert_layout.hpp"
#include "profiler/common/sweep.hpp"
#include "profiler/common/w4_expert_layout.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/kernels/moe_expert_gemm.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/moe_route.hpp"
#include "profiler/kernels/quant.hpp"
#include "profiler/common/model_shapes.hpp"
#include "planner/compile/graph_batch.hpp"
#include "profiler/common/moe_cublas_rule.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/pacing.hpp"
#include "profiler/measure/shape_timing.hpp"

namespace peerplan::profiler {

namespace kn = peerplan::kernels;

// Token counts up to this (decode batches) are timed under several layers' routings, at most this
// many, each with another busiest-expert row count.
constexpr int64_t kDecodeRoutingTokens = 64;
constexpr int kRoutingsPerCount = 4;
// Token counts up to kGraphTimedMaxRows (planner/compile/graph_batch.hpp) are decode batches in CUDA
// graphs: the grouped kernel. Above, eager: moe_expert_gemm's choice.

void time_grouped_shapes(Context& ctx, const std::set<GroupedShapeKey>& keys, const std::vector<int64_t>& tokens) {
  const std::vector<int64_t> token_counts = grouped_token_counts(tokens);  // midpoints where cuBLAS runs
  std::set<GroupedShapeKey> shapes;
  for (const GroupedShapeKey& s : keys) {
    const std::optional<DType> dt = parse_dtype(s.dtype);
    const bool runs = s.dtype == "bf16" || s.dtype == "fp8" || s.dtype == "int8" || s.dtype == "int4" || s.dtype == "mxfp4";
    if (runs && kn::quant_grouped_shape_ok(*dt, s.n, s.k)) shapes.insert(s);
    else ctx.not_applicable(fmt::format("grouped_gemm n={} k={} ({})", s.n, s.k, s.dtype),
                            runs ? s.dtype + " experts need " + kn::quant_shape_rule(*dt, true)
                                 : std::string("the executor runs routed experts in bf16, fp8, int8, int4 and mxfp4 only"));
  }
  if (shapes.empty() || token_counts.empty()) return;
  const routing::RoutingSpec spec;  // uniform, default seed: what the compiler counts by default
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  int64_t max_topk = 1, max_e = 1, max_w = 0, max_in = 0, max_out = 0, max_scales = 0;
  int64_t max_w4_scales = 0, max_mx_scales = 0;
  bool any_fp8 = false, any_int8 = false, any_int4 = false, any_mx = false;
  for (const auto& s : shapes) {
    if (s.dtype == "fp8") any_fp8 = true, max_scales = std::max(max_scales, s.experts * s.n);
    if (s.dtype == "int8") any_int8 = true, max_scales = std::max(max_scales, s.experts * s.n);
    if (s.dtype == "int4") any_int4 = true, max_w4_scales = std::max(max_w4_scales, kn::w4e_scales(s.experts, s.n, s.k));
    if (s.dtype == "mxfp4") any_mx = true, max_mx_scales = std::max(max_mx_scales, kn::mxe_scales(s.experts, s.n, s.k));
    max_topk = std::max(max_topk, s.topk);
    max_e = std::max(max_e, s.model_experts);
    max_w = std::max(max_w, s.experts * s.n * s.k);
    max_in = std::max(max_in, max_tokens * s.topk * s.k);
    max_out = std::max(max_out, max_tokens * s.topk * s.n);
  }
  const int g = ctx.measured_gpus().front();
  gpu::ScopedDevice dev(g);
  gpu::Stream st(g);
  // Weight copies: enough that the experts consecutive calls touch together exceed 4x the L2 for
  // the fewest a call touches (one token's top-k), at most 8, within a quarter of free memory. They
  // were counted from all experts' bytes, which exceed the L2 by far, so a fine-grained MoE got one
  // copy and its decode calls re-read the same few experts: Qwen1.5-MoE's gate_up at one token
  // touches 4 experts, 46 MB, which the L2 held, and its decode steps at batch 1 and 2 ran 12 % and
  // 7 % over their price while batch 3-4 matched (H200, session 8 E).
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, g));
  int64_t min_touched = std::numeric_limits<int64_t>::max();
  auto wbytes = [](const GroupedShapeKey& s) { return dtype_bits(*parse_dtype(s.dtype)) / 8; };  // per weight
  for (const auto& s : shapes)
    min_touched = std::min(min_touched, int64_t(double(std::min(s.topk, s.experts) * s.n * s.k) * wbytes(s)));
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const int64_t want = (4 * int64_t(std::max(l2_bytes, 1)) + min_touched - 1) / std::max<int64_t>(min_touched, 1);
  // bf16 + fp8 + int8 + int4 + mxfp4 copies (2 + 1 + 1 + 0.5 + 0.5 bytes a weight; the 4-bit formats' scales are
  // 1/64 and 1/32 of their codes, inside the quarter's margin), in half-bytes
  const int64_t fit = int64_t(free_b / 4) * 2 /
                      std::max<int64_t>(1, max_w * (4 + (any_fp8 ? 2 : 0) + (any_int8 ? 2 : 0) + (any_int4 ? 1 : 0) +
                                                    (any_mx ? 1 : 0)));
  const int copies = int(std::clamp<int64_t>(std::min(want, fit), 1, 8));
  // FP8 / int8 experts: codes in copies of their own (finite e4m3 values, any int8) and one scale per expert
  // channel (shared: 4 bytes per n k-long row, < 0.4 % of the codes);
  // int4: packed codes and their bf16 scales (one per row and 128 k) in copies of their own: a decode step
  // reads each layer's scales cold, and with one shared scale buffer (L2-hot) the int4 rows priced Mixtral-
  // 8x7B's decode at batch 2-32 8-12 % fast (H100, session 24 K).
  // MXFP4: the same, e2m1 codes and e8m0 scale bytes (one per row and 32 k).
  std::vector<gpu::DeviceBuffer> w, w8, wi8, w4, w4s, wmx, wmxs;
  for (int c = 0; c < copies; ++c) {
    w.emplace_back(g, size_t(max_w) * 2);
    gpu::launch_fill_bf16(w.back().get(), size_t(max_w), 11 + uint32_t(c), st);
    if (any_int4) {
      w4.emplace_back(g, size_t(max_w / 8) * 4);
      kn::fill_random_u32(w4.back().as<uint32_t>(), max_w / 8, 23 + uint64_t(c), st);
      w4s.emplace_back(g, size_t(max_w4_scales) * 2);
      kn::fill_random(w4s.back().as<__nv_bfloat16>(), max_w4_scales, 29 + uint64_t(c), 1.f / 256, st);
    }
    if (any_mx) {
      wmx.emplace_back(g, size_t(max_w / 8) * 4);
      kn::fill_random_u32(wmx.back().as<uint32_t>(), max_w / 8, 37 + uint64_t(c), st);
      wmxs.emplace_back(g, size_t(max_mx_scales));
      kn::fill_random_e8m0(wmxs.back().as<uint8_t>(), max_mx_scales, 41 + uint64_t(c), st);
    }
    if (any_int8) {
      wi8.emplace_back(g, size_t(max_w));
      kn::fill_random_int8(wi8.back().as<int8_t>(), max_w, 31 + uint64_t(c), st);
    }
    if (!any_fp8) continue;
    w8.emplace_back(g, size_t(max_w));
    kn::fill_random_fp8(w8.back().as<uint8_t>(), max_w, 17 + uint64_t(c), st);
  }
  const bool any_w8 = any_fp8 || any_int8;
  gpu::DeviceBuffer w8_scale = any_w8 ? gpu::DeviceBuffer(g, size_t(max_scales) * 4) : gpu::DeviceBuffer();
  if (any_w8) kn::fill_random_f32(w8_scale.as<float>(), max_scales, 19, 1.f / 8192, 1.f / 4096, st);
  gpu::DeviceBuffer x(g, size_t(max_in) * 2), y(g, size_t(max_out) * 2), logits(g, size_t(max_tokens * max_e) * 2);
  // gate_up's gathered rows on the cuBLAS path (the executor puts them behind the tokens in Z).
  const bool any_eager_gather = max_tokens > kGraphTimedMaxRows &&
                                std::any_of(shapes.begin(), shapes.end(), [](const GroupedShapeKey& s) { return s.gather; });
  gpu::DeviceBuffer xg = any_eager_gather ? gpu::DeviceBuffer(g, size_t(max_in) * 2) : gpu::DeviceBuffer();
  gpu::launch_fill_bf16(x.get(), size_t(max_in), 3, st);
  gpu::launch_fill_bf16(logits.get(), size_t(max_tokens * max_e), 5, st);
  gpu::DeviceBuffer rbuf;
  gpu::BlockingGate gate;
  nlohmann::json kinds = nlohmann::json::array();  // every kernel at small groups: the choice's evidence
  nlohmann::json vs_cublas = nlohmann::json::array();
  nlohmann::json paths = nlohmann::json::array();  // the eager rows' path (moe_expert_gemm)
  gpu::GemmRunner cublas(g);
  gpu::QuantGemmRunner qcublas(g);
  size_t done = 0;
  const size_t total = shapes.size() * token_counts.size();
  for (const auto& s : shapes) {
    rbuf = gpu::DeviceBuffer(g, size_t(kn::moe_route_buffer_ints(max_tokens, int(s.topk), int(s.experts))) * 4);
    const kn::MoeRouting r = kn::moe_routing_view(rbuf.as<int>(), max_tokens, int(s.topk), int(s.experts));
    const bool fp8 = s.dtype == "fp8", int8 = s.dtype == "int8", int4 = s.dtype == "int4", mx = s.dtype == "mxfp4";
    for (int64_t tokens : token_counts) {
      ctx.progress.update(double(done++) / double(total), fmt::format("grouped n={} k={} experts={}/{} {} tokens={}", s.n,
                                                                      s.k, s.experts, s.model_experts, s.dtype, tokens));
      // Layer 0's routing, and at decode sizes the first layers whose busiest expert holds another
      // row count: that count picks the kernel for the whole call (moe_gemm_tile_kind, the gemv's
      // rows per pass), and each layer routes its own way. With layer 0's alone (DeepSeek-V2-Lite at
      // 8 tokens: busiest 2 rows, while 23 of 27 layers have 3-5), the other layers were priced from
      // a kernel they do not run, and decode steps at batch 8 ran ~1.2x their price (session 8 D).
      std::vector<int> layers = {0};
      if (tokens <= kDecodeRoutingTokens) {
        std::set<int64_t> seen = {routing::group_load(routing::expert_counts(spec, s.model_experts, s.topk, tokens, 0),
                                                      0, s.experts).max_rows};
        for (int layer = 1; layer < 64 && layers.size() < size_t(kRoutingsPerCount); ++layer) {
          const int64_t mr = routing::group_load(routing::expert_counts(spec, s.model_experts, s.topk, tokens, layer),
                                                 0, s.experts).max_rows;
          if (seen.insert(mr).second) layers.push_back(layer);
        }
      }
      for (int layer : layers) {
        const auto& counts = routing::expert_counts(spec, s.model_experts, s.topk, tokens, layer);
        const routing::GroupLoad load = routing::group_load(counts, 0, s.experts);
        if (load.rows == 0) continue;  // no row reaches rank 0's experts: the executor runs nothing
        kn::MoeRouteArgs ra;
        ra.logits = logits.as<__nv_bfloat16>();
        ra.tokens = tokens, ra.experts = int(s.model_experts), ra.topk = int(s.topk);
        ra.expert_first = 0, ra.expert_count = int(s.experts);
        ra.seed = spec.seed, ra.layer = layer;
        kn::moe_route(ra, r, st);
        kn::MoeExpertGemmArgs d;  // the executor's call (engine_moe.cpp), host figures from the routing model
        kn::MoeGemmArgs& a = d.gemm;
        a.x = x.as<__nv_bfloat16>();
        a.gather = s.gather ? r.token_of_row : nullptr;
        a.y = y.as<__nv_bfloat16>();
        a.n = s.n, a.k = s.k, a.entries = tokens * s.topk, a.max_rows = load.max_rows, a.touched = load.touched;
        d.rows = load.rows, d.x_rows = tokens;
        d.allow_cublas = tokens > kGraphTimedMaxRows;  // as the executor (engine_moe.cpp)
        d.cublas = &cublas;
        d.qcublas = &qcublas;
        if (s.gather && xg.get()) d.gathered = xg.as<__nv_bfloat16>(), d.gathered_cap = max_in;
        const double bytes = double(load.touched) * double(s.n * s.k) * wbytes(s);
        const double expect_s = std::max(2.0 * double(load.rows * s.n * s.k) / 400e12, bytes / 4e12) + 5e-6;
        const int reps = std::clamp(int(300e-6 / expect_s), 1, 64);
        // Every kernel once outside the gate: CUDA loads kernels lazily at their first launch, and a
        // load waits for the device, which the gate's spin kernel holds (the profile then failed
        // with "host stalled > 10 s" on its first grouped GEMM).
        // This call's weight copy c (bf16, or fp8 / int8 / int4 / mxfp4 codes with their scales).
        auto use_copy = [&](int c) {
          if (fp8) a.w = nullptr, a.w_fp8 = w8[size_t(c % copies)].as<uint8_t>(), a.w_scale = w8_scale.as<float>();
          else if (int8) a.w = nullptr, a.w_int8 = wi8[size_t(c % copies)].as<int8_t>(), a.w_scale = w8_scale.as<float>();
          else if (int4)
            a.w = nullptr, a.w_int4 = w4[size_t(c % copies)].as<uint32_t>(), a.w_int4_scale = w4s[size_t(c % copies)].as<__nv_bfloat16>();
          else if (mx)
            a.w = nullptr, a.w_mxfp4 = wmx[size_t(c % copies)].as<uint32_t>(), a.w_mxfp4_scale = wmxs[size_t(c % copies)].as<uint8_t>();
          else a.w = w[size_t(c % copies)].as<__nv_bfloat16>();
        };
        use_copy(0);
        const kn::MoeExpertPath path = kn::moe_expert_gemm_path(d, r, st);
        kn::moe_grouped_gemm(a, r, st);
        for (int kind = 0; kind < kn::kMoeTileKinds; ++kind) kn::moe_grouped_gemm_kind(a, r, kind, st);
        if (path != kn::MoeExpertPath::Grouped) kn::moe_expert_gemm(d, r, st);  // cuBLASLt's algorithm lookups
        st.synchronize();
        // kind -1: the executor's call (moe_expert_gemm); -2: the grouped kernel's own choice
        // (moe_grouped_gemm); 0..2: one grouped kernel forced.
        auto timed = [&](int kind) {
          int c = 0;
          const bool synchronising = kind == -1 && path != kn::MoeExpertPath::Grouped;
          auto region = [&] {
            return gpu::time_region(synchronising ? nullptr : &gate, st, {}, [&] {
              for (int i = 0; i < reps; ++i) {
                use_copy(c++);
                if (kind == -1) kn::moe_expert_gemm(d, r, st);
                else if (kind == -2) kn::moe_grouped_gemm(a, r, st);
                else kn::moe_grouped_gemm_kind(a, r, kind, st);
              }
            });
          };
          return time_compute_samples(ctx, g, region, reps);
        };
        ctx.ms.grouped_gemms.push_back({g, s.n, s.k, s.experts, s.topk, tokens, load.rows, load.touched, load.max_rows,
                                        s.dtype, timed(-1), path != kn::MoeExpertPath::Grouped, {}});
        // The cuBLAS path's rows of each touched local expert (rank 0 holds experts [0, experts)): the
        // pricer takes their expert_gemms times out of the row to get the path's fixed part.
        if (path != kn::MoeExpertPath::Grouped)
          for (int64_t e = 0; e < s.experts; ++e)
            if (counts[size_t(e)] > 0) ctx.ms.grouped_gemms.back().expert_rows.push_back(counts[size_t(e)]);
        const double dispatch_s = ctx.ms.grouped_gemms.back().time.median;
        if (d.allow_cublas)
          paths.push_back({{"n", s.n}, {"k", s.k}, {"dtype", s.dtype}, {"experts", s.experts}, {"tokens", tokens}, {"layer", layer},
                           {"rows", load.rows}, {"touched", load.touched}, {"max_rows", load.max_rows},
                           {"gflop_per_expert", kn::moe_gflop_per_expert({load.rows, load.touched, load.max_rows, s.n, s.k})},
                           {"path", kn::moe_expert_path_name(path)}, {"us", dispatch_s * 1e6}});
        if (layer == 0 && load.max_rows <= 256) {  // the kernels side by side where more than one is plausible (int4: kind 1 runs kind 0's kernel)
          nlohmann::json e = {{"n", s.n}, {"k", s.k}, {"dtype", s.dtype}, {"experts", s.experts}, {"tokens", tokens},
                              {"max_rows", load.max_rows}, {"chosen", kn::moe_gemm_tile_kind(load.max_rows, s.gather)},
                              {"path", kn::moe_expert_path_name(path)}};
          for (int kind = 0; kind < kn::kMoeTileKinds; ++kind)
            e[fmt::format("kind{}_us", kind)] = timed(kind).median * 1e6;
          e["weights_gbps"] = bytes / ctx.ms.grouped_gemms.back().time.median / 1e9;
          kinds.push_back(e);
        }
        if (layer == 0 && tokens >= 256 && (tokens & (tokens - 1)) == 0 && s.dtype == "bf16") {  // powers of two
          // cuBLASLt per touched expert over rows already sorted, with the group sizes known on the
          // host (what cuBLAS's grouped GEMM needs, and a device-side routing cannot give without a
          // synchronisation): the alternative for prefill-sized groups, recorded beside our kernel.
          struct Group {
            int64_t expert, first, rows;
          };
          std::vector<Group> groups;  // each touched expert: its index, first row and rows
          int64_t row = 0;
          for (int64_t e = 0; e < s.experts; ++e) {
            const int64_t c = counts[size_t(e)];
            if (c > 0) groups.push_back({e, row, c});
            row += c;
          }
          // At most ~256 launches behind the gate: the launch queue holds about a thousand, and a full
          // queue blocks the host while the spin kernel holds the GPU (the gate then times out).
          const int creps = std::clamp(int(256 / std::max<size_t>(groups.size(), 1)), 1, reps);
          int c = 0;
          auto enqueue = [&] {
            for (int i = 0; i < creps; ++i) {
              const auto* wc = w[size_t(c++ % copies)].as<__nv_bfloat16>();
              for (size_t q = 0; q < groups.size(); ++q)
                cublas.run(x.as<__nv_bfloat16>() + groups[q].first * s.k, wc + groups[q].expert * s.n * s.k,
                           y.as<__nv_bfloat16>() + groups[q].first * s.n, groups[q].rows, s.n, s.k, st);
            }
          };
          enqueue();  // cuBLASLt's algorithm lookups, outside the gate
          auto region = [&] {
            return gpu::time_region(&gate, st, {}, [&] {
              for (int i = 0; i < creps; ++i) {
                const auto* wc = w[size_t(c++ % copies)].as<__nv_bfloat16>();
                for (size_t q = 0; q < groups.size(); ++q)
                  cublas.run(x.as<__nv_bfloat16>() + groups[q].first * s.k, wc + groups[q].expert * s.n * s.k,
                             y.as<__nv_bfloat16>() + groups[q].first * s.n, groups[q].rows, s.n, s.k, st);
              }
            });
          };
          const SampleStats cublas_t = time_compute_samples(ctx, g, region, creps);
          // ours: the grouped kernel (timed again where the executor's call took cuBLAS); dispatch: the
          // executor's call, what the profile's row above holds (cuBLAS with the copy, sync and gather).
          const double ours_s = path == kn::MoeExpertPath::Grouped ? dispatch_s : timed(-2).median;
          vs_cublas.push_back({{"n", s.n}, {"k", s.k}, {"experts", s.experts}, {"tokens", tokens}, {"rows", load.rows},
                               {"ours_us", ours_s * 1e6},
                               {"cublas_per_expert_us", cublas_t.median * 1e6},
                               {"dispatch_us", dispatch_s * 1e6}, {"dispatch_path", kn::moe_expert_path_name(path)}});
        }
      }  // layers
    }
  }
  const char* env_gflop = std::getenv("PEERPLAN_MOE_CUBLAS_MIN_GFLOP");
  ctx.ms.extra["grouped_gemm"] = {
      {"gpu", g}, {"routing", spec.label()}, {"seed", spec.seed},
      {"layers", fmt::format("layer 0's routing; up to {} tokens also the first layers (of 64) whose busiest expert holds "
                             "another row count, up to {} routings per token count", kDecodeRoutingTokens, kRoutingsPerCount)},
      {"call", "peerplan::kernels::moe_expert_gemm after moe_route (the executor's call); weights rotate over " +
                   std::to_string(copies) + " copies"},
      {"dispatch", {{"function", "peerplan::kernels::moe_expert_gemm (profiler/kernels/moe_expert_gemm.hpp)"},
                    {"rule", kn::moe_cublas_rule_text()},
                    {"min_gflop", kn::moe_cublas_min_gflop()},
                    {"min_gflop_source", env_gflop && *env_gflop ? "PEERPLAN_MOE_CUBLAS_MIN_GFLOP" : "default"},
                    {"eager_tokens_above", kGraphTimedMaxRows},
                    {"timing", "tokens above eager_tokens_above: the executor's call as an eager iteration makes it; "
                               "on the cuBLAS path without the gate (the host synchronises inside the call), the "
                               "offsets' copy, the synchronisation and the launches after it included"},
                    {"paths", paths}}},
      {"layout", "y[rows,n] = x[rows,k] W_e^T per touched expert, W_e [n,k]; bf16, or fp8 e4m3 codes with one scale per expert channel (converted to bf16 in registers; the eager cuBLAS path runs FP8 W8A8 per expert), or int4 codes with a bf16 scale per row and 128 k, or mxfp4 e2m1 codes with an e8m0 scale per row and 32 k (both converted to bf16 in registers; the eager cuBLAS path dequantizes each touched expert to bf16), fp32 accumulate"},
      {"kernels", "0: stream 16-row tiles, 1: stream 32-row tiles, 2: tiled 64-row tiles (us per call, median)"},
      {"kernel_choice", kinds},
      {"vs_cublas_per_expert", vs_cublas}};
}

void measure_grouped_gemm(Context& ctx) {
  const auto models = load_profile_models(ctx.opts.models);
  const ShapeSet shapes = model_shape_set(models, ctx.gpus(), ctx.opts.dtypes);  // fp8 experts with --dtypes fp8
  if (shapes.grouped.empty()) {
    ctx.not_applicable("grouped_gemm", "no MoE model among the profiled models");
    return;
  }
  time_grouped_shapes(ctx, shapes.grouped, ctx.plan.tokens);
  time_expert_shapes(ctx, shapes.grouped, ctx.plan.tokens);  // the cuBLAS rows' per-expert part, same lease
  // A paced profile with the throttle by class: the MoE dispatch's own mixes (power_mix.cpp), after
  // the table so its rows do not follow seconds at the power cap.
  if (ctx.plan.duty < 1 && ctx.ms.power_throttle && !ctx.ms.power_throttle->mixes.empty()) {
    ctx.progress.update(1.0, "power throttle of the MoE dispatch (three mixes a model, expert format and token count, "
                             "~6 s each)");
    ctx.ms.power_throttle->grouped = measure_grouped_throttle(ctx.measured_gpus().front(), models, kThrottleMixTokens,
                                                              dispatch_formats(models, shapes.grouped));
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& m : models)
    if (m.is_moe()) names.push_back(m.name);
  ctx.ms.extra["grouped_gemm"]["models"] = names;
}

}  // namespace peerplan::profiler
