#include "planner/strategy/strategy_api.hpp"

#include <algorithm>

#include "planner/core/error.hpp"

namespace peerplan {

nlohmann::json model_api_json(const ModelConfig& c, const ModelFigures& f) {
  const int64_t d = c.dtype_bytes;
  nlohmann::json m = {
      {"name", c.name}, {"architecture", c.architecture}, {"model_type", c.model_type}, {"dtype", c.dtype},
      {"dtype_bytes", d}, {"layers", c.layers}, {"hidden", c.hidden}, {"heads", c.heads},
      {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim}, {"intermediate", c.intermediate}, {"vocab", c.vocab},
      {"max_context", c.max_context}, {"tied_embeddings", c.tied_embeddings}, {"is_moe", c.is_moe()},
      {"experts", c.experts}, {"experts_per_token", c.experts_per_token},
      {"expert_intermediate", c.expert_intermediate}, {"shared_experts", c.shared_experts},
      {"shared_intermediate", c.shared_intermediate}, {"mla", c.mla}, {"kv_lora_rank", c.kv_lora_rank},
      {"params_total", f.params_total}, {"params_active", f.params_active}, {"weight_bytes", f.weight_bytes},
      {"kv_bytes_per_token", f.kv_bytes_per_token}, {"flops_per_token", f.flops_per_token},
      {"embedding_bytes", f.embedding_params * d},
      // The LM head's bytes on the last stage: its own matrix, or a copy of the tied embedding
      // when the last stage is not also the first (vLLM does the same).
      {"lm_head_bytes", (c.vocab * c.hidden + f.final_norm_params) * d}};
  nlohmann::json layer_bytes = nlohmann::json::array(), layer_kv = nlohmann::json::array(),
                 layer_moe = nlohmann::json::array(), moe_layers = nlohmann::json::array(),
                 expert_bytes = nlohmann::json::array();
  for (const auto& l : f.layers) {
    layer_bytes.push_back(l.params * d);
    layer_kv.push_back(l.kv_bytes_per_token);
    layer_moe.push_back(l.moe);
    expert_bytes.push_back(l.expert_params * d);
    if (l.moe) moe_layers.push_back(l.index);
  }
  m["layer_bytes"] = layer_bytes;
  m["layer_kv_bytes_per_token"] = layer_kv;
  m["layer_is_moe"] = layer_moe;
  m["layer_expert_bytes"] = expert_bytes;
  m["moe_layers"] = moe_layers;
  return m;
}

namespace {

const char* kModes[] = {"peer", "peer_kernel", "nop2p", "host_staged"};

nlohmann::json link_json(const Topology& t, int a, int b) {
  nlohmann::json l = {{"src", a}, {"dst", b}, {"path_type", to_string(t.path_type(a, b), t.nvlinks_between(a, b))},
                      {"nvlinks", t.nvlinks_between(a, b)}, {"p2p", t.p2p_usable(a, b)}};
  if (!t.p2p_usable(a, b)) l["p2p_why_not"] = t.p2p_why_not(a, b);
  nlohmann::json modes = nlohmann::json::object();
  double best = 0;
  std::string best_mode;
  for (const char* name : kModes) {
    Route r = t.route(a, b, *transfer_mode_from_string(name));
    nlohmann::json mj = {{"valid", r.valid}};
    if (r.valid) {
      mj["gbps"] = r.bottleneck_Bps / 1e9;
      mj["latency_us"] = r.latency_s * 1e6;
      mj["route"] = r.describe;
      if (r.bottleneck_Bps / 1e9 > best) {
        best = r.bottleneck_Bps / 1e9;
        best_mode = name;
      }
    } else {
      mj["why"] = r.why_invalid;
    }
    modes[name] = mj;
  }
  l["modes"] = modes;
  l["best_gbps"] = best;
  l["best_mode"] = best_mode;
  return l;
}

}  // namespace

nlohmann::json link_api_json(const Topology& t, int a, int b) {
  return a == b ? nlohmann::json{{"src", a}, {"dst", b}, {"self", true}, {"path_type", "X"}} : link_json(t, a, b);
}

namespace {
nlohmann::json machine_json(const Topology& t, bool links_matrix);
}

nlohmann::json machine_api_json(const Topology& t) { return machine_json(t, true); }
nlohmann::json machine_api_json_without_links(const Topology& t) { return machine_json(t, false); }

namespace {
nlohmann::json machine_json(const Topology& t, bool links_matrix) {
  const Machine& m = t.machine();
  const int n = t.gpu_count();
  std::vector<int> sym = t.symmetry_classes();
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : m.gpus)
    gpus.push_back({{"id", g.id}, {"name", g.name}, {"memory_bytes", g.memory_bytes}, {"numa", g.numa},
                    {"peak_bf16_tflops", g.peak_bf16_tflops}, {"hbm_gbps", g.hbm_gbps},
                    {"symmetry_class", sym.at(size_t(g.id))}});
  nlohmann::json links = nlohmann::json::array();
  for (int a = 0; a < (links_matrix ? n : 0); ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < n; ++b) row.push_back(a == b ? nlohmann::json{{"src", a}, {"dst", b}, {"self", true}, {"path_type", "X"}} : link_json(t, a, b));
    links.push_back(row);
  }
  // Symmetry classes as groups of interchangeable GPU ids.
  int classes = sym.empty() ? 0 : *std::max_element(sym.begin(), sym.end()) + 1;
  std::vector<std::vector<int>> by_class(size_t(std::max(classes, 0)));
  for (int g = 0; g < n; ++g) by_class[size_t(sym[size_t(g)])].push_back(g);
  return {{"name", m.name}, {"host", m.host}, {"origin", m.origin}, {"measured", m.measured()},
          {"gpu_count", n}, {"gpus", gpus}, {"links", links},
          {"nvlink_islands", t.nvlink_islands()}, {"switch_groups", t.switch_groups()},
          {"socket_groups", t.socket_groups()}, {"symmetry_classes", by_class}};
}
}  // namespace

TransferEstimate estimate_transfer(const CostModel& cost, int src, int dst, double bytes, const std::string& mode) {
  auto m = transfer_mode_from_string(mode);
  if (!m) throw InputError("", "mode", "one of peer, peer_kernel, nop2p, host_staged; got \"" + mode + "\"");
  TransferEstimate e;
  PairTransfer t = cost.transfer(src, dst, *m, bytes);
  if (!t.route.valid) {
    e.why_invalid = t.route.why_invalid;
    return e;
  }
  e.valid = true;
  e.seconds = t.price.seconds;
  e.source = to_string(t.price.source);
  return e;
}

}  // namespace peerplan
