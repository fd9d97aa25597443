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

}  // namespace peerplan::cli
