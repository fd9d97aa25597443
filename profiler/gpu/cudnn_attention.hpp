#pragma once
// Prefill attention through cuDNN 9's fused flash attention (the graph API, driven through the
// backend C calls: the cudnn-frontend header library is 3.3 MB and is not vendored).
//
// cuDNN is loaded with dlopen at first use, never linked: the binary starts and runs (on the
// executor's own kernel) on hosts without it. Where it is looked for, in order:
//   $PEERPLAN_CUDNN_LIB (a full path to libcudnn.so.9), then "libcudnn.so.9" through the loader's
//   search (LD_LIBRARY_PATH, ldconfig), then the nvidia-cudnn pip package of a Python install
//   (/opt/*/.venv, /usr/local/lib, /usr/lib: lib*/python3*/{site,dist}-packages/nvidia/cudnn/lib),
//   which is where the GPU hosts have it (PyTorch's dependency).
// Its sub-libraries and NVRTC (for cuDNN's runtime-compiled engines) are preloaded from the same
// folder and from the pip package's sibling nvidia/*/lib folders.
//
// The graph: S = Q K^T (fp32) -> x scale -> padding mask (seq_len_q, seq_len_kv from device memory)
// -> causal mask aligned bottom-right (a chunk of q_len new tokens over a context of seq_len keys:
// query i sees keys 0 .. seq_len - q_len + i) -> optional sliding window (keys within `window`
// of the query's position) -> softmax -> P V. GQA natively (kv heads < heads). Layouts are the
// executor's (profiler/kernels/attention.hpp): Q inside the fused QKV rows, sequences packed along
// the token axis (ragged offsets when there are several), the KV cache [slots][kv][max_ctx][d]
// read through a one-page-per-slot page table (cuDNN's paged attention) when a slot table is given.
// One graph per (device, shape, bucketed sequence count and max_q_len); built on first use or by
// cudnn_prefill_warmup (50-85 ms each on H200, cuDNN compiling its engine), then cached.
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

namespace peerplan::gpu {

struct CudnnPrefill {
  const void* q = nullptr;  // bf16 [total_q][q_row_stride]
  int64_t q_row_stride = 0;
  const void* k_cache = nullptr;  // bf16 [slots][kv_heads][max_ctx][head_dim]
  const void* v_cache = nullptr;
  const int* slots = nullptr;    // device [num_seqs]; nullptr: slot = index
  const int* q_start = nullptr;  // device [num_seqs + 1]
  const int* seq_lens = nullptr; // device [num_seqs]: context incl. the new tokens
  void* out = nullptr;           // bf16 [total_q][heads*head_dim]
  int num_seqs = 0, max_q_len = 0, heads = 0, kv_heads = 0, head_dim = 0, max_ctx = 0;
  float scale = 0;  // 0: 1/sqrt(head_dim)
  int window = 0;   // sliding window in keys (query at position p sees p-window+1 .. p); 0: none
  int num_slots = 0;  // slots in the cache (0: num_seqs): the page table indexes all of them
};

// The library: loaded once; "" when usable, else why not (the path tried, the loader's message).
const std::string& cudnn_load_error();
// "9.13.0 (/path/libcudnn.so.9)" or "" when not loaded.
std::string cudnn_description();

// Runs the attention on `stream`. Returns false, with the reason in *why, when cuDNN is absent or
// refuses the shape (no engine supports the graph): the caller then runs its own kernel. A
// failure after a graph was accepted (execution) throws.
bool cudnn_prefill_attention(const CudnnPrefill& a, cudaStream_t stream, std::string* why);

// Builds the graphs of every sequence-count bucket (powers of two) up to max_seqs and query-length
// bucket (powers of two from 64) up to max_q_len for calls shaped as `shape` (its pointers unused;
// slots non-null for the slot-table layout), as an engine does at start-up. Returns how many;
// stops at the first one refused (its reason in *why).
int cudnn_prefill_warmup(const CudnnPrefill& shape, int max_seqs, int max_q_len, std::string* why);

// Which prefill implementation runs: the environment's PEERPLAN_PREFILL_ATTENTION ("auto":
// cuDNN where it runs the shape, else the own kernel, also when unset; "cudnn": cuDNN or an error;
// "own"), unless set here. Auto became the default once every self-test layout passed through cuDNN
// and it was the fastest on every shape of the PyTorch reference (H200, 2026-12-03, docs/attention.md).
enum class PrefillBackend { Auto, Cudnn, Own };
PrefillBackend prefill_backend();
void set_prefill_backend(PrefillBackend b);
const char* prefill_backend_name(PrefillBackend b);

}  // namespace peerplan::gpu
