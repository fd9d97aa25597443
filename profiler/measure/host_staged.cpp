// Explicit host staging, as an application without P2P does it: device -> pinned host -> device,
// cut into chunks and pipelined over two slots (two streams on each GPU), so the D2H of one chunk
// overlaps the H2D of the previous one. The pinned buffer is on the source GPU's NUMA node
// ("numa_local") and, where the host has another node, on that one ("numa_remote").
#include <algorithm>

#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

namespace {
constexpr int64_t kChunk = int64_t(4) << 20;  // large enough for full PCIe rate, small enough to pipeline
}

void measure_host_staged(Context& ctx) {
  if (ctx.gpus() < 2) {
    ctx.not_applicable("host_staged", "one GPU: no pairs");
    return;
  }
  auto pairs = ctx.all_pairs();
  int64_t maxb = ctx.plan.transfer_sizes.back();
  int numa_nodes = ctx.machine.meta.value("numa_nodes", 1);
  gpu::BlockingGate gate;
  size_t step = 0;
  for (auto [src, dst] : pairs) {
    int local = ctx.machine.gpus[size_t(src)].numa;
    std::vector<std::pair<std::string, int>> variants;
    if (local < 0) variants.push_back({"", -1});
    else {
      variants.push_back({"numa_local", local});
      if (numa_nodes > 1) variants.push_back({"numa_remote", (local + 1) % numa_nodes});
    }
    PatternPair buf(src, dst, size_t(maxb), 0x88000000u + uint32_t(src * 16 + dst));
    gpu::Stream s0(src), s1(src), d0(dst), d1(dst);
    const gpu::Stream* sd[2] = {&s0, &s1};
    const gpu::Stream* dd[2] = {&d0, &d1};
    for (const auto& [variant, node] : variants) {
      gpu::PinnedHostBuffer host(size_t(2 * kChunk), node);
      gpu::Event d2h_done[2] = {gpu::Event(src, cudaEventDisableTiming), gpu::Event(src, cudaEventDisableTiming)};
      gpu::Event h2d_done[2] = {gpu::Event(dst, cudaEventDisableTiming), gpu::Event(dst, cudaEventDisableTiming)};
      SweepSpec spec;
      spec.label = "gpu" + std::to_string(src) + "->host->gpu" + std::to_string(dst) + (variant.empty() ? "" : " " + variant);
      spec.sizes = ctx.plan.transfer_sizes;
      spec.expected_gbps = 25;
      spec.timing = &s0;
      spec.others = {&s1, &d0, &d1};
      spec.enqueue = [&](int64_t bytes) {
        char* hbase = host.as<char>();
        for (int64_t off = 0, i = 0; off < bytes; off += kChunk, ++i) {
          int slot = int(i % 2);
          size_t n = size_t(std::min(kChunk, bytes - off));
          char* h = hbase + slot * kChunk;
          // The slot's host memory is free once its previous H2D has finished.
          CUDA_CHECK(cudaStreamWaitEvent(*sd[slot], h2d_done[slot], 0));
          CUDA_CHECK(cudaMemcpyAsync(h, buf.src.as<char>() + off, n, cudaMemcpyDeviceToHost, *sd[slot]));
          d2h_done[slot].record(*sd[slot]);
          CUDA_CHECK(cudaStreamWaitEvent(*dd[slot], d2h_done[slot], 0));
          CUDA_CHECK(cudaMemcpyAsync(buf.dst.as<char>() + off, h, n, cudaMemcpyHostToDevice, *dd[slot]));
          h2d_done[slot].record(*dd[slot]);
        }
      };
      spec.verify = [&](int64_t b) { return buf.errors(b); };
      double f0 = double(step) / double(pairs.size() * variants.size());
      double f1 = double(step + 1) / double(pairs.size() * variants.size());
      TransferCurve c{src, dst, "host_staged", variant, {}};
      c.points = sweep_transfer(ctx, gate, spec, f0, f1);
      ++step;
      ctx.ms.transfers.push_back(std::move(c));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
}

}  // namespace peerplan::profiler
