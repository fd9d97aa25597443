// SM latency through peer memory, two ways:
//  "sm_pointer_chase": a single thread on dst follows a chain of dependent loads through src's
//    memory, each an uncached (ld.global.cv) read, as nvbandwidth's device_to_device_latency_sm;
//    one sample = one kernel of kSteps loads, latency = time / kSteps (a read round trip).
//  "sm_pingpong": a kernel on each GPU; each writes a counter into the other's memory and waits
//    for the answer, kIters times; one-way latency = elapsed / (2 kIters), timed in the kernel
//    with %globaltimer. This is the latency a pipeline's flag hand-off sees.
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

namespace {
constexpr int kSteps = 1000;
constexpr int kIters = 1000;
constexpr size_t kChaseBytes = size_t(64) << 20;
constexpr size_t kStrideSlots = 4096 / 8;  // 4 KiB between hops: a new cache line, mostly the same TLB page

// Pointer chase: chain lives on src, the chasing kernel runs on dst (needs dst -> src access).
void pointer_chase(Context& ctx, gpu::BlockingGate& gate, int src, int dst) {
  gpu::DeviceBuffer chain(src, kChaseBytes), sink(dst, sizeof(uint64_t));
  {
    gpu::ScopedDevice d(src);
    gpu::launch_init_chase(chain.as<uint64_t>(), kChaseBytes / 8, kStrideSlots, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  gpu::Stream s(dst);
  auto one = [&] {
    return gpu::time_region(&gate, s, {}, [&] {
      gpu::ScopedDevice d(dst);
      gpu::launch_pointer_chase(chain.as<uint64_t>(), kSteps, sink.as<uint64_t>(), s);
    }) / kSteps;
  };
  for (int w = 0; w < ctx.plan.warmup; ++w) one();
  std::vector<double> t;
  for (int i = 0; i < ctx.plan.samples; ++i) t.push_back(one());
  uint64_t end = 0;
  CUDA_CHECK(cudaMemcpy(&end, sink.get(), sizeof end, cudaMemcpyDeviceToHost));
  uint64_t expect = (uint64_t(kSteps) * kStrideSlots) % (kChaseBytes / 8);
  if (end != expect)
    throw RuntimeError("latency_sm: pointer chase through gpu" + std::to_string(src) + " ended at slot " +
                       std::to_string(end) + ", expected " + std::to_string(expect) + " (peer reads returned wrong data)");
  ctx.ms.latencies.push_back({src, dst, "sm_pointer_chase", compute_stats(t)});
}

// Ping-pong: each GPU polls a flag in its own memory that the other GPU writes.
void ping_pong(Context& ctx, int src, int dst) {
  gpu::DeviceBuffer fa(src, 256), fb(dst, 256), times(src, 2 * sizeof(unsigned long long)), tout_a(src, 4), tout_b(dst, 4);
  gpu::Stream sa(src), sb(dst);
  std::vector<double> t;
  for (int i = 0; i < ctx.plan.warmup + ctx.plan.samples; ++i) {
    {
      gpu::ScopedDevice d(src);
      CUDA_CHECK(cudaMemsetAsync(fa.get(), 0, 256, sa));
      CUDA_CHECK(cudaMemsetAsync(tout_a.get(), 0, 4, sa));
      CUDA_CHECK(cudaStreamSynchronize(sa));
    }
    {
      gpu::ScopedDevice d(dst);
      CUDA_CHECK(cudaMemsetAsync(fb.get(), 0, 256, sb));
      CUDA_CHECK(cudaMemsetAsync(tout_b.get(), 0, 4, sb));
      CUDA_CHECK(cudaStreamSynchronize(sb));
    }
    {
      gpu::ScopedDevice d(dst);  // the pong side waits first
      gpu::launch_pong(fb.as<volatile int>(), fa.as<volatile int>(), kIters, tout_b.as<int>(), 2'000'000'000ull, sb);
    }
    {
      gpu::ScopedDevice d(src);
      gpu::launch_ping(fa.as<volatile int>(), fb.as<volatile int>(), kIters, times.as<unsigned long long>(),
                       tout_a.as<int>(), 2'000'000'000ull, sa);
    }
    sa.synchronize();
    sb.synchronize();
    int ta = 0, tb = 0;
    unsigned long long tt[2] = {0, 0};
    CUDA_CHECK(cudaMemcpy(&ta, tout_a.get(), 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&tb, tout_b.get(), 4, cudaMemcpyDeviceToHost));
    if (ta || tb)
      throw RuntimeError("latency_sm: ping-pong between gpu" + std::to_string(src) + " and gpu" + std::to_string(dst) +
                         " timed out (peer stores not visible to the other GPU)");
    CUDA_CHECK(cudaMemcpy(tt, times.get(), sizeof tt, cudaMemcpyDeviceToHost));
    if (i >= ctx.plan.warmup) t.push_back(double(tt[1] - tt[0]) * 1e-9 / (2.0 * kIters));
  }
  auto st = compute_stats(t);
  ctx.ms.latencies.push_back({src, dst, "sm_pingpong", st});
  ctx.ms.latencies.push_back({dst, src, "sm_pingpong", st});
}

}  // namespace

void measure_latency_sm(Context& ctx) {
  auto pairs = ctx.usable_pairs();
  if (pairs.empty()) {
    ctx.not_applicable("latency_sm", ctx.gpus() < 2 ? "one GPU: no pairs" : "no pair has usable peer access");
    return;
  }
  gpu::BlockingGate gate;
  for (size_t p = 0; p < pairs.size(); ++p) {
    auto [src, dst] = pairs[p];
    ctx.progress.update(double(p) / pairs.size(), "gpu" + std::to_string(src) + "<->gpu" + std::to_string(dst));
    // Both need dst -> src peer access; the ping-pong runs once per unordered pair.
    if (ctx.machine.p2p[size_t(dst)][size_t(src)].usable()) pointer_chase(ctx, gate, src, dst);
    if (src < dst && ctx.machine.p2p[size_t(dst)][size_t(src)].usable()) ping_pong(ctx, src, dst);
  }
}

}  // namespace peerplan::profiler
