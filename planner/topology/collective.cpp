#include "planner/topology/collective.hpp"

#include "planner/core/error.hpp"

namespace peerplan {

const std::vector<CollOp>& all_coll_ops() {
  static const std::vector<CollOp> ops = {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter,
                                          CollOp::AllToAll,  CollOp::SendRecv,  CollOp::Broadcast};
  return ops;
}

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::AllReduce: return "all_reduce";
    case CollOp::AllGather: return "all_gather";
    case CollOp::ReduceScatter: return "reduce_scatter";
    case CollOp::AllToAll: return "all_to_all";
    case CollOp::SendRecv: return "send_recv";
    case CollOp::Broadcast: return "broadcast";
  }
  return "?";
}

CollOp coll_op_from_name(const std::string& name) {
  for (CollOp op : all_coll_ops())
    if (name == coll_op_name(op)) return op;
  throw InputError("", "collective", "one of all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast; got '" + name + "'");
}

double bus_bw_factor(CollOp op, int n) {
  if (n < 1) return 0;
  const double dn = double(n);
  switch (op) {
    case CollOp::AllReduce: return 2.0 * (dn - 1) / dn;
    case CollOp::AllGather:
    case CollOp::ReduceScatter:
    case CollOp::AllToAll: return (dn - 1) / dn;
    case CollOp::SendRecv:
    case CollOp::Broadcast: return 1.0;
  }
  return 1.0;
}

double alg_bw_gbps(int64_t bytes, double seconds) { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0; }

double bus_bw_gbps(CollOp op, int nranks, int64_t bytes, double seconds) {
  return alg_bw_gbps(bytes, seconds) * bus_bw_factor(op, nranks);
}

CollCounts coll_counts(CollOp op, int n, int64_t bytes, int elem_bytes) {
  CollCounts c;
  const int64_t elems = bytes / elem_bytes;
  switch (op) {
    case CollOp::AllReduce:
    case CollOp::Broadcast:
    case CollOp::SendRecv:
      c.send_count = c.recv_count = elems;
      c.size_bytes = elems * elem_bytes;
      break;
    case CollOp::AllGather:  // size = recv buffer = n * sendcount
      c.send_count = elems / n;
      c.recv_count = c.send_count * n;
      c.size_bytes = c.recv_count * elem_bytes;
      break;
    case CollOp::ReduceScatter:  // size = send buffer = n * recvcount
      c.recv_count = elems / n;
      c.send_count = c.recv_count * n;
      c.size_bytes = c.send_count * elem_bytes;
      break;
    case CollOp::AllToAll:  // size = whole buffer, n chunks of count/n
      c.send_count = c.recv_count = (elems / n) * n;
      c.size_bytes = c.send_count * elem_bytes;
      break;
  }
  return c;
}

}  // namespace peerplan
