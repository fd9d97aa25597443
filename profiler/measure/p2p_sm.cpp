// Peer access by SM kernels: "p2p_sm_read" runs on dst and loads from src's memory;
// "p2p_sm_write" runs on src and stores into dst's memory (nvbandwidth's *_memcpy_read_sm/write_sm).
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

void measure_p2p_sm(Context& ctx) {
  auto pairs = ctx.usable_pairs();
  if (pairs.empty()) {
    ctx.not_applicable("p2p_sm", ctx.gpus() < 2 ? "one GPU: no pairs" : "no pair has usable peer access");
    return;
  }
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  size_t step = 0, steps = pairs.size() * 2;
  for (auto [src, dst] : pairs) {
    // read: kernel on dst needs access to src; write: kernel on src needs access to dst.
    for (const char* mode : {"p2p_sm_read", "p2p_sm_write"}) {
      bool read = std::string(mode) == "p2p_sm_read";
      if (read && !ctx.machine.p2p[size_t(dst)][size_t(src)].usable()) {
        ctx.not_applicable(std::string(mode) + " gpu" + std::to_string(src) + "->gpu" + std::to_string(dst),
                           "the reading GPU has no usable peer access to the source");
        ++step;
        continue;
      }
      PatternPair buf(src, dst, size_t(maxb), 0x33000000u + uint32_t(src * 16 + dst) + (read ? 0x100u : 0u));
      int runner = read ? dst : src;
      gpu::Stream s(runner);
      SweepSpec spec;
      spec.label = std::string(read ? "read " : "write ") + "gpu" + std::to_string(src) + "->gpu" + std::to_string(dst);
      spec.sizes = ctx.plan.transfer_sizes;
      spec.expected_gbps = 400;
      spec.timing = &s;
      spec.enqueue = [&](int64_t b) {
        gpu::ScopedDevice d(runner);
        gpu::launch_sm_copy(buf.dst.get(), buf.src.get(), size_t(b), s);
      };
      spec.verify = [&](int64_t b) { return buf.errors(b); };
      TransferCurve c{src, dst, mode, "", {}};
      c.points = sweep_transfer(ctx, gate, spec, double(step) / steps, double(step + 1) / steps);
      ++step;
      ctx.ms.transfers.push_back(std::move(c));
    }
  }
}

}  // namespace peerplan::profiler
