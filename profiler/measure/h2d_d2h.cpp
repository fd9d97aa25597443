// Pinned host <-> device bandwidth of each GPU by copy engine (nvbandwidth's host_to_device_memcpy_ce
// and device_to_host_memcpy_ce). The host buffer sits on the GPU's NUMA node when it is known.
#include <cstring>

#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

namespace {
size_t host_errors(const uint32_t* p, size_t words, uint32_t seed) {
  size_t bad = 0;
  for (size_t i = 0; i < words; ++i) bad += p[i] != seed + uint32_t(i);
  return bad;
}
}  // namespace

void measure_h2d_d2h(Context& ctx) {
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  auto gpus = ctx.measured_gpus();
  const double ng = double(gpus.size());
  for (size_t gi = 0; gi < gpus.size(); ++gi) {
    const int g = gpus[gi];
    int numa = ctx.machine.gpus[size_t(g)].numa;
    gpu::PinnedHostBuffer host(size_t(maxb), numa);
    gpu::DeviceBuffer dev(g, size_t(maxb));
    gpu::Stream s(g);
    const uint32_t seed_h = 0x66000000u + uint32_t(g), seed_d = 0x77000000u + uint32_t(g);
    std::string variant = numa >= 0 ? "numa_local" : "";
    // host -> device
    {
      auto* hp = host.as<uint32_t>();
      for (size_t i = 0; i < size_t(maxb) / 4; ++i) hp[i] = seed_h + uint32_t(i);
      SweepSpec spec;
      spec.label = "host->gpu" + std::to_string(g);
      spec.sizes = ctx.plan.transfer_sizes;
      spec.expected_gbps = 55;
      spec.timing = &s;
      spec.enqueue = [&](int64_t b) { CUDA_CHECK(cudaMemcpyAsync(dev.get(), host.get(), size_t(b), cudaMemcpyHostToDevice, s)); };
      spec.verify = [&](int64_t b) { return gpu::count_pattern_errors(dev.get(), g, size_t(b) / 4, seed_h); };
      TransferCurve c{-1, g, "h2d", variant, {}};
      c.points = sweep_transfer(ctx, gate, spec, (2.0 * gi) / (2 * ng), (2.0 * gi + 1) / (2 * ng));
      ctx.ms.transfers.push_back(std::move(c));
    }
    // device -> host
    {
      {
        gpu::ScopedDevice d(g);
        gpu::launch_fill_pattern(dev.as<uint32_t>(), size_t(maxb) / 4, seed_d, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
      }
      std::memset(host.get(), 0, size_t(maxb));
      SweepSpec spec;
      spec.label = "gpu" + std::to_string(g) + "->host";
      spec.sizes = ctx.plan.transfer_sizes;
      spec.expected_gbps = 55;
      spec.timing = &s;
      spec.enqueue = [&](int64_t b) { CUDA_CHECK(cudaMemcpyAsync(host.get(), dev.get(), size_t(b), cudaMemcpyDeviceToHost, s)); };
      spec.verify = [&](int64_t b) { return host_errors(host.as<uint32_t>(), size_t(b) / 4, seed_d); };
      TransferCurve c{g, -1, "d2h", variant, {}};
      c.points = sweep_transfer(ctx, gate, spec, (2.0 * gi + 1) / (2 * ng), (2.0 * gi + 2) / (2 * ng));
      ctx.ms.transfers.push_back(std::move(c));
    }
  }
}

}  // namespace peerplan::profiler
