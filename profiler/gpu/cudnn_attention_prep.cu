// Device-side inputs of the cuDNN attention graph (profiler/gpu/cudnn_attention.cpp), derived on the
// stream from the executor's own metadata so nothing is copied to the host: per sequence the new
// tokens (q_start[i+1] - q_start[i]), the context, the cache page (its slot), and the ragged
// offsets (elements) of Q and O along the packed token axis and of each sequence's cache slot.
#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::gpu {
namespace {

// Sequences n .. b-1 pad the call to its graph's bucket: no tokens, no context, offsets at the end
// of the packed tokens, page 0 (never read).
__global__ void cudnn_prep_kernel(const int* q_start, const int* seq_lens, const int* slots, int n, int b,
                                  int64_t q_stride, int64_t o_stride, int64_t slot_stride, int* seq_q, int* seq_kv,
                                  int* page, int* q_off, int* o_off, int* kv_off) {
  for (int i = threadIdx.x; i <= b; i += blockDim.x) {
    const bool real = i < n;
    const int slot = real ? (slots ? slots[i] : i) : 0;
    if (i < b) {
      seq_q[i] = real ? q_start[i + 1] - q_start[i] : 0;
      seq_kv[i] = real ? seq_lens[i] : 0;
      page[i] = slot;
    }
    const int t = q_start[i < n ? i : n];
    q_off[i] = int(int64_t(t) * q_stride);
    o_off[i] = int(int64_t(t) * o_stride);
    kv_off[i] = int(int64_t(slot) * slot_stride);
  }
}

}  // namespace

// n: the call's sequences, b >= n: its graph's bucket. `buf` holds 6 int arrays, `pitch` ints apart (a multiple of 64: each starts 256-byte aligned, as
// the tensors' declared 16-byte alignment needs): seq_q, seq_kv, page, q_off, o_off, kv_off.
void launch_cudnn_prep(const int* q_start, const int* seq_lens, const int* slots, int n, int b, int64_t q_stride,
                       int64_t o_stride, int64_t slot_stride, int* buf, int pitch, cudaStream_t s) {
  cudnn_prep_kernel<<<1, 256, 0, s>>>(q_start, seq_lens, slots, n, b, q_stride, o_stride, slot_stride, buf, buf + pitch,
                                      buf + 2 * pitch, buf + 3 * pitch, buf + 4 * pitch, buf + 5 * pitch);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace peerplan::gpu
