// Which implementation runs a prefill attention call: cuDNN's fused flash attention where it runs
// the shape (profiler/gpu/cudnn_attention.hpp; FlashAttention-3-class on Hopper), else the
// executor's own kernel (prefill_attention.cu). The choice is made per call inside
// kernels::prefill_attention, so the executor, the profiler and the self-test take the same path.
#include <atomic>
#include <mutex>

#include "planner/core/error.hpp"
#include "profiler/gpu/cudnn_attention.hpp"
#include "profiler/kernels/attention.hpp"

namespace peerplan::kernels {
namespace {
std::mutex why_mu;
std::string last_why;
std::atomic<bool> last_cudnn{false};
}  // namespace

bool prefill_attention_cudnn(const PrefillAttention& a, cudaStream_t stream) {
  const auto be = gpu::prefill_backend();
  // An FP8 KV cache (issue 15) runs on the own kernel: the cuDNN graph here reads bf16.
  if (be == gpu::PrefillBackend::Own || a.k_cache_fp8 || a.v_cache_fp8) {
    last_cudnn = false;
    return false;
  }
  // Auto: cuDNN wherever it runs the shape. Measured on one H200 beside PyTorch SDPA in the same lease
  // (2026-12-03, docs/attention.md): this graph is the fastest on every reference shape, causal
  // prompts (8192: 0.96 ms vs 1.75 own and flash) and chunks over a cached context alike (8192 over
  // 16384: 2.89 ms vs 5.19 own, 4.95 flash, 7.08 torch's cuDNN path).
  gpu::CudnnPrefill c;
  c.q = a.q;
  c.q_row_stride = a.q_row_stride;
  c.k_cache = a.k_cache;
  c.v_cache = a.v_cache;
  c.slots = a.slots;
  c.q_start = a.q_start;
  c.seq_lens = a.seq_lens;
  c.out = a.out;
  c.num_seqs = a.num_seqs;
  c.max_q_len = a.max_q_len;
  c.heads = a.heads;
  c.kv_heads = a.kv_heads;
  c.head_dim = a.head_dim;
  c.max_ctx = a.max_ctx;
  c.num_slots = a.num_slots;
  c.scale = a.scale;
  // Sliding window (issue 18): cuDNN's own band, built as cudnn-frontend builds its left bound before
  // cuDNN 9.21 (col + window - seq_kv + seq_q > row, bottom-right aligned: keys (p - window, p]); the
  // window is part of the graph's key. A cuDNN that refuses the windowed graph leaves the call to
  // the own kernel (auto), which skips the tiles outside the band, with the reason in
  // prefill_attention_last_path().
  c.window = a.window;
  std::string why;
  if (gpu::cudnn_prefill_attention(c, stream, &why)) {
    last_cudnn = true;
    return true;
  }
  if (be == gpu::PrefillBackend::Cudnn) throw RuntimeError("PEERPLAN_PREFILL_ATTENTION=cudnn: " + why);
  last_cudnn = false;
  std::lock_guard<std::mutex> l(why_mu);
  last_why = why;
  return false;
}

AttentionPath prefill_attention_path(bool kv_fp8) {
  AttentionPath p;
  p.kv_fp8 = kv_fp8;
  if (gpu::prefill_backend() == gpu::PrefillBackend::Own) {
    p.cudnn = false;
    p.no_cudnn_why = "PEERPLAN_PREFILL_ATTENTION=own";
  } else if (!gpu::cudnn_load_error().empty()) {
    p.cudnn = false;
    p.no_cudnn_why = "cuDNN does not load: " + gpu::cudnn_load_error();
  }
  return p;
}

std::string prefill_attention_last_path() {
  if (last_cudnn) return "cudnn " + gpu::cudnn_description();
  std::lock_guard<std::mutex> l(why_mu);
  return "own kernel" + (last_why.empty() ? std::string() : " (" + last_why + ")");
}

}  // namespace peerplan::kernels
