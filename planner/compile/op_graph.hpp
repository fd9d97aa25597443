#pragma once
// The op graph of one serving iteration of a plan: what the plan compiler produces and what the
// simulator (and the executor) consume. One op per GPU for compute; one op per group for
// collectives. Dependencies are op ids; ids are dense 0..N-1 and deps always point backwards.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/topology/topology.hpp"

namespace peerplan {

enum class OpKind {
  Gemm,          // [m,k] x [k,n], batch_count times (e.g. local experts), on gpus[0]
  Attention,     // flash-style attention over the KV cache (flops + mem_bytes + attn_* shape)
  Elementwise,   // norms, rotary, activation, residual adds: memory-bound (mem_bytes)
  Embedding,     // token embedding lookup (mem_bytes)
  AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast,  // NCCL collectives over gpus
  Send,          // point-to-point activation transfer gpus[0] -> gpus[1] in `mode`
};
const char* to_string(OpKind k);
// The class an op's time is reported under when predicted and measured times are compared
// ("gemm", "attention", "elementwise", "embedding", "send", "all_to_all", "collective"). One
// definition, so the simulator's and the executor's per-class tables always line up.
const char* op_class(OpKind k);
inline bool is_collective(OpKind k) {
  return k == OpKind::AllReduce || k == OpKind::AllGather || k == OpKind::ReduceScatter ||
         k == OpKind::AllToAll || k == OpKind::Broadcast;
}
inline bool is_compute(OpKind k) { return k <= OpKind::Embedding; }

struct Op {
  int id = 0;
  OpKind kind = OpKind::Gemm;
  std::string name;         // "L12.qkv", "L12.attn", "L12.tp_allreduce", "stage0->1"
  int stage = 0;
  int layer = -1;           // decoder layer, -1 for embedding / LM head / boundaries
  std::vector<int> gpus;    // compute: {gpu}; collective: the group; Send: {src, dst}
  // Compute shape.
  int64_t m = 0, n = 0, k = 0, batch_count = 1;
  double flops = 0;         // total FLOPs of the op (GEMM: 2*m*n*k*batch_count)
  double mem_bytes = 0;     // HBM bytes the op must move (weights + activations + KV)
  int64_t attn_batch = 0, attn_q_len = 0, attn_context = 0, attn_heads = 0, attn_kv_heads = 0, attn_head_dim = 0;
  bool attn_prefill = false;
  // Communication.
  int64_t bytes = 0;        // collective: per-rank buffer (nccl-tests "size"); Send: bytes moved
  TransferMode mode = TransferMode::PeerCopyEngine;
  bool p2p = true;          // collectives: NCCL P2P allowed
  std::vector<int> deps;
};

// The requests in one iteration, as the scheduler forms it.
struct BatchShape {
  int64_t prefill_seqs = 0;      // sequences being prefilled (or chunk-prefilled)
  int64_t prefill_tokens = 0;    // their new tokens in this iteration, summed
  int64_t prefill_context = 0;   // mean context each prefill chunk attends to (incl. itself)
  int64_t decode_seqs = 0;       // sequences decoding one token each
  int64_t decode_context = 0;    // mean context of the decoding sequences
  int64_t tokens() const { return prefill_tokens + decode_seqs; }
};

struct OpGraph {
  BatchShape shape;
  int num_stages = 1;
  std::vector<Op> ops;
  // Ops of each stage in topological order (for pipelining micro-batches stage by stage).
  std::vector<std::vector<int>> stage_ops;
};

}  // namespace peerplan
