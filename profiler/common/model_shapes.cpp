#include "profiler/common/model_shapes.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/validate/missing_shapes.hpp"
#include "profiler/common/attention_support.hpp"
#include "profiler/common/gemm_shapes.hpp"

namespace peerplan::profiler {

const std::vector<std::string>& profiler_gemm_dtypes() {
  static const std::vector<std::string> d = {"bf16", "fp8", "int8", "int4"};
  return d;
}

std::set<ElementwiseShapeKey> model_elementwise_shapes(const ModelConfig& m, int gpus, std::vector<ShapeNote>* notes) {
  std::set<ElementwiseShapeKey> out;
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
    try {
      const std::set<ElementwiseShapeKey> k =
          graph_elementwise_shapes(compile_iteration(p, m, fig, host, mixed_iteration()), p, m);
      out.insert(k.begin(), k.end());
    } catch (const InputError& e) {  // KV heads neither dividing nor divided by tp: no such plan
      if (notes) notes->push_back({fmt::format("elementwise kernels of {} at TP {}", m.name, tp), e.what()});
    }
  }
  if (m.mla && notes)
    notes->push_back({fmt::format("rotary of {}", m.name), "multi-head latent attention: the executor's rotary_and_cache "
                                                           "is standard attention's"});
  return out;
}

ShapeSet model_shape_set(const std::vector<ModelConfig>& models, int gpus, const std::vector<std::string>& dtypes,
                         std::vector<ShapeNote>* notes) {
  ShapeSet s;
  for (const ModelConfig& m : models) {
    for (const WeightShape& w : weight_shapes(m, gpus))
      for (const std::string& d : dtypes) s.gemms.insert({w.n, w.k, d});
    if (!m.mla) {
      for (int tp : tp_degrees(m, gpus)) {
        const int heads = int(m.heads / tp), kv = int(std::max<int64_t>(1, m.kv_heads / tp)), hd = int(m.head_dim);
        const std::string why = kernels::attention_shape_refusal(heads, kv, hd);
        if (why.empty()) s.attention.insert({heads, kv, hd, "bf16"});
        else if (notes) notes->push_back({fmt::format("attention of {} at TP {}", m.name, tp), why});
      }
      s.attention_max_context =
          std::max<int64_t>(s.attention_max_context, std::min<int64_t>(m.max_context, int64_t(1) << 17));
    } else if (notes) {
      notes->push_back({fmt::format("attention of {}", m.name), "multi-head latent attention: the executor has no MLA kernels"});
    }
    const std::set<ElementwiseShapeKey> ew = model_elementwise_shapes(m, gpus, notes);
    s.elementwise.insert(ew.begin(), ew.end());
    if (!m.is_moe()) continue;
    for (const WeightShape& w : weight_shapes(m, gpus)) {
      if (w.name != "expert.gate_up" && w.name != "expert.down") continue;
      const bool gather = w.name == "expert.gate_up";
      s.grouped.insert({w.n, w.k, m.experts, m.experts_per_token, m.experts, gather, "bf16"});  // TP-split experts
      if (w.tp != 1) continue;
      for (int ep = 2; ep <= gpus; ++ep)  // EP shards at TP 1: rank 0's E / ep experts
        if (m.experts % ep == 0) s.grouped.insert({w.n, w.k, m.experts / ep, m.experts_per_token, m.experts, gather, "bf16"});
    }
  }
  return s;
}

}  // namespace peerplan::profiler
