#include "planner/validate/kv_fit.hpp"

#include <algorithm>
#include <climits>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_figures.hpp"

namespace peerplan {

int64_t executor_kv_slots(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                          const std::vector<GpuFreeMemory>& free, int64_t max_ctx, int64_t max_tokens) {
  if (free.empty()) return INT64_MAX;
  // The executor's cache holds max_ctx tokens in every layer, sliding-window layers too (it attends
  // to a windowed layer's band of that cache; it keeps no ring of the window, issue 18), so its
  // slots are counted with every layer at full attention, not with the windowed KV bytes the
  // planner's own memory check uses (Mistral-7B-v0.1 at 32k: 4 GiB a sequence, not 512 MiB).
  if (cfg.has_windows()) {
    ModelConfig full = cfg;
    full.layer_window.clear();
    return executor_kv_slots(plan, full, derive_figures(full), machine, free, max_ctx, max_tokens);
  }
  Machine now = machine;  // the profile's GPUs, with what is free on them at run time
  for (const GpuFreeMemory& f : free)
    if (f.gpu >= 0 && size_t(f.gpu) < now.gpus.size()) now.gpus[size_t(f.gpu)].memory_bytes = f.free_bytes;
  MemoryOptions mo;
  mo.max_seqs = 1;  // then GpuMemory::kv_cache is the KV bytes of one sequence on that GPU
  mo.context = max_ctx;
  mo.max_batched_tokens = max_tokens;
  const MemoryReport rep = check_memory(plan, cfg, fig, now, mo);
  int64_t best = INT64_MAX;
  for (const GpuMemory& g : rep.gpus) {
    if (std::none_of(free.begin(), free.end(), [&](const GpuFreeMemory& f) { return f.gpu == g.gpu; })) continue;
    if (g.kv_cache <= 0) continue;  // no layers here: no KV cache bounds it
    const int64_t room = g.capacity - g.weights - g.activations - g.mla_scratch - g.reserve;
    // Floor division (room may be negative), then one slot less: the executor's padding slot.
    const int64_t slots = (room >= 0 ? room / g.kv_cache : -((-room + g.kv_cache - 1) / g.kv_cache)) - 1;
    best = std::min(best, slots);
  }
  return best;
}

}  // namespace peerplan
