// GPU self-test of every executor kernel against a CPU fp64 reference: fresh random inputs per
// run, outputs poisoned with NaN first (an unwritten element fails), error as ||out-ref||/||ref||
// with the bf16 tolerance of METHOD.md (bf16 outputs: 1e-2).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "profiler/exec/executor.hpp"
#include "profiler/exec/self_test_mla.hpp"
#include "profiler/exec/self_test_qknorm.hpp"
#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/cudnn_attention.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"

namespace peerplan::exec {

namespace selftest {  // not anonymous: self_test_util.hpp shares the helpers with the other case files

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;
constexpr double kTol = 1e-2;

struct Host {
  std::vector<bf16> v;
  std::vector<double> d;  // the bf16 values as doubles (what the GPU sees)
};

std::vector<bf16> random_bf16(size_t n, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<bf16> v(n);
  for (auto& x : v) x = __float2bfloat16(float(u(rng)));
  return v;
}

Host random_host(size_t n, std::mt19937_64& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  Host h;
  h.v.resize(n);
  h.d.resize(n);
  for (size_t i = 0; i < n; ++i) {
    h.v[i] = __float2bfloat16(float(u(rng)));
    h.d[i] = double(__bfloat162float(h.v[i]));
  }
  return h;
}

// upload, upload_int, poisoned, compare, ref_attend: self_test_util.cpp (shared with the other case files).

// The reference with a sliding window (issue 18): the query at position pos attends to keys
// (pos - window, pos] (window 0: [0, pos]), Mistral's convention (transformers'
// sliding_window_overlay: kv_idx > q_idx - sliding_window; vLLM: flash-attn window_size =
// (sliding_window - 1, 0)).
void ref_attend_window(const double* q, const std::vector<double>& K, const std::vector<double>& V, int64_t base,
                       int pos, int window, int D, double* out) {
  const int first = window > 0 ? std::max(0, pos + 1 - window) : 0;
  ref_attend(q, K, V, base + int64_t(first) * D, pos + 1 - first, D, 1.0 / std::sqrt(double(D)), out);
}


// Decode attention on one shape against ref_attend; slot_of empty: the kernel gets no slot table
// (slot = sequence index).
SelfTestResult decode_case(int dev, int sms, std::mt19937_64& rng, int D, int kvh, int group, int max_ctx,
                           const std::vector<int>& lens, const std::vector<int>& slot_of, int slots, int window = 0) {
  const int heads = kvh * group, batch = int(lens.size());
  Host K = random_host(size_t(slots) * kvh * max_ctx * D, rng), V = random_host(K.v.size(), rng);
  const int64_t qstride = (heads + 2 * kvh) * D;  // q inside a fused QKV row, as the executor passes it
  Host Q = random_host(size_t(batch * qstride), rng);
  auto dk = upload(dev, K.v), dv = upload(dev, V.v), dq = upload(dev, Q.v);
  auto dl = upload_int(dev, lens), ds = upload_int(dev, slot_of);
  auto dout = poisoned(dev, size_t(batch) * heads * D);
  gpu::DeviceBuffer ws(dev, std::max<size_t>(256, kn::decode_attention_workspace_bytes(batch, heads, D, max_ctx, kvh, sms)));
  kn::DecodeAttention a;
  a.q = dq.as<bf16>();
  a.q_row_stride = qstride;
  a.k_cache = dk.as<bf16>();
  a.v_cache = dv.as<bf16>();
  a.slots = slot_of.empty() ? nullptr : ds.as<int>();
  a.seq_lens = dl.as<int>();
  a.out = dout.as<bf16>();
  a.workspace = ws.as<float>();
  a.batch = batch, a.heads = heads, a.kv_heads = kvh, a.head_dim = D, a.max_ctx = max_ctx;
  a.window = window;
  kn::decode_attention(a, sms, nullptr);
  std::vector<double> ref(size_t(batch) * heads * D);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int slot = slot_of.empty() ? b : slot_of[size_t(b)];
      const int64_t base = (int64_t(slot) * kvh + h / group) * max_ctx * D;
      ref_attend_window(&Q.d[size_t(b * qstride + h * D)], K.d, V.d, base, lens[size_t(b)] - 1, window, D,
                        &ref[size_t((b * heads + h) * D)]);
    }
  std::string ls;
  for (int l : lens) ls += (ls.empty() ? "" : ",") + std::to_string(l);
  return compare("decode_attention",
                 fmt::format("{}b={} heads={} kv={} D={} cap={} lens={}{}", window ? fmt::format("window={} ", window) : "",
                             batch, heads, kvh, D, max_ctx, ls, slot_of.empty() ? " no-slots" : ""),
                 dout, ref);
}

// Prefill attention of packed sequences: sequence s has qlen[s] new tokens, the last of its ctx[s]
// cached ones (ctx > qlen: a chunk continuing a cached context).
SelfTestResult prefill_case(int dev, std::mt19937_64& rng, int D, int kvh, int group, int max_ctx,
                            const std::vector<int>& qlen, const std::vector<int>& ctx,
                            const std::vector<int>& slot_of, int slots, int window = 0) {
  const int heads = kvh * group, nseq = int(qlen.size());
  std::vector<int> qstart{0};
  for (int l : qlen) qstart.push_back(qstart.back() + l);
  const int total = qstart.back();
  Host K = random_host(size_t(slots) * kvh * max_ctx * D, rng), V = random_host(K.v.size(), rng);
  const int64_t qstride = (heads + 2 * kvh) * D;
  Host Q = random_host(size_t(total * qstride), rng);
  auto dk = upload(dev, K.v), dv = upload(dev, V.v), dq = upload(dev, Q.v);
  auto dqs = upload_int(dev, qstart), dl = upload_int(dev, ctx), ds = upload_int(dev, slot_of);
  auto dout = poisoned(dev, size_t(total) * heads * D);
  kn::PrefillAttention a;
  a.q = dq.as<bf16>();
  a.q_row_stride = qstride;
  a.k_cache = dk.as<bf16>();
  a.v_cache = dv.as<bf16>();
  a.slots = slot_of.empty() ? nullptr : ds.as<int>();
  a.q_start = dqs.as<int>();
  a.seq_lens = dl.as<int>();
  a.out = dout.as<bf16>();
  a.num_seqs = nseq, a.max_q_len = *std::max_element(qlen.begin(), qlen.end());
  a.heads = heads, a.kv_heads = kvh, a.head_dim = D, a.max_ctx = max_ctx;
  a.num_slots = slots;
  a.window = window;
  // Named before it runs: a fault in cuDNN's engine kills the process, and the log then says which case.
  if (gpu::prefill_backend() != gpu::PrefillBackend::Own || window > 0)
    std::fprintf(stderr, "self-test: prefill case: %d seqs, max q %d, heads %d/%d, D %d, max_ctx %d, %s, window %d (%s)\n",
                 nseq, a.max_q_len, heads, kvh, D, max_ctx, slot_of.empty() ? "no slots" : "slots", window,
                 gpu::prefill_backend_name(gpu::prefill_backend()));
  kn::prefill_attention(a, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> ref(size_t(total) * heads * D);
  for (int s = 0; s < nseq; ++s)
    for (int i = 0; i < qlen[size_t(s)]; ++i)
      for (int h = 0; h < heads; ++h) {
        const int row = qstart[size_t(s)] + i;
        const int pos = ctx[size_t(s)] - qlen[size_t(s)] + i;
        const int slot = slot_of.empty() ? s : slot_of[size_t(s)];
        const int64_t base = (int64_t(slot) * kvh + h / group) * max_ctx * D;
        ref_attend_window(&Q.d[size_t(row * qstride + h * D)], K.d, V.d, base, pos, window, D,
                          &ref[size_t((row * heads + h) * D)]);
      }
  std::string qs, cs;
  for (int s = 0; s < nseq; ++s) {
    qs += (s ? "," : "") + std::to_string(qlen[size_t(s)]);
    cs += (s ? "," : "") + std::to_string(ctx[size_t(s)]);
  }
  // The path that ran it (issue 18): cuDNN's fused attention or the own kernel.
  const bool dnn = kn::prefill_attention_last_path().rfind("cudnn", 0) == 0;
  if (window > 0 && !dnn && gpu::prefill_backend() != gpu::PrefillBackend::Own)  // cuDNN refused the band: why
    std::fprintf(stderr, "self-test: windowed prefill (window %d) ran on the %s\n", window,
                 kn::prefill_attention_last_path().c_str());
  return compare(dnn ? "prefill_attention[cudnn]" : "prefill_attention[own]",
                 fmt::format("{}{} seqs q={} ctx={} heads={} kv={} D={}{}", window ? fmt::format("window={} ", window) : "",
                             nseq, qs, cs, heads, kvh, D, slot_of.empty() ? " no-slots" : ""),
                 dout, ref);
}

// The general decode kernels (attention_support.hpp): groups off 1/2/4/8/16 (the next group tile,
// extra query rows masked) and head_dim 80 and 96 (the 128 dim tile, extra dims never loaded), on
// the split-K, single-chunk and cluster-merged grids. Qwen2.5-7B has 7 query heads per kv head,
// Qwen2.5-14B/32B 5, Phi-3-mini head_dim 96 with 1.
template <class Dec>
void general_decode_cases(Dec& dec, const std::vector<int>& lens40, const std::vector<int>& perm40) {
  dec(128, 2, 7, 1500, {1, 333, 1500}, {2, 0, 3}, 4);       // split-K + merge kernel
  dec(128, 8, 5, 64, {64, 1, 37}, {0, 2, 1}, 3);            // one chunk per sequence
  dec(64, 3, 3, 1100, {1, 129, 1100}, {1, 2, 0}, 3);
  dec(128, 1, 6, 700, {700, 65, 17}, {1, 2, 0}, 3);
  dec(128, 4, 7, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4);  // 16 pairs: cluster-merged splits
  dec(128, 1, 9, 700, {700, 65, 17}, {1, 2, 0}, 3);         // 16-row tile, one upper row real
  dec(64, 2, 15, 300, {300, 2}, {}, 2);
  dec(96, 4, 1, 2000, {1999, 64, 1000, 5}, {}, 4);          // Phi-3-mini: MHA, head_dim 96
  dec(96, 8, 4, 64, {64, 1, 37}, {0, 2, 1}, 3);
  dec(96, 8, 7, 600, lens40, perm40, 41);                   // several 16-token steps per warp (lens <= 600)
  dec(96, 1, 12, 700, {700, 65, 17}, {1, 2, 0}, 3);
  dec(80, 2, 8, 1500, {1, 333, 1500}, {2, 0, 3}, 4);
  dec(80, 4, 7, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4);
  dec(80, 8, 1, 64, {64, 1, 37}, {0, 2, 1}, 3);
}

// ---- decode attention: head_dim 64 and 128, GQA groups 1..16, split-K (several chunks, the
// last one partial; lengths off the 16-token step) and single-chunk grids, slots and none ----
void decode_attention_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  auto dec = [&](int D, int kvh, int group, int max_ctx, std::vector<int> lens, std::vector<int> slot_of,
                 int slots) {
    out.push_back(decode_case(dev, sms, rng, D, kvh, group, max_ctx, lens, slot_of, slots));
  };
  dec(128, 2, 4, 1500, {1, 333, 1500}, {2, 0, 3}, 4);
  dec(128, 2, 8, 1500, {1, 333, 1500}, {2, 0, 3}, 4);
  dec(128, 1, 16, 700, {700, 65, 17}, {1, 2, 0}, 3);
  dec(128, 4, 1, 2000, {1999, 64, 1000, 5}, {}, 4);  // MHA, no slot table
  dec(64, 2, 4, 1100, {1, 129, 1100}, {1, 2, 0}, 3);
  dec(64, 3, 8, 300, {300, 2}, {}, 2);
  dec(128, 8, 4, 64, {64, 1, 37}, {0, 2, 1}, 3);  // capacity 64: one chunk per sequence, no merge
  // 40 sequences x 8 kv heads: few chunks per sequence, so each warp runs several 16-token steps
  // (the running softmax across steps); lengths spread over the capacity.
  std::vector<int> lens40, perm40;
  for (int i = 0; i < 40; ++i) {
    lens40.push_back(1 + (i * 97) % 520);
    perm40.push_back((i * 7 + 3) % 41);
  }
  dec(128, 8, 8, 520, lens40, perm40, 41);
  for (auto& l : lens40) l = std::min(600, l + 80);
  dec(64, 8, 2, 600, lens40, {}, 40);
  // Cluster-merged splits (Hopper): 16 (sequence, kv head) pairs -> 8 splits per pair, most of
  // them past the end of the short sequences; 66 x 8 pairs -> 2 splits.
  dec(128, 4, 4, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4);
  std::vector<int> lens66;
  for (int i = 0; i < 66; ++i) lens66.push_back(1 + (i * 61) % 200);
  dec(64, 8, 1, 200, lens66, {}, 66);
  general_decode_cases(dec, lens40, perm40);
}

// ---- prefill attention: head_dim 64, 80, 96 and 128, GQA groups 1 to 8, lengths off the 64-row and
// 64-key tiles, chunks continuing a cached context, several packed sequences, slots and none ----
void prefill_attention_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  // PEERPLAN_SELFTEST_PREFILL_CASE=i runs case i alone (diagnosis: a fault in cuDNN's engine ends
  // the process, so scripts/gpu/session5.sh runs each case in a process of its own).
  const char* only_env = std::getenv("PEERPLAN_SELFTEST_PREFILL_CASE");
  const int only = only_env && *only_env ? std::atoi(only_env) : -1;
  int index = 0;
  auto pre = [&](int D, int kvh, int group, int max_ctx, std::vector<int> qlen, std::vector<int> ctx,
                 std::vector<int> slot_of, int slots) {
    if (only < 0 || index == only) out.push_back(prefill_case(dev, rng, D, kvh, group, max_ctx, qlen, ctx, slot_of, slots));
    ++index;
  };
  // One sequence first: dense K/V (no slot table) and one page through a slot table, neither ragged.
  pre(128, 2, 4, 512, {512}, {512}, {}, 1);
  pre(128, 2, 4, 1500, {256}, {1200}, {1}, 2);
  pre(128, 2, 4, 400, {150, 37}, {150, 300}, {1, 0}, 2);
  pre(128, 1, 8, 1100, {300, 1, 129}, {1000, 1, 129}, {2, 0, 1}, 3);
  pre(64, 3, 1, 260, {1, 64, 130, 65}, {1, 100, 257, 65}, {}, 4);
  pre(64, 2, 4, 200, {200, 63}, {200, 190}, {1, 0}, 2);
  // Groups off the powers of two (Qwen2.5: 7 and 5) and head_dim 80 and 96 (Phi-3-mini), causal
  // and chunked over a cached context; the last two take the 128-row (MT = 2) kernel.
  pre(128, 4, 7, 400, {150, 37}, {150, 300}, {1, 0}, 2);
  pre(64, 2, 5, 260, {1, 64, 130, 65}, {1, 100, 257, 65}, {}, 4);
  pre(128, 1, 3, 200, {200, 63}, {200, 190}, {1, 0}, 2);
  pre(128, 2, 6, 1100, {300, 1, 129}, {1000, 1, 129}, {2, 0, 1}, 3);
  pre(96, 4, 1, 400, {150, 37}, {150, 300}, {1, 0}, 2);
  pre(96, 2, 7, 1100, {300, 1, 129}, {1000, 1, 129}, {2, 0, 1}, 3);
  pre(80, 2, 4, 260, {1, 64, 130, 65}, {1, 100, 257, 65}, {}, 4);
  pre(80, 1, 5, 200, {200, 63}, {200, 190}, {1, 0}, 2);
  pre(96, 1, 7, 1100, {1100}, {1100}, {}, 1);
  pre(80, 1, 3, 1200, {1030}, {1200}, {}, 1);
}

// ---- head_dim 192 and 256 (issue 23; Gemma-class models): decode on the 256 dim tile (192 and
// 160 in its general form; 9..16 query heads per kv head as two blocks of 8), on the split-K,
// single-chunk and cluster-merged grids, batch 1 and 4, contexts past 4096, windowed; prefill
// causal, chunked over a cached context and packed, by the backend in force (cuDNN), then the own
// kernel, which runs 192 and must refuse 256 (cuDNN only) naming why. ----
void wide_head_decode_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  auto dec = [&](int D, int kvh, int group, int max_ctx, std::vector<int> lens, std::vector<int> slot_of, int slots,
                 int window = 0) {
    out.push_back(decode_case(dev, sms, rng, D, kvh, group, max_ctx, lens, slot_of, slots, window));
  };
  dec(256, 1, 8, 8192, {8000}, {}, 1);                          // batch 1: split-K over 8000 tokens
  dec(256, 2, 16, 5000, {4100, 1, 333, 5000}, {3, 1, 0, 2}, 4);  // batch 4, 16 per kv head (2 blocks of 8): 16 splits, merge kernel (no cluster past 1024)
  dec(256, 4, 1, 2000, {1999, 64, 1000, 5}, {}, 4);              // MHA, no slot table
  dec(256, 4, 4, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4);       // 16 pairs: cluster-merged splits
  dec(256, 4, 16, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4);      // the same with the group split
  dec(256, 8, 2, 64, {64, 1, 37}, {0, 2, 1}, 3);                 // one chunk per sequence, no merge
  dec(192, 2, 8, 1500, {1, 333, 1500}, {2, 0, 3}, 4);            // general dims (192 of 256)
  dec(192, 1, 16, 4500, {4500, 65, 17}, {1, 2, 0}, 3);           // general dims, group split
  dec(192, 4, 12, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4);      // 12 = 8 + 4: second block partial, cluster
  dec(192, 1, 1, 300, {300}, {}, 1);                              // batch 1 MHA
  dec(160, 2, 7, 600, {600, 129}, {1, 0}, 2);                    // any multiple of 8 in between
  dec(256, 1, 8, 8192, {8000}, {}, 1, 4096);                      // windowed: split-K over the window span
  dec(192, 2, 16, 1500, {1, 333, 1500}, {2, 0, 3}, 4, 256);      // windowed, group split
  // The dim tile 256's split-K plan (2 blocks per SM, 32-token chunk quantum, a split group's two
  // blocks counted in the grid; H200's 132 SMs): batch 8 in 8 chunks of 352 tokens (11 quanta: the
  // block's last two warps idle on the odd one) through the merge kernel, 32 sequences of G 16 (4
  // chunks of 320, merge kernel), batch 1 at 32k (264 splits of 128 tokens, the last 8 past the
  // sequence), 192 at G 4 (44 chunks of 96).
  dec(256, 4, 8, 2800, {2800, 2700, 1, 100, 2799, 33, 64, 2000}, {}, 8);
  dec(256, 1, 16, 1200, std::vector<int>(32, 1200), {}, 32);
  dec(256, 1, 8, 32768, {32768}, {}, 1);
  dec(192, 2, 4, 3000, {97, 3000, 1}, {1, 2, 0}, 3);                // 192, G 4, 32-token chunk ends
  dec(256, 2, 16, 1000, {1000, 1, 700, 999}, {3, 1, 0, 2}, 4);      // group split, 16 blocks per split: clusters of 8
  std::fprintf(stderr, "self-test: %s\n", "decode attention, head_dim 192, 256, FP8 KV cache");
  selftest::wide_head_fp8_decode_cases(out, dev, sms, rng);
}

void wide_head_prefill_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  const bool own = gpu::prefill_backend() == gpu::PrefillBackend::Own;
  auto pre = [&](int D, int kvh, int group, int max_ctx, std::vector<int> qlen, std::vector<int> ctx,
                 std::vector<int> slot_of, int slots, int window = 0) {
    if (!(own && kn::attention_head_dim_needs_cudnn(D))) {
      out.push_back(prefill_case(dev, rng, D, kvh, group, max_ctx, qlen, ctx, slot_of, slots, window));
      return;
    }
    // The own kernel has no 256: the call must be refused before any launch, saying cuDNN runs it.
    SelfTestResult r;
    r.kernel = "prefill_attention[own]";
    r.shape = fmt::format("D={} refused (cuDNN only)", D);
    r.tolerance = kTol;
    kn::PrefillAttention a;
    a.num_seqs = 1, a.max_q_len = 1, a.heads = kvh * group, a.kv_heads = kvh, a.head_dim = D, a.max_ctx = max_ctx;
    a.q_row_stride = int64_t(a.heads + 2 * kvh) * D;
    try {
      kn::prefill_attention(a, nullptr);
      r.rel_error = 1;  // ran (it must not: no buffers were given)
    } catch (const RuntimeError& e) {
      const std::string w = e.what();
      r.all_written = w.find("head_dim " + std::to_string(D)) != std::string::npos && w.find("cuDNN") != std::string::npos;
      if (!r.all_written) std::fprintf(stderr, "self-test: unexpected refusal: %s\n", w.c_str());
    }
    out.push_back(r);
  };
  pre(256, 2, 4, 1100, {1100}, {1100}, {}, 1);                   // causal prompt
  pre(256, 1, 8, 4500, {200}, {4500}, {0}, 1);                   // a chunk over a 4.3k cached context
  pre(256, 2, 4, 400, {150, 37}, {150, 300}, {1, 0}, 2);          // packed: causal + chunk
  pre(256, 1, 16, 300, {300, 63}, {300, 290}, {1, 0}, 2);         // 16 query heads per kv head
  pre(256, 2, 4, 1100, {1100}, {1100}, {}, 1, 256);              // windowed
  pre(192, 2, 4, 1100, {1100}, {1100}, {}, 1);                   // causal prompt (own: 64-row blocks)
  pre(192, 2, 7, 1500, {256}, {1200}, {1}, 2);                   // chunk over a cached context
  pre(192, 3, 1, 260, {1, 64, 130, 65}, {1, 100, 257, 65}, {}, 4);
  pre(192, 1, 16, 300, {300, 63}, {300, 290}, {1, 0}, 2);
  pre(192, 2, 4, 700, {700}, {700}, {}, 1, 100);                 // windowed
}

void wide_head_attention_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  std::fprintf(stderr, "self-test: %s\n", "decode attention, head_dim 160, 192, 256");
  wide_head_decode_cases(out, dev, sms, rng);
  const auto prev = gpu::prefill_backend();
  if (prev != gpu::PrefillBackend::Own) {
    std::fprintf(stderr, "self-test: %s\n", "prefill attention, head_dim 192, 256, cuDNN");
    wide_head_prefill_cases(out, dev, rng);
  }
  std::fprintf(stderr, "self-test: %s\n", "prefill attention, head_dim 192 (256 refused), own kernel");
  gpu::set_prefill_backend(gpu::PrefillBackend::Own);
  wide_head_prefill_cases(out, dev, rng);
  gpu::set_prefill_backend(prev);
}

// ---- sliding-window attention (issue 18): decode and prefill against the windowed reference.
// Windows smaller than the context (the band binds), larger than it (the same as full attention),
// chunks over a cached context whose band crosses the window's edge, GQA, split-K over the window
// span (one long sequence), the cluster-merged grid, window 1 (each token sees only itself), and
// windows off and on the 64-key tile. Each row's shape starts "window=W". ----
void window_decode_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  auto dec = [&](int D, int kvh, int group, int max_ctx, std::vector<int> lens, std::vector<int> slot_of, int slots,
                 int window) {
    out.push_back(decode_case(dev, sms, rng, D, kvh, group, max_ctx, lens, slot_of, slots, window));
  };
  dec(128, 2, 4, 1500, {1, 333, 1500}, {2, 0, 3}, 4, 256);     // window < 2 of the 3 contexts
  dec(128, 2, 4, 1500, {1, 333, 1500}, {2, 0, 3}, 4, 4096);    // window > every context: full attention
  dec(128, 1, 8, 8192, {8000}, {}, 1, 4096);                    // batch 1: split-K over the 4096-token window
  dec(128, 2, 4, 9000, {9000, 4097, 4096, 17}, {3, 0, 2, 1}, 4, 4096);  // at, one past and under the edge
  dec(128, 4, 4, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4, 200); // 16 pairs: cluster-merged splits
  dec(128, 1, 16, 700, {700, 65, 17}, {1, 2, 0}, 3, 100);       // 16 query heads per kv head, window off 64
  dec(64, 4, 1, 2000, {1999, 64, 1000, 5}, {}, 4, 77);          // MHA, head_dim 64, no slot table
  dec(96, 2, 7, 1100, {1100, 129, 1}, {1, 2, 0}, 3, 1);         // window 1: the token itself
}

void window_prefill_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  // PEERPLAN_SELFTEST_WINDOW_CASE=i runs windowed prefill case i alone (as PEERPLAN_SELFTEST_PREFILL_CASE).
  const char* only_env = std::getenv("PEERPLAN_SELFTEST_WINDOW_CASE");
  const int only = only_env && *only_env ? std::atoi(only_env) : -1;
  int index = 0;
  auto pre = [&](int D, int kvh, int group, int max_ctx, std::vector<int> qlen, std::vector<int> ctx,
                 std::vector<int> slot_of, int slots, int window) {
    if (only < 0 || index == only)
      out.push_back(prefill_case(dev, rng, D, kvh, group, max_ctx, qlen, ctx, slot_of, slots, window));
    ++index;
  };
  pre(128, 2, 4, 512, {512}, {512}, {}, 1, 128);                 // prompt longer than the window
  pre(128, 2, 4, 1500, {256}, {1200}, {1}, 2, 1000);             // chunk over a cache, band crossing the edge
  pre(128, 2, 4, 400, {150, 37}, {150, 300}, {1, 0}, 2, 4096);   // window > every context: full causal
  pre(128, 1, 8, 1100, {300, 1, 129}, {1000, 1, 129}, {2, 0, 1}, 3, 100);  // GQA 8, three sequences
  pre(64, 3, 1, 260, {1, 64, 130, 65}, {1, 100, 257, 65}, {}, 4, 64);       // window = one key tile
  pre(128, 2, 7, 1200, {1030}, {1200}, {}, 1, 300);              // 128-row (MT = 2) kernel, group 7
  pre(96, 2, 7, 1100, {1100}, {1100}, {}, 1, 1);                 // window 1: the token itself
  pre(80, 1, 5, 5000, {512}, {5000}, {0}, 1, 4096);              // Mistral's window, a chunk over a 5k context
}

void window_attention_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  std::fprintf(stderr, "self-test: %s\n", "sliding-window decode attention");
  window_decode_cases(out, dev, sms, rng);
  // Prefill by the backend in force (cuDNN's band where it runs the graph), then the own kernel.
  const auto prev = gpu::prefill_backend();
  if (prev != gpu::PrefillBackend::Own) {
    std::fprintf(stderr, "self-test: %s\n", "sliding-window prefill attention, cuDNN where it runs the band");
    window_prefill_cases(out, dev, rng);
  }
  std::fprintf(stderr, "self-test: %s\n", "sliding-window prefill attention, own kernel");
  gpu::set_prefill_backend(gpu::PrefillBackend::Own);
  window_prefill_cases(out, dev, rng);
  gpu::set_prefill_backend(prev);
}

// ---- RMSNorm and fused add + RMSNorm, T tokens of Hd: up to 8192 one 4-vector-per-thread
// kernel, above it (issue 23: up to 16384) the 8-vector one ----
void norm_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, int T, int Hd) {
  Host x = random_host(size_t(T * Hd), rng), res = random_host(x.v.size(), rng), w = random_host(size_t(Hd), rng);
  auto dx = upload(dev, x.v), dw = upload(dev, w.v), dres = upload(dev, res.v);
  auto dout = poisoned(dev, x.v.size());
  kn::rmsnorm(dx.as<bf16>(), dw.as<bf16>(), dout.as<bf16>(), T, Hd, 1e-5f, nullptr);
  std::vector<double> ref(x.v.size()), ref2(x.v.size());
  for (int t = 0; t < T; ++t) {
    double ss = 0, ss2 = 0;
    for (int i = 0; i < Hd; ++i) {
      ss += x.d[size_t(t * Hd + i)] * x.d[size_t(t * Hd + i)];
      const double s = x.d[size_t(t * Hd + i)] + res.d[size_t(t * Hd + i)];
      ss2 += s * s;
    }
    const double inv = 1.0 / std::sqrt(ss / Hd + 1e-5), inv2 = 1.0 / std::sqrt(ss2 / Hd + 1e-5);
    for (int i = 0; i < Hd; ++i) {
      ref[size_t(t * Hd + i)] = x.d[size_t(t * Hd + i)] * inv * w.d[size_t(i)];
      ref2[size_t(t * Hd + i)] = (x.d[size_t(t * Hd + i)] + res.d[size_t(t * Hd + i)]) * inv2 * w.d[size_t(i)];
    }
  }
  out.push_back(compare("rmsnorm", fmt::format("{} x {}", T, Hd), dout, ref));
  auto dout2 = poisoned(dev, x.v.size());
  kn::add_rmsnorm(dx.as<bf16>(), dres.as<bf16>(), dw.as<bf16>(), dout2.as<bf16>(), T, Hd, 1e-5f, nullptr);
  out.push_back(compare("add_rmsnorm", fmt::format("{} x {}", T, Hd), dout2, ref2));
}

void norm_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  norm_case(out, dev, rng, 7, 4096);
  norm_case(out, dev, rng, 3, 8192);   // the 4-vector kernel's last size
  norm_case(out, dev, rng, 5, 8200);   // the 8-vector kernel's first (a multiple of 8 past 8192)
  norm_case(out, dev, rng, 5, 12288);  // e.g. Llama-2-70B-class hidden sizes
  norm_case(out, dev, rng, 3, 16384);  // the largest (Llama-3.1-405B)
}

// ---- SiLU * mul, residual add, embedding gather ----
void mlp_and_embedding_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  const int T = 5, I = 1432;
  Host in = random_host(size_t(T * 2 * I), rng, 4.0);
  auto din = upload(dev, in.v);
  auto dout = poisoned(dev, size_t(T * I));
  kn::silu_mul(din.as<bf16>(), dout.as<bf16>(), T, I, nullptr);
  std::vector<double> ref(size_t(T * I));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < I; ++i) {
      const double g = in.d[size_t(t * 2 * I + i)], u = in.d[size_t(t * 2 * I + I + i)];
      ref[size_t(t * I + i)] = g / (1 + std::exp(-g)) * u;
    }
  out.push_back(compare("silu_mul", "5 x 1432", dout, ref));

  Host a = random_host(8192, rng), b = random_host(8192, rng);
  auto da = upload(dev, a.v), db = upload(dev, b.v);
  kn::residual_add(da.as<bf16>(), db.as<bf16>(), 8192, nullptr);
  std::vector<double> rs(8192);
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = a.d[i] + b.d[i];
  out.push_back(compare("residual_add", "8192", da, rs));

  const int vocab = 1000, Hd = 256;
  Host table = random_host(size_t(vocab * Hd), rng);
  std::vector<int> ids{5, 999, 0, 42, 1000 /* outside the shard: zeros */};
  auto dt = upload(dev, table.v), di = upload_int(dev, ids);
  auto de = poisoned(dev, ids.size() * Hd);
  kn::embedding_gather(di.as<int>(), dt.as<bf16>(), de.as<bf16>(), int64_t(ids.size()), vocab, Hd, nullptr);
  std::vector<double> re(ids.size() * Hd, 0.0);
  for (size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < vocab)
      for (int i = 0; i < Hd; ++i) re[t * Hd + size_t(i)] = table.d[size_t(ids[t] * Hd + i)];
  out.push_back(compare("embedding_gather", "5 ids x 256", de, re));
  // With fused norms the executor gathers into the block-output buffer and zeroes the residual stream
  // in the same pass (engine_ops.cpp run_embedding).
  auto de2 = poisoned(dev, ids.size() * Hd), dz = poisoned(dev, ids.size() * Hd);
  kn::embedding_gather(di.as<int>(), dt.as<bf16>(), de2.as<bf16>(), int64_t(ids.size()), vocab, Hd, nullptr,
                       dz.as<bf16>());
  out.push_back(compare("embedding_gather", "5 ids x 256, rows", de2, re));
  out.push_back(compare("embedding_gather", "5 ids x 256, residual zeroed", dz, std::vector<double>(re.size(), 0.0)));
}

// ---- rotary + KV-cache write: check the rotated q and the cached k and v ----
// T tokens of heads / kvh heads: positions 0, 17, 63 for T = 3, else spread over [0, max_ctx)
// (a warp per (token, head): several blocks, positions where the angle needs range reduction).
void rotary_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, int D, int T = 3, int heads = 4,
                  int kvh = 2, int max_ctx = 64) {
  const int slots = 2;
  const float theta = 500000.f;
  const int row = (heads + 2 * kvh) * D;
  Host qkv = random_host(size_t(T) * row, rng);
  std::vector<int> pos{0, 17, 63}, tslot{1, 0, 1};
  if (T != 3) {
    pos.assign(size_t(T), 0);
    tslot.assign(size_t(T), 0);
    for (int t = 0; t < T; ++t) {
      pos[size_t(t)] = max_ctx - 1 - int((int64_t(t) * 7919) % max_ctx);  // the last position first
      tslot[size_t(t)] = t % slots;
    }
  }
  auto dqkv = upload(dev, qkv.v), dp = upload_int(dev, pos), dsl = upload_int(dev, tslot);
  auto dk = poisoned(dev, size_t(slots) * kvh * max_ctx * D), dv = poisoned(dev, size_t(slots) * kvh * max_ctx * D);
  kn::RotaryCache r;
  r.qkv = dqkv.as<bf16>();
  r.positions = dp.as<int>();
  r.token_slot = dsl.as<int>();
  r.k_cache = dk.as<bf16>();
  r.v_cache = dv.as<bf16>();
  r.tokens = T, r.heads = heads, r.kv_heads = kvh, r.head_dim = D, r.max_ctx = max_ctx, r.theta = theta;
  kn::rotary_and_cache(r, nullptr);
  std::vector<double> rq(qkv.d);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads + kvh; ++h)
      for (int j = 0; j < D / 2; ++j) {
        const double f = std::pow(double(theta), -2.0 * j / D), ang = pos[size_t(t)] * f;
        const size_t i0 = size_t(t * row + h * D + j), i1 = i0 + D / 2;
        rq[i0] = qkv.d[i0] * std::cos(ang) - qkv.d[i1] * std::sin(ang);
        rq[i1] = qkv.d[i1] * std::cos(ang) + qkv.d[i0] * std::sin(ang);
      }
  out.push_back(compare("rotary(q,k in place)", fmt::format("{} tokens heads={} kv={} D={} pos<{}", T, heads, kvh, D, max_ctx), dqkv, rq));
  // Gather the cached rows back and compare with rotated k / raw v.
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<bf16> hk(size_t(slots) * kvh * max_ctx * D), hv(hk.size());
  CUDA_CHECK(cudaMemcpy(hk.data(), dk.get(), hk.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hv.data(), dv.get(), hv.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<bf16> got;
  std::vector<double> ref;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < kvh; ++h)
      for (int d = 0; d < D; ++d) {
        const size_t c = size_t(((tslot[size_t(t)] * kvh + h) * max_ctx + pos[size_t(t)]) * D + d);
        got.push_back(hk[c]);
        ref.push_back(rq[size_t(t * row + (heads + h) * D + d)]);
        got.push_back(hv[c]);
        ref.push_back(qkv.d[size_t(t * row + (heads + kvh + h) * D + d)]);
      }
  gpu::DeviceBuffer dg = upload(dev, got);
  out.push_back(compare("kv_cache_write", fmt::format("{} tokens kv={} D={} pos<{}", T, kvh, D, max_ctx), dg, ref));
}

}  // namespace selftest

std::vector<SelfTestResult> kernel_self_test(int dev, uint64_t seed) {
  using namespace selftest;
  gpu::ScopedDevice sd(dev);
  std::mt19937_64 rng(seed);
  std::vector<SelfTestResult> out;
  int sms = 132;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

  if (std::getenv("PEERPLAN_SELFTEST_PREFILL_CASE")) {  // one prefill case by the backend in force, nothing else
    prefill_attention_cases(out, dev, rng);
    return out;
  }
  // PEERPLAN_SELFTEST_ONLY=window: the sliding-window cases alone (issue 18), decode and both prefill
  // paths; =headdim: head_dim 160/192/256 attention (issue 23), decode and both prefill paths; =norm:
  // the RMSNorm cases (hidden 4096 to 16384); =qknorm: Qwen3's per-head QK-norm; =moe: routing,
// grouped GEMMs (stream, gemv, tiled) and combine; =mla: the MLA decode attention, cache write +
// rope and YaRN helpers (DeepSeek-V2/V3, Kimi K2); =quant: the quantized GEMMs (every W4A16 variant)
// and the FP8 KV cache; =pdl: the decode GEMV and a launch chain with programmatic dependent launch;
// =act: the activation in the gate_up GEMVs' epilogue.
  if (const char* only = std::getenv("PEERPLAN_SELFTEST_ONLY"); only && *only) {
    const std::string o = only;
    if (o == "window") window_attention_cases(out, dev, sms, rng);
    else if (o == "headdim") wide_head_attention_cases(out, dev, sms, rng);
    else if (o == "norm") norm_cases(out, dev, rng);
    else if (o == "qknorm") selftest::qk_norm_cases(out, dev, rng);
    else if (o == "moe") moe_cases(out, dev, rng);
    else if (o == "mla") selftest::mla_cases(out, dev, sms, rng);
    else if (o == "quant") quant_cases(out, dev, sms, rng);
    else if (o == "pdl") pdl_cases(out, dev, rng);
    else if (o == "act") act_cases(out, dev, sms, rng);
    else throw InputError("", "PEERPLAN_SELFTEST_ONLY",
                          "window, headdim, norm, qknorm, moe, mla, quant, pdl or act; found " + o);
    return out;
  }
  std::fprintf(stderr, "self-test: %s\n", "decode attention");
  decode_attention_cases(out, dev, sms, rng);

  // Prefill attention by each path (issue 18): with PEERPLAN_PREFILL_ATTENTION=auto or cudnn,
  // cuDNN's fused attention where it runs the shape (results named prefill_attention[cudnn]); then
  // always the own kernel (prefill_attention[own]).
  {
    const auto prev = gpu::prefill_backend();
    if (prev != gpu::PrefillBackend::Own) {
      const std::string dnn = gpu::cudnn_description();
      std::fprintf(stderr, "self-test: prefill attention, cuDNN: %s\n",
                   dnn.empty() ? gpu::cudnn_load_error().c_str() : dnn.c_str());
      prefill_attention_cases(out, dev, rng);
    }
    std::fprintf(stderr, "self-test: %s\n", "prefill attention, own kernel");
    gpu::set_prefill_backend(gpu::PrefillBackend::Own);
    prefill_attention_cases(out, dev, rng);
    gpu::set_prefill_backend(prev);
  }
  window_attention_cases(out, dev, sms, rng);
  wide_head_attention_cases(out, dev, sms, rng);

  std::fprintf(stderr, "self-test: %s\n", "RMSNorm");
  norm_cases(out, dev, rng);
  std::fprintf(stderr, "self-test: %s\n", "QK-norm");
  selftest::qk_norm_cases(out, dev, rng);

  std::fprintf(stderr, "self-test: %s\n", "SiLU");
  mlp_and_embedding_cases(out, dev, rng);

  std::fprintf(stderr, "self-test: %s\n", "rotary");
  rotary_cases(out, dev, rng, 128);
  rotary_cases(out, dev, rng, 96);  // Phi-3-mini's head_dim
  rotary_cases(out, dev, rng, 128, 1, 16, 4, 32000);   // decode batch 1 at position 31999
  rotary_cases(out, dev, rng, 64, 37, 32, 8, 4096);    // Llama-3.2-1B, a prefill-like run of tokens
  rotary_cases(out, dev, rng, 256, 5, 8, 1, 20000);    // head_dim 256, MQA

  std::fprintf(stderr, "self-test: %s\n", "quantized GEMMs, FP8 KV cache");
  quant_cases(out, dev, sms, rng);

  std::fprintf(stderr, "self-test: %s\n", "MoE routing, grouped GEMM, combine");
  moe_cases(out, dev, rng);

  selftest::mla_cases(out, dev, sms, rng);  // prints its own headings

  std::fprintf(stderr, "self-test: %s\n", "decode GEMV, programmatic dependent launch");
  pdl_cases(out, dev, rng);

  std::fprintf(stderr, "self-test: %s\n", "activation in the gate_up GEMV's epilogue");
  act_cases(out, dev, sms, rng);

  std::fprintf(stderr, "self-test: %s\n", "peer-memory all-reduce (ranks emulated on one GPU)");
  allreduce_cases(out, dev);
  return out;
}

}  // namespace peerplan::exec
