// Attention kernel times of the executor's own kernels (profiler/kernels/attention.hpp), on GPU 0,
// for the head configurations of the profiled models at each TP degree (heads/tp, kv_heads/tp):
//   decode:  batch x context grid, one new token per sequence;
//   prefill: one sequence of q_len new tokens attending causally to itself (context = q_len).
#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "planner/model/model_config.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {


namespace {

// heads, kv_heads, head_dim per GPU of every profiled standard-attention model at each TP degree.
// A shape the kernels do not run (attention_support.hpp) is skipped with a note, never an error:
// the profile measures everything else.
std::set<std::tuple<int, int, int>> head_configs(Context& ctx) {
  std::set<std::tuple<int, int, int>> configs;
  for (const auto& m : load_profile_models(ctx.opts.models)) {
    if (m.mla) continue;  // MLA attention is not among the executor's kernels
    for (int tp : tp_degrees(m, ctx.gpus())) {
      const int heads = int(m.heads / tp), kv = int(std::max<int64_t>(1, m.kv_heads / tp)), hd = int(m.head_dim);
      const std::string why = kernels::attention_shape_refusal(heads, kv, hd);
      if (why.empty()) configs.insert({heads, kv, hd});
      else ctx.not_applicable(fmt::format("attention of {} at TP {}", m.name, tp), why);
    }
  }
  return configs;
}

// The grid timed for each head configuration.
struct AttentionGrid {
  std::vector<int> batches, contexts, prefill_lens;
  int64_t max_tokens = int64_t(1) << 19;  // batch x context cap: bounds the KV cache to a few GiB
};

// One head configuration on GPU g: the decode grid, then the prefill lengths.
void time_config(Context& ctx, const AttentionGrid& grid, int g, int sms, gpu::Stream& s, gpu::BlockingGate& gate,
                 int heads, int kv, int hd) {
  int max_ctx = std::max(grid.contexts.back(), grid.prefill_lens.back());
  int max_batch = grid.batches.back();
  size_t kv_elems = size_t(std::min<int64_t>(int64_t(max_batch) * max_ctx, grid.max_tokens + max_ctx)) * kv * hd;
  gpu::DeviceBuffer kc(g, kv_elems * 2), vc(g, kv_elems * 2);
  gpu::launch_fill_bf16(kc.get(), kv_elems, 3, s);
  gpu::launch_fill_bf16(vc.get(), kv_elems, 4, s);
  size_t q_rows = size_t(std::max(max_batch, grid.prefill_lens.back()));
  gpu::DeviceBuffer q(g, q_rows * heads * hd * 2), out(g, q_rows * heads * hd * 2);
  gpu::launch_fill_bf16(q.get(), q_rows * heads * hd, 5, s);
  gpu::DeviceBuffer lens(g, sizeof(int) * 1024), qstart(g, sizeof(int) * 2);
  s.synchronize();
  auto time_it = [&](const std::function<void()>& launch) {
    launch();  // first call outside timing (lazy module load)
    s.synchronize();
    for (int w = 0; w < ctx.plan.warmup; ++w) gpu::time_region(&gate, s, {}, launch);
    std::vector<double> t;
    for (int i = 0; i < ctx.plan.samples; ++i) t.push_back(gpu::time_region(&gate, s, {}, launch));
    return compute_stats(std::move(t));
  };
  for (int b : grid.batches)
    for (int c : grid.contexts) {
      if (int64_t(b) * c > grid.max_tokens) continue;
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
      auto st = time_it([&] { kernels::decode_attention(a, sms, s); });
      ctx.ms.attention.push_back({g, "decode", b, 1, c, heads, kv, hd, st});
    }
  for (int L : grid.prefill_lens) {
    int h_len = L;
    int qs[2] = {0, L};
    CUDA_CHECK(cudaMemcpy(lens.get(), &h_len, sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(qstart.get(), qs, sizeof qs, cudaMemcpyHostToDevice));
    kernels::PrefillAttention a;
    a.q = q.as<__nv_bfloat16>();
    a.q_row_stride = int64_t(heads) * hd;
    a.k_cache = kc.as<__nv_bfloat16>();
    a.v_cache = vc.as<__nv_bfloat16>();
    a.q_start = qstart.as<int>();
    a.seq_lens = lens.as<int>();
    a.out = out.as<__nv_bfloat16>();
    a.num_seqs = 1; a.max_q_len = L;
    a.heads = heads; a.kv_heads = kv; a.head_dim = hd; a.max_ctx = L;
    auto st = time_it([&] { kernels::prefill_attention(a, s); });
    ctx.ms.attention.push_back({g, "prefill", 1, L, L, heads, kv, hd, st});
  }
}

}  // namespace

void measure_attention(Context& ctx) {
  const auto configs = head_configs(ctx);
  if (configs.empty()) {
    ctx.not_applicable("attention", "no standard-attention model with a shape the kernels run");
    return;
  }
  const bool quick = ctx.plan.quick;
  AttentionGrid grid;
  grid.batches = quick ? std::vector<int>{1, 32} : std::vector<int>{1, 8, 32, 128};
  grid.contexts = quick ? std::vector<int>{512, 4096} : std::vector<int>{256, 1024, 4096, 16384};
  grid.prefill_lens = quick ? std::vector<int>{512} : std::vector<int>{128, 512, 2048, 8192};
  const int g = ctx.measured_gpus().front();  // GPU 0, or an MPI rank's own GPU
  gpu::ScopedDevice dev(g);
  int sms = ctx.machine.gpus[size_t(g)].sm_count;
  gpu::Stream s(g);
  gpu::BlockingGate gate;
  size_t step = 0;
  for (auto [heads, kv, hd] : configs) {
    ctx.progress.update(double(step++) / configs.size(), fmt::format("heads {} kv {} dim {}", heads, kv, hd));
    time_config(ctx, grid, g, sms, s, gate, heads, kv, hd);
  }
  ctx.ms.extra["attention"] = {{"gpu", g}, {"kernels", "peerplan::kernels::decode_attention / prefill_attention (profiler/kernels)"},
                               {"kv_layout", "[slots][kv_heads][max_ctx][head_dim], max_ctx = the context timed"}};
}

}  // namespace peerplan::profiler
