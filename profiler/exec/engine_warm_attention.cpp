// Start-up warm-up of the prefill attention graphs (cuDNN): see Engine::warm_prefill_attention.
#include <algorithm>
#include <set>
#include <utility>

#include "profiler/exec/engine.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cudnn_attention.hpp"
#include "profiler/gpu/raii.hpp"

namespace peerplan::exec {

int64_t Engine::warm_prefill_attention(int64_t max_tokens, int64_t max_seqs) {
  if (gpu::prefill_backend() == gpu::PrefillBackend::Own) return 0;
  std::set<int64_t> windows;
  for (int64_t l = 0; l < cfg_.layers; ++l) windows.insert(cfg_.window_of(l));
  int64_t built = 0;
  for (auto& [id, gp] : state_) {
    GpuState& g = *gp;
    if (g.heads <= 0 || g.kv_fp8) continue;  // no attention here, or the FP8 cache's own kernel
    gpu::ScopedDevice dev(g.dev);
    // The call exactly as run_attention builds it (engine_ops.cpp), less the pointers.
    gpu::CudnnPrefill c;
    c.q_row_stride = (g.heads + 2 * g.kv_heads) * g.head_dim;
    c.slots = reinterpret_cast<const int*>(&c);  // non-null: the cache is read through the slot table
    c.heads = int(g.heads), c.kv_heads = int(g.kv_heads), c.head_dim = int(g.head_dim);
    c.max_ctx = int(max_ctx_), c.num_slots = int(kv_slots_);
    int64_t seqs = std::min(max_seqs, max_tokens);
    if (g.mla) {  // MLA: MHA over the expanded scratch, as run_mla_attention calls it (engine_mla.cpp)
      c.q_row_stride = g.heads * g.head_dim;
      c.kv_heads = int(g.heads);
      c.num_slots = g.mla_slots;
      seqs = std::min<int64_t>(seqs, g.mla_slots);
    }
    for (int64_t w : windows) {
      c.window = int(w);
      std::string why;
      built += gpu::cudnn_prefill_warmup(c, int(seqs), int(max_tokens), &why);
    }
  }
  return built;
}

}  // namespace peerplan::exec
