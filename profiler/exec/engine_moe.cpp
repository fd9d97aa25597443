// Routed MoE ops (issue 14), as fused-MoE engines run them: MoeRoute after the router GEMM (its
// logits in Y), the grouped expert GEMMs over the experts that received rows (gate_up gathers the
// routed tokens' normed hidden states from Z into Y; the activation writes Z; down reads Z in
// sorted order into Y), and MoeCombine (Y's rows, weighted, summed per token into Z, which the
// residual add consumes). Routing state lives on the device: no host synchronisation, so a decode
// step stays one CUDA graph; only an eager iteration's prefill-sized grouped GEMM reads the offsets
// back to run cuBLASLt per expert (kernels/moe_expert_gemm.hpp). The expert choice is
// planner/model/routing.hpp's, with the model's RoutingSpec (seed, skew: ModelConfig::moe_routing),
// so the executor runs what the compiler counted and the simulator priced.
#include <algorithm>
#include <functional>

#include "planner/core/error.hpp"
#include "planner/model/routing_model.hpp"
#include "profiler/common/moe_tiles.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/moe_expert_gemm.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/moe_route.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;

namespace {

std::string op_where(const Op& op) { return "executor: op " + op.name + " (layer " + std::to_string(op.layer) + ")"; }

}  // namespace

void Engine::ensure_moe_state(const Op& op, GpuState& g) {
  if (op.expert_count <= 0)
    throw RuntimeError(op_where(op) + " has no local experts (expert_count " + std::to_string(op.expert_count) +
                       "): planner/compile/compiler.cpp sets them on every MoE op");
  const int topk = int(cfg_.experts_per_token);
  const int64_t tokens = std::max({max_tokens_, padded_batch(kv_slots_), op.ew_rows}) + 8;
  if (g.moe_buf.get() && g.moe_cap_tokens >= tokens && g.moe.local_experts == int(op.expert_count)) return;
  g.moe_buf = gpu::DeviceBuffer(g.dev, size_t(kn::moe_route_buffer_ints(tokens, topk, int(op.expert_count))) * 4);
  CUDA_CHECK(cudaMemsetAsync(g.moe_buf.get(), 0, g.moe_buf.bytes(), g.stream));
  g.moe = kn::moe_routing_view(g.moe_buf.as<int>(), tokens, topk, int(op.expert_count));
  g.moe_cap_tokens = tokens;
  const std::vector<float> cdf = routing::routing_cdf(cfg_.moe_routing, cfg_.experts);  // empty: uniform
  if (!cdf.empty() && !g.moe_cdf.get()) {
    g.moe_cdf = gpu::DeviceBuffer(g.dev, cdf.size() * 4);
    CUDA_CHECK(cudaMemcpy(g.moe_cdf.get(), cdf.data(), cdf.size() * 4, cudaMemcpyHostToDevice));
  }
}

void Engine::run_moe_route(const Op& op, GpuState& g) {
  ensure_moe_state(op, g);
  if (op.ew_rows * op.ew_cols > g.cap_y)
    throw RuntimeError(op_where(op) + ": router logits [" + std::to_string(op.ew_rows) + "][" +
                       std::to_string(op.ew_cols) + "] exceed the Y scratch buffer");
  kn::MoeRouteArgs a;
  a.logits = g.Y.as<bf16>();
  a.tokens = op.ew_rows;
  a.experts = int(op.ew_cols);
  a.topk = int(cfg_.experts_per_token);
  a.expert_first = int(op.expert_first);
  a.expert_count = int(op.expert_count);
  a.seed = cfg_.moe_routing.seed;
  a.layer = op.layer;
  a.cdf = g.moe_cdf.get() ? g.moe_cdf.as<float>() : nullptr;
  kn::moe_route(a, g.moe, g.stream);
  g.moe_tokens = op.ew_rows;
}

bool Engine::gathers_tokens(const Op& op) {
  return op.name.size() < 4 || op.name.compare(op.name.size() - 4, 4, "down") != 0;
}

void Engine::run_grouped_gemm(const Op& op, GpuState& g) {
  if (!g.moe_buf.get() || g.moe.local_experts != int(op.expert_count))
    throw RuntimeError(op_where(op) + ": a grouped GEMM without a MoeRoute of the same " +
                       std::to_string(op.expert_count) + " local experts before it in the layer");
  const uint64_t seed = opt_.seed * 1000003 + std::hash<std::string>{}(op.name);
  const bf16* w_bf16 = nullptr;
  const gpu::QuantWeight* wq = nullptr;  // FP8, int8, int4 or MXFP4 experts
  if (op.wdtype == DType::FP8_E4M3 || op.wdtype == DType::INT8 || op.wdtype == DType::INT4 ||
      op.wdtype == DType::MXFP4) {
    // Every local expert as one [experts x n][k] weight: FP8 / int8 codes with one scale per output channel; int4
    // packed as w4_expert_layout.hpp says, n * k / 8 words and n * k / 128 bf16 scales an expert, the same
    // counts as a [experts x n][k] W4A16 weight, so its random codes and scales serve; MXFP4 likewise (n * k / 8
    // words and n * k / 32 scale bytes an expert, mxfp4_expert_layout.hpp). (The engine's shape
    // check, quant_shapes.hpp, refused shards the int4 packing cannot take before any weight was made.)
    const int64_t rows = op.n * op.expert_count;
    auto q = g.qweights.find(op.name);
    if (q == g.qweights.end() || q->second.dtype != op.wdtype || q->second.n < rows || q->second.k != op.k) {
      const auto scaling = op.wdtype == DType::FP8_E4M3 ? gpu::Fp8Scaling::PerChannel : gpu::Fp8Scaling::PerTensor;
      gpu::QuantWeight w = gpu::make_random_quant_weight(g.dev, op.wdtype, scaling, rows, op.k, seed, g.stream);
      q = g.qweights.insert_or_assign(op.name, std::move(w)).first;
      settle_new_weights(g);
    }
    wq = &q->second;
  } else if (op.wdtype == DType::BF16 || op.wdtype == DType::FP16) {
    auto it = g.weights.find(op.name);
    const int64_t welems = op.n * op.k * op.expert_count;  // every local expert, allocated once
    if (it == g.weights.end() || int64_t(it->second.bytes()) < welems * 2) {
      gpu::DeviceBuffer w(g.dev, size_t(welems) * 2);
      kn::fill_random(w.as<bf16>(), welems, seed, 0.02f, g.stream);
      it = g.weights.insert_or_assign(op.name, std::move(w)).first;
    }
    w_bf16 = it->second.as<bf16>();
  } else {
    throw RuntimeError(op_where(op) + ": routed experts in " + dtype_name(op.wdtype) +
                       " do not run (the executor runs bf16, fp16, FP8, int8, int4 and MXFP4 experts)");
  }
  const int topk = int(cfg_.experts_per_token);
  const int64_t entries = g.moe_tokens * topk;
  // gate_up gathers each routed row's token from the normed hidden states (Z); down reads the
  // activation rows (Z) in their sorted order. Both write sorted rows into Y.
  const bool gather = gathers_tokens(op);
  if (entries * op.n > g.cap_y || entries * op.k > g.cap_z)
    throw RuntimeError(op_where(op) + ": " + std::to_string(entries) + " routed rows x [" + std::to_string(op.k) +
                       "," + std::to_string(op.n) + "] exceed the Y/Z scratch buffers");
  kn::MoeExpertGemmArgs d;
  kn::MoeGemmArgs& a = d.gemm;
  // down reads the activation rows where gate_up's epilogue left them (act_epilogue), else in Z.
  a.x = !gather && g.moe_act ? g.moe_act : g.Z.as<bf16>();
  if (!gather) g.moe_act = nullptr;
  a.gather = gather ? g.moe.token_of_row : nullptr;
  a.w = w_bf16;
  if (wq && wq->dtype == DType::FP8_E4M3) a.w_fp8 = wq->codes.as<uint8_t>(), a.w_scale = wq->scales.as<float>();
  if (wq && wq->dtype == DType::INT8) a.w_int8 = wq->codes.as<int8_t>(), a.w_scale = wq->scales.as<float>();
  if (wq && wq->dtype == DType::INT4) a.w_int4 = wq->codes.as<uint32_t>(), a.w_int4_scale = wq->scales.as<bf16>();
  if (wq && wq->dtype == DType::MXFP4) a.w_mxfp4 = wq->codes.as<uint32_t>(), a.w_mxfp4_scale = wq->scales.as<uint8_t>();
  a.y = g.Y.as<bf16>();
  a.n = op.n;
  a.k = op.k;
  a.entries = entries;
  a.max_rows = op.group_max_rows;
  a.touched = op.batch_count;
  // The grouped kernel, or in an eager iteration with prefill-sized groups cuBLASLt per expert
  // (moe_use_cublas on the compiler's figures; inside a CUDA graph capture always the grouped
  // kernel). gate_up's gathered rows go behind the tokens in Z (aligned to 256 bytes): Z holds the
  // routed tokens' rows [0, T x k) the gather reads and nothing read later (the activation writes
  // Z anew); where the rest of Z is too small the call stays grouped.
  d.rows = op.m;
  d.x_rows = g.moe_tokens;
  d.cublas = g.gemm.get();
  d.qcublas = g.qgemm.get();
  d.allow_cublas = g.moe_tokens > kGraphTimedMaxRows;  // where the profile times the dispatch
  if (gather) {
    const int64_t first = gathered_first(g.moe_tokens, op.k);  // elements (scratch_needs sizes Z for it)
    d.gathered = g.Z.as<bf16>() + first;
    d.gathered_cap = std::max<int64_t>(0, g.cap_z - first);
  }
  if (op.act_epilogue) return run_gate_up_with_act(op, g, d);
  kn::moe_expert_gemm(d, g.moe, g.stream);
}

void Engine::run_gate_up_with_act(const Op& op, GpuState& g, kn::MoeExpertGemmArgs& d) {
  // SiLU(gate) * up in the gemv's epilogue (planner/compile/act_fusion.hpp), written at the end of Y (256-byte
  // aligned) where down's output rows [entries][hidden] at Y's start cannot reach it while down reads it; Z
  // holds the tokens gate_up gathers, so it cannot go there. Where the gemv does not take the call (an
  // override, or no room), the GEMM into Y and the activation kernel into Z, as an activation op would.
  kn::MoeGemmArgs& a = d.gemm;
  const int64_t entries = a.entries, inter = op.n / 2;
  const int64_t at = (g.cap_y - entries * inter) / 128 * 128;
  const bool room = op.n % 2 == 0 && at >= entries * cfg_.hidden;
  if (room && kn::moe_gemm_act_takes(a, kn::moe_gemm_tile_kind(a.max_rows, a.gather != nullptr)) &&
      kn::moe_expert_gemm_path(d, g.moe, g.stream) == kn::MoeExpertPath::Grouped) {
    a.act = g.Y.as<bf16>() + at;
    kn::moe_expert_gemm(d, g.moe, g.stream);
    g.moe_act = a.act;
    return;
  }
  kn::moe_expert_gemm(d, g.moe, g.stream);
  kn::silu_mul(g.Y.as<bf16>(), g.Z.as<bf16>(), std::max<int64_t>(1, op.m), inter, g.stream);
  g.moe_act = nullptr;
}

void Engine::run_moe_combine(const Op& op, GpuState& g) {
  if (!g.moe_buf.get()) throw RuntimeError(op_where(op) + ": a combine without a MoeRoute before it");
  if (op.ew_rows != g.moe_tokens)
    throw RuntimeError(op_where(op) + ": combines " + std::to_string(op.ew_rows) + " tokens, routed " +
                       std::to_string(g.moe_tokens));
  if (op.ew_rows * op.ew_cols > g.cap_z)
    throw RuntimeError(op_where(op) + ": [" + std::to_string(op.ew_rows) + "][" + std::to_string(op.ew_cols) +
                       "] exceeds the Z scratch buffer");
  kn::moe_combine(g.moe, g.Y.as<bf16>(), g.Z.as<bf16>(), op.ew_rows, int(cfg_.experts_per_token), op.ew_cols,
                  g.stream);
}

}  // namespace peerplan::exec
