// Peer copies by copy engine in both directions at once: one stream on each GPU, released together
// by the gate. Each direction's curve is stored (time per direction); the pair's total bandwidth
// is the sum of the two (nvbandwidth's device_to_device_bidirectional_memcpy_write_ce).
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

void measure_p2p_ce_bidir(Context& ctx) {
  auto pairs = ctx.usable_pairs();
  std::vector<std::pair<int, int>> unordered;
  for (auto [a, b] : pairs)
    if (a < b && ctx.machine.p2p[size_t(b)][size_t(a)].usable()) unordered.push_back({a, b});
  if (unordered.empty()) {
    ctx.not_applicable("p2p_ce_bidir", ctx.gpus() < 2 ? "one GPU: no pairs" : "no pair has usable peer access both ways");
    return;
  }
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  for (size_t p = 0; p < unordered.size(); ++p) {
    auto [a, b] = unordered[p];
    PatternPair ab(a, b, size_t(maxb), 0x22000000u + uint32_t(a * 16 + b));
    PatternPair ba(b, a, size_t(maxb), 0x22000000u + uint32_t(b * 16 + a));
    gpu::Stream sa(a), sb(b);
    SweepSpec spec;
    spec.label = "gpu" + std::to_string(a) + "<->gpu" + std::to_string(b);
    spec.sizes = ctx.plan.transfer_sizes;
    spec.expected_gbps = 400;
    spec.timing = &sa;
    spec.others = {&sb};
    spec.enqueue = [&](int64_t n) {
      CUDA_CHECK(cudaMemcpyPeerAsync(ab.dst.get(), b, ab.src.get(), a, size_t(n), sa));
      CUDA_CHECK(cudaMemcpyPeerAsync(ba.dst.get(), a, ba.src.get(), b, size_t(n), sb));
    };
    spec.verify = [&](int64_t n) { return ab.errors(n) + ba.errors(n); };
    auto pts = sweep_transfer(ctx, gate, spec, double(p) / unordered.size(), double(p + 1) / unordered.size());
    // Both directions ran for the whole region: each moved `bytes` in the region's time.
    ctx.ms.transfers.push_back({a, b, "p2p_ce_bidir", "", pts});
    ctx.ms.transfers.push_back({b, a, "p2p_ce_bidir", "", pts});
  }
}

}  // namespace peerplan::profiler
