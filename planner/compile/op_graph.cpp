#include "planner/compile/op_graph.hpp"

namespace peerplan {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::Gemm: return "gemm";
    case OpKind::Attention: return "attention";
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Embedding: return "embedding";
    case OpKind::AllReduce: return "all_reduce";
    case OpKind::AllGather: return "all_gather";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllToAll: return "all_to_all";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Send: return "send";
  }
  return "?";
}

const char* op_class(OpKind k) {
  switch (k) {
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::Broadcast: return "collective";
    default: return to_string(k);  // the other kinds are their own class
  }
}

}  // namespace peerplan
