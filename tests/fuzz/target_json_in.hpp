#pragma once
// Fuzz target "json_in": the core JSON reader every loader goes through (planner/core/json_in).
// Invariants: parsing never accepts nesting deeper than the limit (the parser counts levels below
// the top value: a scalar may sit inside at most max_depth containers); every typed getter either
// returns a value honouring its contract (finite, positive, integral...) or rejects with an
// InputError that names the file and the field it was asked for.
#include <cmath>
#include <string>
#include <vector>

#include "planner/core/json_in.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

inline int json_depth(const json& root) {
  // Iterative: the tree is bounded by the parser's limit, but the check must not trust that.
  int max_depth = 0;
  std::vector<std::pair<const json*, int>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto [node, d] = stack.back();
    stack.pop_back();
    if (node->is_structured()) {
      max_depth = std::max(max_depth, d + 1);
      for (const auto& child : *node) stack.push_back({&child, d + 1});
    }
  }
  return max_depth;
}

// Exercises every typed getter on `key` of object `j`; checks each accepted value's contract.
inline void probe_key(const JsonIn& j, const std::string& key) {
  const std::string& f = j.file();
  // Key "": JsonIn's fail("") means "this object", so some getters name the object holding the key
  // ("output_tokens") and others the key's pointer ("output_tokens/"). Both point the user at the
  // right place and no loader asks for "", so either is accepted (finding 2026-12-01, kept as
  // tests/fuzz/regressions/json_in/empty_key.json).
  const std::string want = j.field(key);
  const std::string holder = key.empty() && !want.empty() ? want.substr(0, want.size() - 1) : want;
  auto field_named = [&](auto&& getter) {
    try {
      getter();
    } catch (const InputError& e) {
      FUZZ_CHECK(e.file() == f, std::string("error must name the file: ") + e.what());
      FUZZ_CHECK(e.field() == want || e.field() == holder, "error for '" + want + "' names field '" + e.field() + "'");
    }
  };
  field_named([&] { FUZZ_CHECK(std::isfinite(j.num(key)), "num() returned a non-finite value"); });
  field_named([&] {
    double v = j.positive(key);
    FUZZ_CHECK(std::isfinite(v) && v > 0, "positive() returned " + std::to_string(v));
  });
  field_named([&] {
    double v = j.nonnegative(key);
    FUZZ_CHECK(std::isfinite(v) && v >= 0, "nonnegative() returned " + std::to_string(v));
  });
  field_named([&] { (void)j.integer(key); });
  field_named([&] { FUZZ_CHECK(j.positive_int(key) > 0, "positive_int() returned <= 0"); });
  field_named([&] { FUZZ_CHECK(j.nonnegative_int(key) >= 0, "nonnegative_int() returned < 0"); });
  field_named([&] { (void)j.str(key); });
  field_named([&] { (void)j.boolean(key); });
  field_named([&] { (void)j.object(key); });
  field_named([&] { (void)j.array(key); });
  field_named([&] { (void)j.positive_or(key, 1.0); });
  field_named([&] { (void)j.nonnegative_int_or(key, 0); });
}

inline void walk(const JsonIn& j, int budget) {
  if (budget <= 0) return;
  if (j.is_object()) {
    for (const auto& [key, value] : j.raw().items()) {
      probe_key(j, key);
      if (value.is_structured()) walk(j.at(key), budget - 1);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size() && i < 64; ++i) {
      JsonIn e = j[i];
      accepts(j.file(), [&] { FUZZ_CHECK(std::isfinite(e.as_num()), "as_num() returned a non-finite value"); });
      accepts(j.file(), [&] { (void)e.as_integer(); });
      accepts(j.file(), [&] { (void)e.as_str(); });
      if (e.raw().is_structured()) walk(e, budget - 1);
    }
    accepts(j.file(), [&] { (void)j[j.size()]; });  // one past the end must be a clean error
  }
}

// Returns true when the input was accepted (parsed), false on a clean rejection.
inline bool fuzz_json_in(const std::string& data) {
  const std::string origin = "fuzz/input.json";
  // The limit itself comes from the input so small limits are exercised too.
  const int max_depth = data.empty() ? 64 : 1 + (static_cast<unsigned char>(data[0]) % 64);
  json doc;
  if (!accepts(origin, [&] { doc = parse_json_text(data, origin, max_depth); })) return false;
  FUZZ_CHECK(json_depth(doc) <= max_depth + 1,
             "parsed a document nested " + std::to_string(json_depth(doc)) + " deep with limit " +
                 std::to_string(max_depth));
  walk(JsonIn(doc, origin), 16);
  return true;
}

}  // namespace peerplan::fuzz
