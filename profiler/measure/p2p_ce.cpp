// Peer copy by copy engine, one direction: cudaMemcpyPeerAsync on a stream of the source GPU with
// peer access enabled (nvbandwidth's device_to_device_memcpy_write_ce).
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

void measure_p2p_ce(Context& ctx) {
  auto pairs = ctx.usable_pairs();
  if (pairs.empty()) {
    ctx.not_applicable("p2p_ce", ctx.gpus() < 2 ? "one GPU: no pairs" : "no pair has usable peer access");
    return;
  }
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  for (size_t p = 0; p < pairs.size(); ++p) {
    auto [src, dst] = pairs[p];
    PatternPair buf(src, dst, size_t(maxb), 0x11000000u + uint32_t(src * 16 + dst));
    gpu::Stream s(src);
    SweepSpec spec;
    spec.label = "gpu" + std::to_string(src) + "->gpu" + std::to_string(dst);
    spec.sizes = ctx.plan.transfer_sizes;
    spec.expected_gbps = 400;
    spec.timing = &s;
    spec.enqueue = [&](int64_t b) { CUDA_CHECK(cudaMemcpyPeerAsync(buf.dst.get(), dst, buf.src.get(), src, size_t(b), s)); };
    spec.verify = [&](int64_t b) { return buf.errors(b); };
    TransferCurve c{src, dst, "p2p_ce", "", {}};
    c.points = sweep_transfer(ctx, gate, spec, double(p) / pairs.size(), double(p + 1) / pairs.size());
    ctx.ms.transfers.push_back(std::move(c));
  }
}

}  // namespace peerplan::profiler
