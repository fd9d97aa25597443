#include "planner/plan/sharding.hpp"

#include <cmath>

#include <fmt/format.h>

#include "planner/core/error.hpp"

namespace peerplan {

StageLayout stage_layout(const Plan& p, size_t stage) {
  const PlanStage& st = p.stages.at(stage);
  StageLayout l;
  bool replicated = p.ep > 1 && p.ep_attention == "replicated";
  l.tp = replicated ? 1 : st.tp;
  l.dp = replicated ? p.ep : 1;
  l.ep = p.ep;
  return l;
}

AttnShard attn_shard(const ModelConfig& c, const LayerFigures& layer, int tp) {
  AttnShard a;
  a.heads = c.heads / tp;
  if (c.mla) {
    // The latent cache is one "head" every rank keeps whole (vLLM replicates it across TP ranks).
    a.kv_heads = 1;
    a.qk_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
    a.v_dim = c.v_head_dim;
    a.rope_dim = c.qk_rope_head_dim;
    a.kv_bytes_per_token = layer.kv_bytes_per_token;
  } else {
    a.kv_heads = c.kv_heads >= tp ? c.kv_heads / tp : 1;  // replicated when tp > kv_heads
    a.qk_dim = a.v_dim = a.rope_dim = c.head_dim;
    a.kv_bytes_per_token = layer.kv_bytes_per_token / c.kv_heads * a.kv_heads;
  }
  return a;
}

int64_t local_experts(const Plan& p, size_t stage, int rank, const ModelConfig& cfg) {
  if (p.ep <= 1) return cfg.experts;
  (void)stage;  // expert e sits at the same rank position in every stage
  int gpu = p.stages.at(0).gpus.at(size_t(rank));
  int64_t n = 0;
  for (int g : p.expert_gpu) n += g == gpu;
  return n;
}

ExpertBlock expert_block(const Plan& p, size_t stage, int rank, const ModelConfig& cfg) {
  if (p.ep <= 1) return {0, cfg.experts};
  (void)stage;  // expert e sits at the same rank position in every stage
  const int gpu = p.stages.at(0).gpus.at(size_t(rank));
  ExpertBlock b{-1, 0};
  for (size_t e = 0; e < p.expert_gpu.size(); ++e) {
    if (p.expert_gpu[e] != gpu) continue;
    if (b.first < 0) b.first = int64_t(e);
    else if (int64_t(e) != b.first + b.count)
      throw InputError(p.name, "expert_gpu",
                       fmt::format("each GPU's experts as one contiguous block of expert ids (the executor routes and "
                                   "runs [first, first + count)); GPU {} holds experts {} and {} but not {}",
                                   gpu, b.first, e, b.first + b.count));
    ++b.count;
  }
  if (b.first < 0) b.first = 0;
  return b;
}

std::vector<MatrixShard> layer_shards(const Plan& p, size_t stage, int rank, const ModelConfig& cfg,
                                      const LayerFigures& layer) {
  StageLayout lay = stage_layout(p, stage);
  const int64_t tp = lay.tp;
  std::vector<MatrixShard> out;
  for (const auto& m : layer.matrices) {
    MatrixShard s{m.name, m.k, m.n, m.count, !m.per_token_active, m.format, m.bytes_per_param()};
    const std::string& n = m.name;
    if (n == "qkv") {
      AttnShard a = attn_shard(cfg, layer, int(tp));
      s.n = (a.heads + 2 * a.kv_heads) * cfg.head_dim;
    } else if (n == "q" || n == "q_b" || n == "kv_b" || n == "gate_up" || n == "up" || n == "shared.gate_up") {
      s.n = ceil_div(m.n, tp);  // column-parallel
    } else if (n == "o" || n == "down" || n == "shared.down") {
      s.k = ceil_div(m.k, tp);  // row-parallel
    } else if (n == "expert.gate_up" || n == "expert.down") {
      // MXFP4 experts split by TP keep each rank's intermediate a whole number of 64-k chunks, padded with
      // zeros as engines pad it at load (vLLM / SGLang round it up to 64 to 256 by kernel; the executor's
      // grouped kernels take k % 64): gpt-oss's 2880 at TP 2 is 1440 a rank, 1472 padded (+2.2 %), at TP 4
      // 720 -> 768 (+6.7 %). Priced, placed in memory and run padded.
      const int64_t pad = expert_shard_padding(m.format.dtype, tp);
      if (lay.ep > 1) {
        s.count = local_experts(p, stage, rank, cfg);
      } else if (n == "expert.gate_up") {
        s.n = pad > 1 ? 2 * round_up(ceil_div(m.n / 2, tp), pad) : ceil_div(m.n, tp);  // gate and up: 2 x intermediate
      } else {
        s.k = round_up(ceil_div(m.k, tp), pad);
      }
    }  // q_a, kv_a, router, shared_gate: replicated (small, or needed whole by every rank)
    out.push_back(s);
  }
  return out;
}

int64_t layer_weight_bytes(const Plan& p, size_t stage, int rank, const ModelConfig& cfg, const LayerFigures& layer) {
  int64_t matrix_params = 0;
  double shard_bytes = 0;
  for (const auto& m : layer.matrices) matrix_params += m.params();
  for (const auto& s : layer_shards(p, stage, rank, cfg, layer)) shard_bytes += s.bytes();
  return int64_t(std::llround(shard_bytes)) + (layer.params - matrix_params) * cfg.dtype_bytes;
}

void check_shardable(const Plan& p, const ModelConfig& cfg) {
  for (size_t s = 0; s < p.stages.size(); ++s) {
    int tp = stage_layout(p, s).tp;
    std::string field = fmt::format("stages/{}/tp", s);
    if (cfg.heads % tp != 0)
      throw InputError(p.name, field, fmt::format("a TP degree dividing the {} attention heads of {}, got {}",
                                                  cfg.heads, cfg.name, tp));
    if (!cfg.mla && cfg.kv_heads % tp != 0 && tp % cfg.kv_heads != 0)
      throw InputError(p.name, field,
                       fmt::format("a TP degree that divides the {} KV heads or is a multiple of them (KV heads are "
                                   "replicated when tp > kv_heads), got {}", cfg.kv_heads, tp));
  }
}

}  // namespace peerplan
