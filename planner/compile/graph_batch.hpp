#pragma once
// The batch a decode iteration really runs at when it is a CUDA graph: engines capture graphs for a
// few batch sizes and pad a decode batch up to the next one (vLLM's capture sizes: 1, 2, 4, then
// multiples of 8), and the padding sequences run every op too (for MoE they are routed, so they touch
// more experts). The executor pads this way (profiler/exec/engine.cpp) and the pricer prices the
// padded batch (planner/sim/iteration_cost.cpp). Measured on one H200 (2026-12-03,
// docs/validation/runs/2026-12-03-session5): Mixtral decode steps at batch 3 took as long as at 4
// (27.3 ms), 5-8 as long as 8 (32.8 ms); priced unpadded they were 15-18 % low.
#include <cstdint>

#include "planner/compile/op_graph.hpp"

namespace peerplan {

// Rows (tokens) up to this are decode-sized: the profiler times GEMM and grouped-GEMM rows of at
// most this many in CUDA graphs, as decode steps run, and larger ones eagerly, as prefill runs; the
// executor takes cuBLAS per expert only above it and the serving simulation counts only larger
// prefill iterations as drawing the power cap. (vLLM's largest capture size before V1; V1 captures
// up to 512 in steps of 16.) Decode batches above it run eagerly and unpadded, in the executor and
// in the pricer alike, so a step of more rows runs what the profile timed for it (eager rows; MoE:
// the cuBLAS-per-expert dispatch a graph capture cannot take).
inline constexpr int64_t kGraphTimedMaxRows = 256;

// A decode batch's CUDA-graph batch; itself where it runs eagerly (above kGraphTimedMaxRows).
inline int64_t cuda_graph_batch(int64_t b) {
  if (b > kGraphTimedMaxRows) return b;
  if (b <= 1) return 1;
  if (b <= 2) return 2;
  if (b <= 4) return 4;
  return (b + 7) / 8 * 8;
}

// Whether a decode-only iteration of this many sequences runs as a CUDA graph (the executor's rule).
inline bool decode_runs_as_graph(int64_t decode_seqs) { return decode_seqs > 0 && decode_seqs <= kGraphTimedMaxRows; }

// Whether an iteration of this shape runs as a CUDA graph: decode-only, at most kGraphTimedMaxRows.
inline bool runs_as_graph(const BatchShape& s) {
  return s.prefill_seqs == 0 && s.prefill_tokens == 0 && decode_runs_as_graph(s.decode_seqs);
}

// A decode-only shape padded to its graph batch: the padding sequences hold one token of context
// each, as the executor's (decode_context is the mean context; decode_real_seqs keeps how many are
// real, the min / max stay theirs). Other shapes run eagerly: unchanged.
inline BatchShape graph_padded(BatchShape s) {
  if (s.prefill_seqs != 0 || s.prefill_tokens != 0 || s.decode_seqs <= 0) return s;
  const int64_t p = cuda_graph_batch(s.decode_seqs);
  if (p == s.decode_seqs) return s;
  if (s.decode_real_seqs <= 0 || s.decode_real_seqs > s.decode_seqs) s.decode_real_seqs = s.decode_seqs;
  s.decode_context = (s.decode_context * s.decode_seqs + (p - s.decode_seqs) + p - 1) / p;
  s.decode_seqs = p;
  return s;
}

}  // namespace peerplan
