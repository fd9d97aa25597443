#include "profiler/common/gemm_shapes.hpp"

#include <algorithm>
#include <set>

#include "planner/model/expert_format.hpp"
#include "planner/plan/sharding.hpp"

namespace peerplan::profiler {

std::vector<int> tp_degrees(const ModelConfig& c, int max_tp) {
  std::vector<int> out;
  for (int tp = 1; tp <= std::max(1, max_tp); ++tp)
    if (c.heads > 0 && c.heads % tp == 0) out.push_back(tp);
  return out;
}

std::vector<WeightShape> weight_shapes(const ModelConfig& c, int max_tp) {
  std::vector<WeightShape> out;
  for (int tp : tp_degrees(c, max_tp)) {
    auto add = [&](const char* name, int64_t n, int64_t k, bool dense = false) {
      if (n > 0 && k > 0) out.push_back({name, tp, n, k, dense});
    };
    if (!c.mla) {
      int64_t q = c.heads * c.head_dim / tp;
      int64_t kv = std::max<int64_t>(1, c.kv_heads / tp) * c.head_dim;
      add("qkv", q + 2 * kv, c.hidden);
    } else {
      // MLA's projections as planner/plan/sharding.cpp shards them: q / q_b and kv_b column-parallel, q_a and
      // kv_a replicated. Not timed before session 31 (plan / simulate priced them from the roofline fit).
      const int64_t qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
      if (c.q_lora_rank > 0) {
        add("q_a", c.q_lora_rank, c.hidden);
        add("q_b", ceil_div(c.heads * qk, int64_t(tp)), c.q_lora_rank);
      } else {
        add("q", ceil_div(c.heads * qk, int64_t(tp)), c.hidden);
      }
      add("kv_a", c.kv_lora_rank + c.qk_rope_head_dim, c.hidden);
      add("kv_b", ceil_div(c.heads * (c.qk_nope_head_dim + c.v_head_dim), int64_t(tp)), c.kv_lora_rank);
    }
    int64_t o_in = c.heads * (c.mla && c.v_head_dim > 0 ? c.v_head_dim : c.head_dim) / tp;
    add("o", c.hidden, o_in);
    int64_t up = c.gated_mlp ? 2 : 1;
    if (c.intermediate > 0 && (!c.is_moe() || c.first_dense_layers > 0 || c.moe_layer_freq > 1)) {
      add("gate_up", up * c.intermediate / tp, c.hidden);
      add("down", c.hidden, c.intermediate / tp);
    }
    if (c.is_moe()) {
      // Experts are usually split by expert parallelism, but TP-split experts are a plan option too (MXFP4
      // ones padded per rank as layer_shards pads them, planner/plan/sharding.cpp).
      const int64_t pad = expert_shard_padding(routed_expert_format(c).value_or(DType::BF16), tp);
      const int64_t inter = round_up(c.expert_intermediate / tp, pad);
      add("expert.gate_up", up * inter, c.hidden);
      add("expert.down", c.hidden, inter);
      // Replicated, never quantized. Not timed before session 31: every MoE prediction from a profile priced
      // the router from the roofline fit (gpt-oss-20b: 0.7 us a layer priced; eager 5.6 us at 2 tokens,
      // 8.8 at 4, where it leaves the GEMV for cuBLASLt), unless validate measured it as a missing shape.
      add("router", c.experts, c.hidden, true);
      if (c.shared_intermediate > 0) {
        add("shared.gate_up", up * c.shared_intermediate / tp, c.hidden);
        add("shared.down", c.hidden, c.shared_intermediate / tp);
        if (c.shared_expert_gate) add("shared_gate", 1, c.hidden, true);
      }
    }
    add("lm_head", c.vocab / tp, c.hidden);
  }
  return out;
}

std::vector<GemmProblem> gemm_problems(const std::vector<ModelConfig>& models, int max_tp,
                                       const std::vector<int64_t>& tokens) {
  std::set<GemmProblem> s;
  for (const auto& m : models)
    for (const auto& w : weight_shapes(m, max_tp))
      for (int64_t t : tokens) s.insert({t, w.n, w.k});
  return {s.begin(), s.end()};
}

}  // namespace peerplan::profiler
