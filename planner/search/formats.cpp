#include "planner/search/formats.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/model/quantization.hpp"

namespace peerplan {

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string checkpoint_weights_name(const ModelConfig& cfg) {
  if (!cfg.quant.per_matrix.empty()) return "gguf";
  return cfg.quant.quantized() ? dtype_name(cfg.quant.linear.dtype) : "bf16";
}

double checkpoint_weight_bits(const ModelConfig& cfg) {
  if (!cfg.quant.per_matrix.empty()) {
    double bits = 0;
    for (const auto& [key, f] : cfg.quant.per_matrix)
      bits = std::max(bits, f.bits_per_weight > 0 ? f.bits_per_weight : dtype_bits(f.dtype));
    return bits;
  }
  return cfg.quant.quantized() ? dtype_bits(cfg.quant.linear.dtype) : 16;
}

std::vector<DType> parse_dtype_list(const std::string& option, const std::vector<std::string>& values,
                                    const std::vector<std::string>& choices) {
  std::vector<DType> out;
  for (const std::string& v : values) {
    const auto d = parse_dtype(v);
    const bool offered = d && std::find(choices.begin(), choices.end(), dtype_name(*d)) != choices.end();
    if (!offered) throw InputError("", option, fmt::format("a comma-separated list of {}; got '{}'", joined(choices), v));
    if (std::find(out.begin(), out.end(), *d) == out.end()) out.push_back(*d);
  }
  return out;
}

std::vector<SearchFormat> search_formats(const ModelConfig& base, const std::vector<DType>& weights,
                                         const std::vector<DType>& kv) {
  const std::string own = checkpoint_weights_name(base);
  const double own_bits = checkpoint_weight_bits(base);
  std::vector<std::optional<DType>> ws, ks;
  for (DType d : weights) {
    const bool is_own = own == dtype_name(d);
    if (!is_own && !(dtype_bits(d) < own_bits))
      throw InputError("", "--dtypes",
                       fmt::format("weight formats {} can take: its own ({}) or one with fewer bits per weight; got "
                                   "'{}' ({} is stored in {}, {:g} bits per weight: planning {} would size and price "
                                   "weights that do not exist; plan the {} checkpoint for that)",
                                   base.name, own, dtype_name(d), base.name, own, own_bits, dtype_name(d),
                                   dtype_name(d)));
    // The checkpoint's own format keeps its quantization_config (block scales, ignore lists):
    // the search over it is the search without --dtypes.
    const std::optional<DType> w = is_own ? std::nullopt : std::optional<DType>(d);
    if (std::find(ws.begin(), ws.end(), w) == ws.end()) ws.push_back(w);
  }
  for (DType d : kv)
    if (std::find(ks.begin(), ks.end(), std::optional<DType>(d)) == ks.end()) ks.push_back(d);
  if (ws.empty()) ws.push_back(std::nullopt);
  if (ks.empty()) ks.push_back(std::nullopt);
  std::vector<SearchFormat> out;
  for (const auto& w : ws)
    for (const auto& k : ks) {
      SearchFormat f;
      f.precision = Precision{w, k};
      f.cfg = base;
      apply_precision(f.cfg, f.precision);
      f.fig = derive_figures(f.cfg);
      f.weights = w ? dtype_name(*w) : own;
      f.kv = dtype_name(f.cfg.kv_dtype);
      out.push_back(std::move(f));
    }
  return out;
}

}  // namespace peerplan
