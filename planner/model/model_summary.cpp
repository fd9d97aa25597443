// Text rendering of a model's derived figures (what `peerplan model` prints).
#include "planner/model/model_summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace peerplan {

std::string human_count(double n) {
  const char* units[] = {"", " K", " M", " B", " T"};
  int u = 0;
  while (std::fabs(n) >= 1000 && u < 4) { n /= 1000; ++u; }
  if (u == 0) return fmt::format("{:.0f}", n);
  return fmt::format("{:.{}f}{}", n, n >= 100 ? 1 : 2, units[u]);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) { b /= 1024; ++u; }
  if (u == 0) return fmt::format("{:.0f} B", b);
  return fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_flops(double f) {
  const char* units[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int u = 0;
  while (std::fabs(f) >= 1000 && u < 5) { f /= 1000; ++u; }
  return fmt::format("{:.{}f} {}", f, u == 0 ? 0 : 2, units[u]);
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string layer_ranges(const std::vector<int64_t>& layers) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    runs.push_back(i == j ? std::to_string(layers[i]) : fmt::format("{}-{}", layers[i], layers[j]));
    i = j + 1;
  }
  std::string s;
  if (runs.size() > 4) {  // e.g. every other layer: keep the line short, give the count
    for (size_t i = 0; i < 3; ++i) s += runs[i] + ",";
    return s + fmt::format("... ({} layers)", layers.size());
  }
  for (const auto& r : runs) s += (s.empty() ? "" : ",") + r;
  return s;
}

namespace {

std::string short_ctx(int64_t c) {
  if (c >= 1024 && c % 1024 == 0) return fmt::format("{}k", c / 1024);
  return std::to_string(c);
}

// Layers with identical figures (all but the index) share one row.
using Signature = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, double, int64_t, std::string>;

Signature signature(const LayerFigures& l) {
  std::string m;
  for (const auto& x : l.matrices) m += fmt::format("{}:{}x{}x{};", x.name, x.k, x.n, x.count);
  return {l.moe, l.params, l.active_params, l.attn_params, l.mlp_params, l.flops_per_token, l.kv_bytes_per_token, m};
}

// What the summary's "quantized" line says about the weights outside the quantized layers: which
// are dense, and which are stored in another format (a GGUF's embedding is often Q4_K / Q6_K too).
std::string unquantized_parts(const ModelConfig& c, const ModelFigures& f, const WeightFormat& q) {
  std::vector<std::string> dense, same;
  std::string other;
  auto place = [&](const WeightFormat& w, const std::string& label) {
    if (w.scales == ScaleLayout::None) dense.push_back(label);
    else if (w == q) same.push_back(label);
    else other += fmt::format("; {} {}", label, describe(w));
  };
  const MatrixShape& emb = f.model_matrices.at(0);
  place(emb.format, c.tied_embeddings ? "embedding (and the tied LM head)" : "embedding");
  if (c.is_moe())  // routers: the first layer that has one
    for (const auto& l : f.layers) {
      auto it = std::find_if(l.matrices.begin(), l.matrices.end(), [](const MatrixShape& m) { return m.name == "router"; });
      if (it == l.matrices.end()) continue;
      place(it->format, "router");
      break;
    }
  dense.push_back("norms");
  dense.push_back("biases");
  if (!c.tied_embeddings) place(f.model_matrices.at(1).format, "LM head");
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::string out = "dense: " + join(dense);
  if (!same.empty()) out = "also " + join(same) + "; " + out;
  return out + other;
}

std::string count_cell(const MatrixShape& m, int64_t top_k) {
  if (m.per_token_active) return std::to_string(m.count);
  return fmt::format("{} ({}/tok)", m.count, top_k);
}

}  // namespace

std::string model_summary_text(const ModelConfig& c, const ModelFigures& f, const std::vector<int64_t>& contexts) {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };

  line(fmt::format("{} - {} ({}), {}", c.name, c.architecture, c.model_type, c.dtype));
  line(fmt::format("  from {}", c.source_file));
  line("");
  line(fmt::format("  shape             {} layers, hidden {}, vocab {}, context {}", c.layers, c.hidden, c.vocab,
                   c.max_context > 0 ? std::to_string(c.max_context) : std::string("(not given)")));
  if (c.mla) {
    line(fmt::format("  attention         MLA: {} heads, kv_lora_rank {}, q_lora_rank {}, qk_nope {} + qk_rope {}, "
                     "v_head_dim {}",
                     c.heads, c.kv_lora_rank, c.q_lora_rank > 0 ? std::to_string(c.q_lora_rank) : "none (full-rank q)",
                     c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim));
  } else if (c.kv_heads == c.heads) {
    line(fmt::format("  attention         MHA: {} heads x head_dim {}{}{}", c.heads, c.head_dim,
                     c.attention_bias ? ", qkv bias" : "", c.qk_norm ? ", q/k norm" : ""));
  } else {
    line(fmt::format("  attention         GQA: {} query heads, {} KV heads ({} per group), head_dim {}{}{}", c.heads,
                     c.kv_heads, c.heads / c.kv_heads, c.head_dim, c.attention_bias ? ", qkv bias" : "",
                     c.qk_norm ? ", q/k norm" : ""));
  }
  if (c.sliding_window > 0 && c.layer_window.empty())
    line(fmt::format("                    sliding window {} (figures below assume full attention: an upper bound)",
                     c.sliding_window));
  if (!c.layer_window.empty()) {
    std::vector<int64_t> windowed;
    for (int64_t l = 0; l < c.layers; ++l)
      if (c.window_of(l) > 0) windowed.push_back(l);
    const bool every = int64_t(windowed.size()) == c.layers;  // Mistral-7B-v0.1: every layer (issue 18)
    line(fmt::format("                    sliding window {} in {} (KV and attention bounded by it){}{}", c.sliding_window,
                     every ? "every layer" : "layers " + layer_ranges(windowed), every ? "" : ", full in the rest",
                     c.attention_sinks ? "; attention sinks" : ""));
  }
  std::vector<int64_t> moe_layers, dense_layers;
  for (const auto& l : f.layers) (l.moe ? moe_layers : dense_layers).push_back(l.index);
  if (!dense_layers.empty())
    line(fmt::format("  MLP               SwiGLU, intermediate {}{}", c.intermediate,
                     c.is_moe() ? " (dense layers " + layer_ranges(dense_layers) + ")" : ""));
  if (c.is_moe()) {
    std::string shared = c.shared_intermediate > 0
                             ? fmt::format(" + {} shared (intermediate {}{})", c.shared_experts, c.shared_intermediate,
                                           c.shared_expert_gate ? ", sigmoid-gated" : "")
                             : "";
    line(fmt::format("  MoE               {} routed experts, top-{} (intermediate {}){} in layers {}", c.experts,
                     c.experts_per_token, c.expert_intermediate, shared, layer_ranges(moe_layers)));
  }
  line("");
  line(fmt::format("  parameters        {} total ({})", human_count(double(f.params_total)), with_commas(f.params_total)));
  line(fmt::format("    per token       {} active (weights a token multiplies: LM head in, embedding table out)",
                   human_count(double(f.params_active))));
  line(fmt::format("    outside layers  embedding {}, LM head {}, final norm {}", human_count(double(f.embedding_params)),
                   c.tied_embeddings ? std::string("tied to the embedding") : human_count(double(f.lm_head_params)),
                   human_count(double(f.final_norm_params))));
  if (!c.quant.quantized()) {
    line(fmt::format("  weights           {} in {} ({} B per parameter){}", human_bytes(double(f.weight_bytes)), c.dtype,
                     c.dtype_bytes, c.quant.source.empty() ? "" : " (" + c.quant.source + ")"));
  } else {
    std::string parts;
    for (const auto& [name, b] : f.weight_bytes_by_dtype())
      parts += fmt::format("{}{} {}", parts.empty() ? "" : " + ", human_bytes(double(b)), name);
    line(fmt::format("  weights           {} = {} ({:.3f} B per parameter)", human_bytes(double(f.weight_bytes)), parts,
                     double(f.weight_bytes) / double(f.params_total)));
    const WeightFormat* q = nullptr;
    for (const auto& l : f.layers)
      for (const auto& m : l.matrices)
        if (!q && m.format.scales != ScaleLayout::None) q = &m.format;
    const std::string origin = c.quant.method == c.quant.source ? "" : " (" + c.quant.source;  // --weights: one name
    line(fmt::format("    format          {}{}{}, activations {}{}", c.quant.method, origin,
                     (c.quant.ignore.empty() ? "" : fmt::format("{} {} ignore patterns", origin.empty() ? " (" : ",",
                                                                c.quant.ignore.size())) +
                         (origin.empty() && c.quant.ignore.empty() ? "" : ")"),
                     c.quant.activations, c.quant.activation_scheme.empty() ? "" : " " + c.quant.activation_scheme));
    if (q) line("    quantized       " + describe(*q) + "; " + unquantized_parts(c, f, *q));
  }
  std::string kv_formula =
      c.mla ? fmt::format("{} layers x (kv_lora_rank {} + qk_rope {}) x {} B, the compressed latent", c.layers,
                          c.kv_lora_rank, c.qk_rope_head_dim, c.kv_elem_bytes())
            : fmt::format("{} layers x 2 (K,V) x {} KV heads x {} x {} B", c.layers, c.kv_heads, c.head_dim, c.kv_elem_bytes());
  if (c.kv_dtype == DType::FP8_E4M3) kv_formula += " (fp8 KV cache)";
  line(fmt::format("  KV cache          {} per token ({} B) = {}", human_bytes(double(f.kv_bytes_per_token)),
                   with_commas(f.kv_bytes_per_token), kv_formula));
  if (c.max_context > 0)
    line(fmt::format("                    {} per 8k-token sequence, {} at the full context of {}{}",
                     human_bytes(double(f.kv_bytes_per_seq(8192))), human_bytes(double(f.kv_bytes_per_seq(c.max_context))),
                     c.max_context, c.layer_window.empty() ? "" : " (windowed layers hold their window)"));
  line(fmt::format("  FLOPs per token   {} at context 1, + {} per token of context (forward; multiply-add = 2)",
                   human_flops(f.flops_per_token), human_flops(f.flops_per_context_token)));
  std::string at;
  for (int64_t ctx : contexts) at += fmt::format("   ctx {}: {}", short_ctx(ctx), human_flops(f.flops_per_token_at(ctx)));
  if (!at.empty()) line("                 " + at);
  line("");

  // Per-layer table, identical layers collapsed.
  std::map<Signature, std::vector<int64_t>> groups;
  std::vector<Signature> order;
  for (const auto& l : f.layers) {
    Signature s = signature(l);
    if (!groups.count(s)) order.push_back(s);
    groups[s].push_back(l.index);
  }
  line("Layers (identical layers share a row)");
  line(fmt::format("  {:<14} {:<6} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}", "layers", "kind", "params", "active",
                   "attention", "MLP/MoE", "FLOP/token", "KV B/tok"));
  for (const auto& s : order) {
    const LayerFigures& l = f.layers[size_t(groups[s].front())];
    line(fmt::format("  {:<14} {:<6} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}", layer_ranges(groups[s]),
                     l.moe ? "moe" : "dense", human_count(double(l.params)), human_count(double(l.active_params)),
                     human_count(double(l.attn_params)), human_count(double(l.mlp_params)),
                     human_flops(l.flops_per_token), with_commas(l.kv_bytes_per_token)));
  }
  line("");
  line("Weight matrices (y[tokens, n] = x[tokens, k] * W[k, n])");
  line(fmt::format("  {:<14} {:<16} {:>8} {:>8} {:>12} {:>10}", "layers", "matrix", "k", "n", "count", "params"));
  for (const auto& s : order) {
    const LayerFigures& l = f.layers[size_t(groups[s].front())];
    std::string label = layer_ranges(groups[s]);
    for (const auto& m : l.matrices) {
      line(fmt::format("  {:<14} {:<16} {:>8} {:>8} {:>12} {:>10}", label, m.name, m.k, m.n, count_cell(m, c.experts_per_token),
                       human_count(double(m.k * m.n * m.count))));
      label.clear();
    }
  }
  std::string label = "model";
  for (const auto& m : f.model_matrices) {
    std::string note = m.name == "embedding" ? "  (lookup)" : (c.tied_embeddings ? "  (tied: embedding's storage)" : "");
    line(fmt::format("  {:<14} {:<16} {:>8} {:>8} {:>12} {:>10}{}", label, m.name, m.k, m.n, m.count,
                     human_count(double(m.k * m.n * m.count)), note));
    label.clear();
  }
  return o;
}

}  // namespace peerplan
