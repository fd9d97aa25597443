#include <gtest/gtest.h>

#include "planner/compile/op_graph.hpp"

namespace peerplan {

TEST(OpClass, ReductionsShareOneClassOtherKindsAreTheirOwn) {
  // Validation compares predicted and measured time per class: both sides must bucket alike.
  EXPECT_STREQ(op_class(OpKind::AllReduce), "collective");
  EXPECT_STREQ(op_class(OpKind::AllGather), "collective");
  EXPECT_STREQ(op_class(OpKind::ReduceScatter), "collective");
  EXPECT_STREQ(op_class(OpKind::Broadcast), "collective");
  EXPECT_STREQ(op_class(OpKind::AllToAll), "all_to_all");
  EXPECT_STREQ(op_class(OpKind::Send), "send");
  EXPECT_STREQ(op_class(OpKind::Gemm), "gemm");
  EXPECT_STREQ(op_class(OpKind::Elementwise), "elementwise");
}

}  // namespace peerplan
