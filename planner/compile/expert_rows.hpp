#pragma once
// The rows each touched expert of a GroupedGemm op receives, in every layer the op stands for
// (compiler.cpp moe_loads; eager iterations only). The cuBLAS path runs one cuBLASLt call per expert,
// whose time steps where cuBLASLt changes kernels (Mixtral int8: faster past 512 rows an expert, slower
// past 1024; docs/moe_routing.md), so its price sums one expert's curve over these rows
// (planner/cost/grouped_gemm_cost.hpp) instead of spreading the mean. Shared, not copied: one list per
// (layer, tokens) serves every op compiled from it.
#include <cstdint>
#include <memory>
#include <vector>

namespace peerplan {

struct ExpertRows {
  std::shared_ptr<const std::vector<int32_t>> rows;  // every touched expert's rows over `layers`, ascending
  int layers = 0;
  uint64_t hash = 0;  // of (layers, rows): the cost model's memo hashes ops per lookup, so once here

  // Zero counts are dropped (untouched experts cost nothing); empty when `layers` <= 0 or no row is left.
  static ExpertRows make(std::vector<int32_t> rows, int layers);
  bool empty() const { return !rows || rows->empty() || layers <= 0; }
  friend bool operator==(const ExpertRows& a, const ExpertRows& b) {
    if (a.empty() || b.empty()) return a.empty() == b.empty();
    return a.layers == b.layers && a.hash == b.hash && (a.rows == b.rows || *a.rows == *b.rows);
  }
  friend bool operator!=(const ExpertRows& a, const ExpertRows& b) { return !(a == b); }
};

}  // namespace peerplan
