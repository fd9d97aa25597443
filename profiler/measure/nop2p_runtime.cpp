// What users get without P2P: cudaMemcpyPeerAsync with peer access NOT enabled. The runtime then
// picks the path itself (typically staging through host memory). Peer access is disabled for the
// duration and restored afterwards, so later measurements see the verified state again.
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

void measure_nop2p_runtime(Context& ctx) {
  if (ctx.gpus() < 2) {
    ctx.not_applicable("nop2p_runtime", "one GPU: no pairs");
    return;
  }
  auto pairs = ctx.all_pairs();
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  for (size_t p = 0; p < pairs.size(); ++p) {
    auto [src, dst] = pairs[p];
    // Disable both directions: the runtime may issue the copy from either context.
    std::vector<std::pair<int, int>> disabled;
    for (auto [x, y] : {std::pair{src, dst}, std::pair{dst, src}}) {
      gpu::ScopedDevice d(x);
      cudaError_t e = cudaDeviceDisablePeerAccess(y);
      if (e == cudaSuccess) disabled.push_back({x, y});
      else if (e == cudaErrorPeerAccessNotEnabled) cudaGetLastError();
      else CUDA_CHECK(e);
    }
    auto restore = [&] {
      for (auto [x, y] : disabled) {
        gpu::ScopedDevice d(x);
        CUDA_CHECK(cudaDeviceEnablePeerAccess(y, 0));
      }
    };
    try {
      PatternPair buf(src, dst, size_t(maxb), 0x44000000u + uint32_t(src * 16 + dst));
      gpu::Stream s(src);
      SweepSpec spec;
      spec.label = "gpu" + std::to_string(src) + "->gpu" + std::to_string(dst);
      spec.sizes = ctx.plan.transfer_sizes;
      spec.expected_gbps = 50;
      spec.gated = false;  // the driver may stage this copy synchronously
      spec.timing = &s;
      spec.enqueue = [&](int64_t b) { CUDA_CHECK(cudaMemcpyPeerAsync(buf.dst.get(), dst, buf.src.get(), src, size_t(b), s)); };
      spec.verify = [&](int64_t b) { return buf.errors(b); };
      TransferCurve c{src, dst, "nop2p_runtime", "", {}};
      c.points = sweep_transfer(ctx, gate, spec, double(p) / pairs.size(), double(p + 1) / pairs.size());
      ctx.ms.transfers.push_back(std::move(c));
    } catch (...) {
      restore();
      throw;
    }
    restore();
  }
}

}  // namespace peerplan::profiler
