#include "profiler/common/model_shapes.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/expert_format.hpp"
#include "planner/validate/missing_shapes.hpp"
#include "profiler/common/attention_support.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/common/quant_shapes.hpp"

namespace peerplan::profiler {

const std::vector<std::string>& profiler_gemm_dtypes() {
  static const std::vector<std::string> d = {"bf16", "fp8", "int8", "int4"};
  return d;
}

namespace {

// The shapes the compiler's own ops give `m` at each TP degree (one mixed iteration of a one-stage
// TP plan over all layers: every op kind appears): the elementwise kernels (elementwise_shape_key,
// as validate keys a plan's ops), the strided-batched GEMMs (MLA's absorbed q_absorb / v_absorb,
// batch = heads of the rank) and MLA's two attention shapes (attention_shape_key: the absorbed
// decode, the expanded prefill). EP and pipeline plans give no other shape of these.
ShapeSet compiled_shapes(const ModelConfig& m, int gpus, std::vector<ShapeNote>* notes) {
  ShapeSet out;
  const ModelFigures fig = derive_figures(m);
  Machine host;  // compile_iteration reads the GPU count only
  host.gpus.resize(size_t(std::max(1, gpus)));
  for (int tp : tp_degrees(m, gpus)) {
    Plan p;  // one stage, tensor parallel over GPUs 0..tp-1, all layers: every (kind, cols) at this TP
    p.name = fmt::format("tp{}", tp);
    PlanStage st;
    for (int g = 0; g < tp; ++g) st.gpus.push_back(g);
    st.tp = tp, st.layer_begin = 0, st.layer_end = m.layers, st.embeddings = true, st.lm_head = true;
    p.stages.push_back(st);
    OpGraph graph;
    try {
      graph = compile_iteration(p, m, fig, host, mixed_iteration());
    } catch (const InputError& e) {  // KV heads neither dividing nor divided by tp: no such plan
      if (notes) notes->push_back({fmt::format("elementwise kernels of {} at TP {}", m.name, tp), e.what()});
      continue;
    }
    for (const ElementwiseShapeKey& k : graph_elementwise_shapes(graph, p, m)) {
      // mla_rope_and_cache runs the shapes mla_decode does (512 latent, 64 rope, 1-128 heads).
      const std::string why = k.kind != "mla_rotary" ? std::string()
                                                     : kernels::mla_shape_refusal(
                                                           int(m.kv_lora_rank), int(m.qk_rope_head_dim),
                                                           int(m.qk_nope_head_dim), int(m.v_head_dim), int(k.heads), false);
      if (why.empty()) out.elementwise.insert(k);
      else if (notes) notes->push_back({fmt::format("mla_rotary of {} at TP {}", m.name, tp), why});
    }
    for (const Op& op : graph.ops) {
      // The executor runs batched GEMMs in bf16 only (engine_quant.cpp refuses batch_count > 1; vLLM
      // keeps W_UK / W_UV in bf16 for FP8 models too), whatever the profile's --dtypes.
      if (op.kind == OpKind::Gemm && op.batch_count > 1) {
        GemmShapeKey g = gemm_shape_key(op);
        g.dtype = "bf16";
        out.gemms.insert(g);
      }
      if (op.kind != OpKind::Attention || !m.mla) continue;
      AttentionShapeKey a = attention_shape_key(op);
      a.kv_dtype = "bf16";  // the profile's attention grid reads a bf16 cache (FP8 latent caches do not run)
      const std::string why = kernels::mla_shape_refusal(int(m.kv_lora_rank), int(m.qk_rope_head_dim),
                                                         int(m.qk_nope_head_dim), int(m.v_head_dim),
                                                         int(op.attn_heads), false);
      if (why.empty()) out.attention.insert(a);
      else if (notes) notes->push_back({fmt::format("attention of {} at TP {}", m.name, tp), why});
    }
  }
  return out;
}

}  // namespace

std::set<ElementwiseShapeKey> model_elementwise_shapes(const ModelConfig& m, int gpus, std::vector<ShapeNote>* notes) {
  return compiled_shapes(m, gpus, notes).elementwise;
}

ShapeSet model_shape_set(const std::vector<ModelConfig>& models, int gpus, const std::vector<std::string>& dtypes,
                         std::vector<ShapeNote>* notes) {
  ShapeSet s;
  for (const ModelConfig& m : models) {
    for (const WeightShape& w : weight_shapes(m, gpus)) {
      if (w.dense) s.gemms.insert({w.n, w.k, "bf16"});  // the router: bf16 whatever --dtypes
      else
        for (const std::string& d : dtypes) s.gemms.insert({w.n, w.k, d});
    }
    const ShapeSet compiled = compiled_shapes(m, gpus, notes);  // MLA's attention shapes and absorbed GEMMs
    s.gemms.insert(compiled.gemms.begin(), compiled.gemms.end());
    s.attention.insert(compiled.attention.begin(), compiled.attention.end());
    if (!m.mla) {
      for (int tp : tp_degrees(m, gpus)) {
        const int heads = int(m.heads / tp), kv = int(std::max<int64_t>(1, m.kv_heads / tp)), hd = int(m.head_dim);
        const std::string why = kernels::attention_shape_refusal(heads, kv, hd);
        if (why.empty()) s.attention.insert({heads, kv, hd, "bf16"});
        else if (notes) notes->push_back({fmt::format("attention of {} at TP {}", m.name, tp), why});
      }
    }
    s.attention_max_context = std::max<int64_t>(s.attention_max_context, std::min<int64_t>(m.max_context, int64_t(1) << 17));
    s.elementwise.insert(compiled.elementwise.begin(), compiled.elementwise.end());
    if (!m.is_moe()) continue;
    // Routed experts in bf16 always, in fp8 / int8 / int4 when the profile times fp8 / int8 / int4 GEMMs, and
    // in the checkpoint's own format (gpt-oss: mxfp4, which no --dtypes names) (the formats the executor's
    // grouped kernels run: moe_gemm.hpp), where the format's grouped kernels take the shard (int4's packing:
    // n % 16, k % 128, w4_expert_layout.hpp; mxfp4's n % 16, k % 64).
    std::vector<std::string> grouped_dtypes = {"bf16"};
    for (const char* q : {"fp8", "int8", "int4"})
      if (std::find(dtypes.begin(), dtypes.end(), q) != dtypes.end()) grouped_dtypes.push_back(q);
    const std::optional<DType> own = routed_expert_format(m);
    if (own && *own != DType::BF16 && *own != DType::FP16) {  // the quantized formats
      const std::string d = dtype_name(*own);
      if (std::find(grouped_dtypes.begin(), grouped_dtypes.end(), d) == grouped_dtypes.end()) grouped_dtypes.push_back(d);
    }
    for (const WeightShape& w : weight_shapes(m, gpus)) {
      if (w.name != "expert.gate_up" && w.name != "expert.down") continue;
      const bool gather = w.name == "expert.gate_up";
      for (const std::string& d : grouped_dtypes) {
        const DType dt = *parse_dtype(d);
        if (!kernels::quant_grouped_shape_ok(dt, w.n, w.k)) {
          if (notes)
            notes->push_back({fmt::format("{} {} of {} [{}, {}]", d, w.name, m.name, w.n, w.k),
                              d + " experts need " + kernels::quant_shape_rule(dt, true)});
          continue;
        }
        s.grouped.insert({w.n, w.k, m.experts, m.experts_per_token, m.experts, gather, d});  // TP-split experts
        if (w.tp != 1) continue;
        for (int ep = 2; ep <= gpus; ++ep)  // EP shards at TP 1: rank 0's E / ep experts
          if (m.experts % ep == 0) s.grouped.insert({w.n, w.k, m.experts / ep, m.experts_per_token, m.experts, gather, d});
      }
    }
  }
  return s;
}

}  // namespace peerplan::profiler
