#pragma once
// NCCL collectives: their names, nccl-tests' size convention and bus-bandwidth factors, defined
// once for the profiler (which measures them), the compiler (which emits them) and the cost model
// (which prices them). Formulas from nccl-tests src/*.cu ("getBw" of each test).
//
// `bytes` is nccl-tests' "size" column: for all_gather the receive buffer (count * nranks), for
// reduce_scatter the send buffer, for all_to_all the whole per-rank buffer, otherwise the buffer.
//   algBw = size / time
//   busBw = algBw * factor, factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all
//           (n-1)/n; broadcast and send_recv 1 (nccl-tests: broadcast busBw = algBw for any n).
// busBw is comparable across GPU counts: the factor is what each rank moves over its busiest link
// relative to size, so a ring moves factor * size bytes per hop.
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan {

enum class CollOp { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv, Broadcast };

const std::vector<CollOp>& all_coll_ops();
const char* coll_op_name(CollOp op);                 // "all_reduce", ... (the profile's JSON names)
CollOp coll_op_from_name(const std::string& name);   // throws InputError listing the valid names

// nccl-tests' busBw / algBw for a group of n ranks (0 for an empty group).
double bus_bw_factor(CollOp op, int nranks);
// Bytes each rank moves over its busiest link for a collective of nccl-tests size `bytes`.
inline double bus_bytes(CollOp op, int nranks, double bytes) { return bus_bw_factor(op, nranks) * bytes; }
double alg_bw_gbps(int64_t bytes, double seconds);   // GB/s, 1e9 B/s; 0 for no time
double bus_bw_gbps(CollOp op, int nranks, int64_t bytes, double seconds);

// Element counts of one rank's send and receive buffers for a collective of nccl-tests size
// `bytes` with `elem_bytes`-byte elements (nccl-tests rounds size down to a multiple of
// nranks * elem_bytes where the op splits the buffer; so does this).
struct CollCounts {
  int64_t send_count = 0, recv_count = 0;  // elements
  int64_t size_bytes = 0;                  // the size actually moved, in nccl-tests' convention
};
CollCounts coll_counts(CollOp op, int nranks, int64_t bytes, int elem_bytes);

}  // namespace peerplan
