#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/topology/collective.hpp"

using namespace peerplan;

TEST(Collective, FactorsAreNcclTests) {
  // nccl-tests: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; others 1.
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::AllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::AllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::SendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::Broadcast, 8), 1.0);
  // nccl-tests broadcast.cu: busBw = algBw (factor 1) for any rank count, one rank included.
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::Broadcast, 1), 1.0);
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::AllReduce, 1), 0.0) << "one rank reduces nothing over a link";
  EXPECT_DOUBLE_EQ(bus_bw_factor(CollOp::AllGather, 0), 0.0) << "an empty group moves nothing";
  EXPECT_DOUBLE_EQ(bus_bytes(CollOp::AllReduce, 4, 1e9), 1.5e9) << "a ring all-reduce moves 2(n-1)/n of the buffer per hop";
}

TEST(Collective, AlgAndBusBandwidthOfAMeasuredPoint) {
  // 2 GiB all-gather on 2 GPUs in 3.58 ms: algBw 600 GB/s, busBw 300 (the nccl-tests target).
  int64_t b = int64_t(2) << 30;
  double t = double(b) / 600e9;
  EXPECT_NEAR(alg_bw_gbps(b, t), 600.0, 1e-9);
  EXPECT_NEAR(bus_bw_gbps(CollOp::AllGather, 2, b, t), 300.0, 1e-9);
  EXPECT_EQ(alg_bw_gbps(b, 0), 0.0) << "no division by zero for an empty timing";
}

TEST(Collective, CountsFollowNcclTestsSizeConvention) {
  // all_gather: size is the receive buffer; each rank sends size / n.
  auto ag = coll_counts(CollOp::AllGather, 4, 4096, 4);
  EXPECT_EQ(ag.send_count, 256);
  EXPECT_EQ(ag.recv_count, 1024);
  EXPECT_EQ(ag.size_bytes, 4096);
  // reduce_scatter: size is the send buffer.
  auto rs = coll_counts(CollOp::ReduceScatter, 4, 4096, 4);
  EXPECT_EQ(rs.recv_count, 256);
  EXPECT_EQ(rs.send_count, 1024);
  // Sizes that do not split evenly are rounded down, as nccl-tests does.
  auto odd = coll_counts(CollOp::AllToAll, 3, 4096, 4);  // 1024 floats -> 1023 (3 x 341)
  EXPECT_EQ(odd.send_count, 1023);
  EXPECT_EQ(odd.size_bytes, 4092);
  auto ar = coll_counts(CollOp::AllReduce, 8, 4096, 4);
  EXPECT_EQ(ar.send_count, 1024);
  EXPECT_EQ(ar.recv_count, 1024);
}

TEST(Collective, OpNamesRoundTrip) {
  for (CollOp op : all_coll_ops()) EXPECT_EQ(coll_op_from_name(coll_op_name(op)), op);
  EXPECT_THROW(coll_op_from_name("allreduce"), InputError) << "JSON uses all_reduce; a near miss must be an error";
}
