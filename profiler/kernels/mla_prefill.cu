// MLA prefill expansion (profiler/kernels/mla.hpp): per (context row, head) a warp writes the
// head's K = [k_nope | k_pe] and V = [v | 0] (192 each) into the scratch cache that
// prefill_attention reads with head_dim 192. The row's sequence is found by a binary search over
// ctx_start (a few sequences per call), so one launch covers packed sequences of any lengths.
#include <string>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mla.hpp"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;

__global__ void __launch_bounds__(kWarps * 32) mla_prefill_expand_kernel(MlaPrefillExpand a) {
  const int64_t gw = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (gw >= a.total_ctx * a.heads) return;
  const int64_t row = gw / a.heads;
  const int h = int(gw % a.heads), lane = threadIdx.x % 32;
  int lo = 0, hi = a.num_seqs;  // the sequence s with ctx_start[s] <= row < ctx_start[s + 1]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (a.ctx_start[mid] <= row) lo = mid;
    else hi = mid;
  }
  const int s = lo;
  const int pos = int(row - a.ctx_start[s]);
  const int slot = a.slots ? a.slots[s] : s;
  const __nv_bfloat162* kvb = reinterpret_cast<const __nv_bfloat162*>(a.kv_b + row * a.kv_b_row_stride + int64_t(h) * kMlaKvB);
  const __nv_bfloat162* pe =
      reinterpret_cast<const __nv_bfloat162*>(a.cache + (int64_t(slot) * a.cache_max_ctx + pos) * kMlaRow + kMlaLatent);
  const int64_t dst = ((int64_t(s) * a.heads + h) * a.max_ctx + pos) * kMlaQkDim;
  __nv_bfloat162* k = reinterpret_cast<__nv_bfloat162*>(a.k_out + dst);
  __nv_bfloat162* v = reinterpret_cast<__nv_bfloat162*>(a.v_out + dst);
  const __nv_bfloat162 zero = __floats2bfloat162_rn(0.f, 0.f);
  for (int p = lane; p < kMlaQkDim / 2; p += 32) {  // pairs of dims
    const bool nope = 2 * p < kMlaQkNope;
    k[p] = nope ? kvb[p] : pe[p - kMlaQkNope / 2];
    v[p] = 2 * p < kMlaVDim ? kvb[kMlaQkNope / 2 + p] : zero;
  }
}

}  // namespace

void mla_prefill_expand(const MlaPrefillExpand& a, cudaStream_t stream) {
  if (a.total_ctx < 0 || a.num_seqs < 0 || a.heads < 0) throw RuntimeError("mla_prefill_expand: negative size");
  if (a.total_ctx == 0 || a.heads == 0) return;
  if (a.num_seqs == 0) throw RuntimeError("mla_prefill_expand: rows without sequences");
  if (!a.kv_b || !a.cache || !a.ctx_start || !a.k_out || !a.v_out)
    throw RuntimeError("mla_prefill_expand: kv_b, cache, ctx_start, k_out and v_out are required");
  if (a.kv_b_row_stride % 2 != 0 || a.kv_b_row_stride < int64_t(a.heads) * kMlaKvB)
    throw RuntimeError("mla_prefill_expand: kv_b_row_stride must be even and at least heads x 256");
  if (a.max_ctx <= 0 || a.cache_max_ctx <= 0) throw RuntimeError("mla_prefill_expand: max_ctx and cache_max_ctx must be > 0");
  const int64_t blocks = (a.total_ctx * a.heads + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) throw RuntimeError("mla_prefill_expand: " + std::to_string(a.total_ctx) + " rows exceed the grid");
  mla_prefill_expand_kernel<<<unsigned(blocks), kWarps * 32, 0, stream>>>(a);
  CUDA_CHECK_LAUNCH("mla_prefill_expand");
}

}  // namespace peerplan::kernels
