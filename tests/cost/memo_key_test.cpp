// The cost model memoises prices by the op's priced_fields (op_graph.hpp). Every one of them must
// separate two ops, so a cached price is never handed to an op that could cost something else;
// the fields that only place an op in its graph must not, so identical layers share prices.
#include <gtest/gtest.h>

#include <type_traits>
#include <utility>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/cost_model.hpp"
#include "tests/cost/cost_test_util.hpp"

using namespace peerplan;

namespace {

Op base_op() {
  Op o;
  o.id = 3;
  o.kind = OpKind::Gemm;
  o.name = "L0.qkv";
  o.gpus = {0};
  o.m = 64, o.n = 4096, o.k = 4096;
  o.flops = 2.0 * 64 * 4096 * 4096;
  o.mem_bytes = 3.3e7;
  return o;
}

// Changes field F of `o` to another value of its type.
template <class F>
void perturb(F& f) {
  using T = std::decay_t<F>;
  if constexpr (std::is_same_v<T, std::vector<int>>) f.push_back(7);
  else if constexpr (std::is_same_v<T, ExpertRows>) f = ExpertRows::make({3, 5}, 1);
  else if constexpr (std::is_same_v<T, bool>) f = !f;
  else if constexpr (std::is_floating_point_v<T>) f = f * 2 + 1.5;
  else if constexpr (std::is_enum_v<T>) f = T(int(f) + 1);
  else f = f + 1;
}

template <size_t... I>
void each_field_separates(std::index_sequence<I...>) {
  (
      [] {
        Op a = base_op(), b = base_op();
        perturb(const_cast<std::decay_t<decltype(std::get<I>(priced_fields(b)))>&>(std::get<I>(priced_fields(b))));
        EXPECT_FALSE(same_priced_fields(a, b)) << "priced field #" << I << " must separate two ops";
        EXPECT_NE(priced_hash(a), priced_hash(b)) << "priced field #" << I << " must change the hash";
      }(),
      ...);
}

}  // namespace

TEST(MemoKey, EveryPricedFieldSeparatesTwoOps) {
  constexpr size_t n = std::tuple_size_v<decltype(priced_fields(std::declval<const Op&>()))>;
  static_assert(n >= 18, "kind, gpus, the GEMM and attention shapes, flops, bytes, mode, p2p at least");
  each_field_separates(std::make_index_sequence<n>{});
}

TEST(MemoKey, PlacementFieldsDoNotSeparateTwoOps) {
  // The same GEMM in another layer (other id, name, stage, layer, deps) costs the same: one entry.
  Op a = base_op(), b = base_op();
  b.id = 99, b.name = "L7.qkv", b.stage = 1, b.layer = 7, b.deps = {1, 2};
  EXPECT_TRUE(same_priced_fields(a, b));
  EXPECT_EQ(priced_hash(a), priced_hash(b));
  Op z = base_op(), nz = base_op();
  z.flops = 0.0, nz.flops = -0.0;
  EXPECT_EQ(priced_hash(z), priced_hash(nz)) << "equal keys (-0.0 == 0.0) must hash alike";
}

TEST(MemoKey, CostModelPricesOpsThatDifferInOneFieldSeparately) {
  // Roofline GEMMs on a nominal machine: one more row costs more, and the memo must not return
  // the first op's price for the second; the same op again is the same cached entry.
  CostOptions opt;
  opt.min_kernel_s = 0;
  Topology topo(simtest::pcie_switch_machine(2));
  CostModel cost(topo, opt);
  Op a = base_op(), b = base_op();
  b.flops *= 8;  // compute-bound now
  const OpCost& ca = cost.price(a, false);
  const OpCost& cb = cost.price(b, false);
  EXPECT_NE(&ca, &cb);
  EXPECT_GT(cb.seconds, ca.seconds);
  Op a2 = base_op();
  a2.name = "L5.qkv", a2.layer = 5;
  EXPECT_EQ(&cost.price(a2, false), &ca) << "same priced fields: the memoised entry";
  EXPECT_NE(&cost.price(a, true), &ca) << "the launch mode is part of the key";
}
