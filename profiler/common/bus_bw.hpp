#pragma once
// nccl-tests' bandwidth formulas (src/*.cu, "getBw" of each test), as small pure functions.
// `bytes` is nccl-tests' "size" column: for all_gather the receive buffer (count * nranks),
// for reduce_scatter the send buffer, for all_to_all the whole per-rank buffer, otherwise the buffer.
//   algBw = size / time
//   busBw = algBw * factor, factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
//           broadcast, reduce, send_recv 1.
// busBw is comparable across GPU counts: it is the per-link rate the algorithm's busiest link sees.
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan::profiler {

enum class CollOp { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv, Broadcast };

const std::vector<CollOp>& all_coll_ops();
const char* coll_op_name(CollOp op);                 // "all_reduce", ... (the JSON names)
CollOp coll_op_from_name(const std::string& name);   // throws InputError for unknown names

double bus_bw_factor(CollOp op, int nranks);
double alg_bw_gbps(int64_t bytes, double seconds);   // GB/s, 1e9 B/s
double bus_bw_gbps(CollOp op, int nranks, int64_t bytes, double seconds);

// Element counts of one rank's send and receive buffers for a collective of nccl-tests size
// `bytes` with `elem_bytes`-byte elements (nccl-tests rounds size down to a multiple of
// nranks * elem_bytes where the op splits the buffer; so does this).
struct CollCounts {
  int64_t send_count = 0, recv_count = 0;  // elements
  int64_t size_bytes = 0;                  // the size actually moved, in nccl-tests' convention
};
CollCounts coll_counts(CollOp op, int nranks, int64_t bytes, int elem_bytes);

}  // namespace peerplan::profiler
