// Device-local copy bandwidth (cudaMemcpyAsync device to device on one GPU). The curve is stored
// as mode "d2d" (bytes copied per second); hbm_gbps counts read + write (2x), the HBM traffic.
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

void measure_hbm(Context& ctx) {
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  ctx.ms.hbm_gbps.assign(size_t(ctx.gpus()), 0.0);
  auto gpus = ctx.measured_gpus();
  for (size_t gi = 0; gi < gpus.size(); ++gi) {
    const int g = gpus[gi];
    PatternPair buf(g, g, size_t(maxb), 0x55000000u + uint32_t(g));
    gpu::Stream s(g);
    SweepSpec spec;
    spec.label = "gpu" + std::to_string(g) + " local copy";
    spec.sizes = ctx.plan.transfer_sizes;
    spec.expected_gbps = 2000;
    spec.timing = &s;
    spec.enqueue = [&](int64_t b) { CUDA_CHECK(cudaMemcpyAsync(buf.dst.get(), buf.src.get(), size_t(b), cudaMemcpyDeviceToDevice, s)); };
    spec.verify = [&](int64_t b) { return buf.errors(b); };
    TransferCurve c{g, g, "d2d", "", {}};
    c.points = sweep_transfer(ctx, gate, spec, double(gi) / double(gpus.size()), double(gi + 1) / double(gpus.size()));
    const auto& last = c.points.back();
    ctx.ms.hbm_gbps[size_t(g)] = 2.0 * double(last.bytes) / last.time.median / 1e9;
    ctx.ms.transfers.push_back(std::move(c));
  }
}

}  // namespace peerplan::profiler
