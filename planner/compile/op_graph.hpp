#pragma once
// The op graph of one serving iteration of a plan: what the plan compiler produces and what the
// simulator (and the executor) consume. One op per GPU for compute; one op per group for
// collectives. Dependencies are op ids; ids are dense 0..N-1 and deps always point backwards.
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "planner/compile/expert_rows.hpp"
#include "planner/core/dtype.hpp"
#include "planner/plan/allreduce_rule.hpp"
#include "planner/topology/collective.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

enum class OpKind {
  Gemm,          // [m,k] x [k,n], batch_count times (e.g. local experts; MLA's absorbed per-head
                 // products: one strided-batched call, as torch.bmm), on gpus[0]
  GroupedGemm,   // routed MoE experts (issue 14): one grouped GEMM over the batch_count experts of this
                 // GPU that received tokens; m = routed rows summed over them, [k,n] per expert,
                 // group_max_rows = rows of the busiest expert. Only touched experts' weights are read.
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
// The NCCL collective a collective op runs (its name, size convention and bus factor live there).
// Throws std::invalid_argument for a kind that is not a collective.
CollOp coll_op(OpKind k);

// What an Elementwise op computes, set by the compiler so the executor picks its kernel and shape
// from the op rather than from its name. Prices do not depend on it (memory-bound: mem_bytes).
enum class EwKind {
  None,      // not an elementwise op
  RmsNorm,   // each of [rows][cols] rows normalised (MLA's q_a_norm and kv_norm)
  QkNorm,    // Qwen3's per-head RMSNorm of q and k (q_norm, k_norm: one head_dim weight each), in
             // place on the qkv GEMM's output before rotary: [rows][cols], cols = (q heads + kv
             // heads of the shard) * head_dim, each head_dim run normalised on its own
  Rotary,    // rotary embedding of q and k of `rows` tokens ([rows][cols]: cols = rotated values
             // per token), K and V written into the cache
  MlaRotary,  // MLA (DeepSeek-V2/V3): rope of each head's q_pe and the shared k_pe, the normalised
              // latent row written into the latent cache (mla_rope_and_cache), cols = (heads + 1) *
              // rope_dim. Its own kind, not Rotary: another kernel, whose cols can equal a standard
              // model's (17 x 64 is also 16 q + 1 kv heads of 64), so the profile keys it apart.
  Residual,  // residual add over [rows][cols]: no longer emitted (AddRmsNorm does it); profiles keep its
             // rows, which price AddRmsNorm with rms_norm's where a profile has no add_rms_norm row
  Act,       // MLP activation, [rows][cols] out: SiLU(gate) * up for a gated MLP (input [rows][2*cols])
  MoeRoute,  // MoE routing of [rows] tokens over [cols] experts: softmax of the router logits, top-k
             // (planner/model/routing.hpp), per-expert counts and offsets, tokens sorted by expert
  MoeCombine,  // MoE combine: each of [rows] tokens sums its k expert outputs of width [cols],
               // weighted by its router probabilities
  AddRmsNorm,  // residual += x, then the residual row normalised into out, over [rows][cols] (vLLM's
               // fused_add_rms_norm): attn_norm, mlp_norm and final_norm each add the block output
               // before them, so a layer has no separate residual add (docs/simulator.md)
};

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
  // Attention: the value head dim (attn_head_dim is q.k's). Equal to attn_head_dim but for MLA
  // (docs/attention.md "MLA"): prefill runs as MHA with q.k 192 and v 128; absorbed decode as MQA
  // over the 576-wide latent row whose first 512 values are also V.
  int64_t attn_v_dim = 0;
  // Attention: the layer's sliding window (0: full; issue 18). Decode's attn_context is already the
  // window-bounded context; a prefill chunk keeps its real context and is priced at the band's work
  // (planner/cost/attention_window.hpp).
  int64_t attn_window = 0;
  EwKind ew = EwKind::None;  // Elementwise: what it computes, over [ew_rows][ew_cols]
  int64_t ew_rows = 0, ew_cols = 0;
  int64_t group_max_rows = 0;  // GroupedGemm: rows of its busiest expert (tile padding, imbalance)
  // GroupedGemm: tokens the iteration routes on this GPU (its MoeRoute's rows). Above
  // kGraphTimedMaxRows the executor may run the experts as cuBLASLt calls instead of the grouped
  // kernel (moe_cublas_path, planner/model/moe_kernel_class.hpp), a path of another cost.
  int64_t group_tokens = 0;
  // GroupedGemm in the simulator's reduced model, where one compiled layer stands for several whose
  // routing differs: the share of those layers that route this load. Each distinct load is its own op,
  // priced on the kernel its busiest expert picks and weighted by its share, instead of one load
  // averaged and rounded across them (Mixtral EP2 at batch 1: the busiest rank holds both experts in
  // 14 of 32 layers; the rounded mean said one, and decode was priced 1.27x short; H200, session 10 X).
  // flops and mem_bytes are already scaled by it; 1 everywhere else.
  double group_share = 1.0;
  // GroupedGemm of an eager iteration (group_tokens > kGraphTimedMaxRows): each touched expert's rows in
  // each layer the op stands for, which the cuBLAS path is priced from (expert_rows.hpp); empty otherwise.
  ExpertRows group_expert_rows;
  // MoeRoute / GroupedGemm / MoeCombine: the experts this GPU holds, [expert_first, expert_first +
  // expert_count) of the model's ids (EP); where tokens go is planner/model/routing.hpp's. Placement
  // only: what they change in the price is already in m, batch_count and group_max_rows.
  int64_t expert_first = 0, expert_count = 0;
  DType wdtype = DType::BF16;  // Gemm / GroupedGemm: stored weight format (issue 15)
  // Gemm / GroupedGemm of a gated MLP's gate_up: writes SiLU(gate) * up, [m][n / 2], in its epilogue and no
  // activation op follows (act_fusion.hpp); mem_bytes counts the halved output.
  bool act_epilogue = false;
  DType kv_dtype = DType::BF16;  // Attention: KV-cache format (issue 15)
  // Communication.
  int64_t bytes = 0;        // collective: per-rank buffer (nccl-tests "size"); Send: bytes moved
  TransferMode mode = TransferMode::PeerCopyEngine;
  bool p2p = true;          // collectives: NCCL P2P allowed
  ArSetting allreduce = ArSetting::Nccl;  // AllReduce: the plan's setting; the kernel is choose_allreduce's
  std::vector<int> deps;
  // Compute ops: 0 the GPU's compute stream, 1 its auxiliary one. A MoE layer's shared experts at
  // decode, as vLLM runs them (forked after the router GEMM, joined at the combine: compiler.cpp,
  // kSharedStreamMaxTokens); the simulator lets the two share the GPU's HBM (iteration_cost.cpp).
  int stream = 0;
};

// Everything an op's price can depend on, in one place: the cost model's memo key and the
// simulator's segment signature hash and compare exactly these. The other fields (id, name,
// stage, layer, deps) only place the op in its graph. A new Op field must be added here or
// counted in kOpPlacementFields: the static_assert below counts Op's fields to make sure.
inline auto priced_fields(const Op& o) {
  return std::tie(o.kind, o.gpus, o.m, o.n, o.k, o.batch_count, o.flops, o.mem_bytes, o.attn_batch, o.attn_q_len,
                  o.attn_context, o.attn_heads, o.attn_kv_heads, o.attn_head_dim, o.attn_v_dim, o.attn_prefill,
                  o.attn_window, o.ew, o.ew_rows, o.ew_cols, o.group_max_rows, o.group_tokens, o.group_share, o.group_expert_rows, o.wdtype, o.act_epilogue, o.kv_dtype, o.bytes, o.mode,
                  o.p2p, o.allreduce);
}
inline constexpr size_t kOpPlacementFields = 8;  // id, name, stage, layer, deps, expert_first, expert_count, stream
// Hash of priced_fields (equal for ops that compare equal: -0.0 and 0.0 hash alike).
uint64_t priced_hash(const Op& o);
inline bool same_priced_fields(const Op& a, const Op& b) { return priced_fields(a) == priced_fields(b); }

namespace detail {
// Number of fields of an aggregate: the most initialisers T{...} accepts (what boost.pfr does).
struct AnyField {
  template <class T>
  operator T() const;
};
template <class T, class... A>
constexpr size_t aggregate_fields() {
  if constexpr (requires { T{A{}..., AnyField{}}; }) return aggregate_fields<T, A..., AnyField>();
  else return sizeof...(A);
}
}  // namespace detail
static_assert(detail::aggregate_fields<Op>() ==
                  std::tuple_size_v<decltype(priced_fields(std::declval<const Op&>()))> + kOpPlacementFields,
              "Op has a field neither priced_fields() nor kOpPlacementFields accounts for: add it to priced_fields() "
              "if it can change the op's time (else count it in kOpPlacementFields)");

// The requests in one iteration, as the scheduler forms it. The op graph is built as if every
// prefill chunk had the mean length q = ceil(prefill_tokens / prefill_seqs) and one context, so
// prefill_context is the context at which such chunks attend to as many causal (query, key) pairs
// as the iteration's own chunks: sum n_i (c_i - (n_i - 1) / 2) = prefill_tokens (ctx - (q - 1) / 2).
// One chunk, or equal chunks at one context: that context. BatchShapeSum computes it.
struct BatchShape {
  int64_t prefill_seqs = 0;      // sequences being prefilled (or chunk-prefilled)
  int64_t prefill_tokens = 0;    // their new tokens in this iteration, summed
  int64_t prefill_context = 0;   // the chunks' work-equivalent context (above; incl. the chunk itself)
  int64_t decode_seqs = 0;       // sequences decoding one token each
  int64_t decode_context = 0;    // mean context of the decoding sequences (their work is linear in it)
  // The decoding sequences' shortest and longest context and how many of decode_seqs are real (the
  // rest: a CUDA graph's padding rows, graph_batch.hpp). 0: not known, the contexts taken as equal.
  // Decode attention's time follows its longest blocks, not the mean (decode_split.hpp).
  int64_t decode_context_min = 0, decode_context_max = 0, decode_real_seqs = 0;
  int64_t tokens() const { return prefill_tokens + decode_seqs; }
};

// One iteration's sequences summed into its BatchShape: the one definition, used by the scheduler
// (planner/sim/scheduler.cpp) and the executor (profiler/exec/engine.cpp). Until 2026-12-04
// prefill_context was the chunks' mean context: an iteration that ends one prompt and starts the
// next (Llama-3.1-8B, 1674 tokens over 99 978 beside 6518 over 6518) was priced at 2.24x its
// attention work, and whole prompts of unequal length batched together below theirs.
class BatchShapeSum {
 public:
  void add_prefill(int64_t new_tokens, int64_t context);  // a chunk of new_tokens ending at context
  void add_decode(int64_t context);
  BatchShape shape() const;

 private:
  BatchShape s_;
  int64_t twice_pairs_ = 0;  // sum of n (2c - n + 1): twice the chunks' causal (query, key) pairs
  int64_t decode_ctx_ = 0;   // sum of the decoding sequences' contexts
  int64_t decode_min_ = 0, decode_max_ = 0;
};

struct OpGraph {
  BatchShape shape;
  int num_stages = 1;
  std::vector<Op> ops;
  // Ops of each stage in topological order (for pipelining micro-batches stage by stage).
  std::vector<std::vector<int>> stage_ops;
};

}  // namespace peerplan
