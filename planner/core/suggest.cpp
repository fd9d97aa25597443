#include "planner/core/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace peerplan {

size_t edit_distance(const std::string& a, const std::string& b) {
  auto lower = [](char c) { return char(std::tolower(static_cast<unsigned char>(c))); };
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest_name(const std::string& got, const std::vector<std::string>& valid) {
  if (got.size() > 256) return "";  // nothing valid is that long; do not spend time on it
  std::string best;
  size_t best_d = 0;
  for (const auto& v : valid) {
    size_t d = edit_distance(got, v);
    if (best.empty() || d < best_d) best = v, best_d = d;
  }
  size_t longer = std::max(got.size(), best.size());
  return !best.empty() && best_d * 3 <= longer ? best : "";
}

std::string one_of_with_suggestion(const std::string& got, const std::vector<std::string>& valid) {
  std::string s = "one of ";
  for (size_t i = 0; i < valid.size(); ++i) s += (i ? ", " : "") + valid[i];
  std::string near = nearest_name(got, valid);
  if (!near.empty()) s += " (did you mean \"" + near + "\"?)";
  return s;
}

}  // namespace peerplan
