#pragma once
// Range checks for numeric options, with messages that say the range. CLI::Range is not enough:
// every comparison with NaN is false, so it lets `nan` through, and CLI11 reads "1e300" or "-1"
// into an integer option without complaint. These parse the text themselves.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "planner/core/dtype.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan::cli {

// A finite number in [lo, hi] (`what` names the unit: "seconds", "MiB").
inline CLI::Validator finite_in(double lo, double hi, const std::string& what) {
  const std::string range = fmt::format("{} in [{:g}, {:g}]", what, lo, hi);
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(in.c_str(), &end);
        if (in.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi)
          return fmt::format("expected {}, got '{}'", range, in);
        return "";
      },
      range);
}

// A whole number written as digits (no exponent, no fraction) in [lo, hi].
inline CLI::Validator integer_in(long long lo, long long hi, const std::string& what) {
  const std::string range = fmt::format("{} in [{}, {}]", what, lo, hi);
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(in.c_str(), &end, 10);
        if (in.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
          return fmt::format("expected {} (a whole number), got '{}'", range, in);
        return "";
      },
      range);
}

// --weights bf16|fp8|int8|int4 and --kv-dtype bf16|fp8 ("what if I quantize"), the same on every
// command that loads a model; `p` is filled when the options are parsed.
inline void add_precision_options(CLI::App* sub, Precision& p) {
  auto dtype_option = [&](const char* name, std::optional<DType>& into, const std::vector<std::string>& choices,
                          const std::string& help) {
    sub->add_option_function<std::string>(
           name,
           [&into, name](const std::string& v) {
             auto d = parse_dtype(v);
             if (!d) throw CLI::ValidationError(name, "unknown format '" + v + "'");
             into = *d;
           },
           help)
        ->check(CLI::IsMember(choices, CLI::ignore_case))
        ->type_name([&] {
          std::string t;
          for (const auto& c : choices) t += (t.empty() ? "" : "|") + c;
          return t;
        }());
  };
  dtype_option("--weights", p.weights, weights_choices(),
               "plan the model with its weight matrices in this format instead of what config.json's\n"
               "quantization_config says: bf16 (dense), fp8 (e4m3, per-channel scales, W8A8), int8 (W8A8\n"
               "per-channel) or int4 (W4A16, group-128 scales). Embeddings, router and LM head stay dense.");
  dtype_option("--kv-dtype", p.kv_dtype, kv_dtype_choices(),
               "KV-cache format: bf16 (the model's dtype) or fp8 (e4m3: half the bytes per token, so about\n"
               "twice the sequences fit; attention reads half the bytes)");
}

}  // namespace peerplan::cli
