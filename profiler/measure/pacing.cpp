#include "profiler/measure/pacing.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "profiler/common/sweep.hpp"
#include "profiler/common/power_throttle.hpp"
#include "profiler/discovery/nvml.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"

namespace peerplan::profiler {
namespace {

const Nvml& nvml() {
  static const Nvml n;  // loaded once: dlopen + nvmlInit per row would cost more than a sample
  return n;
}

std::string pci_of(int gpu) {
  char buf[32] = {0};
  CUDA_CHECK(cudaDeviceGetPCIBusId(buf, sizeof buf, gpu));
  return buf;
}

}  // namespace

SampleStats time_compute_samples(Context& ctx, int gpu, const std::function<double()>& region, double per) {
  const std::string pci = pci_of(gpu);
  std::vector<double> t, mhz;
  for (int i = 0; i < ctx.plan.warmup + ctx.plan.samples; ++i) {
    const double r = region();
    if (i >= ctx.plan.warmup) {
      t.push_back(r / per);
      // Read as the region ends, before the idle lets the clock recover.
      if (auto f = nvml().sm_clock_mhz(pci)) mhz.push_back(double(*f));
    }
    const double idle = compute_idle_s(r, ctx.plan.duty);
    if (idle > 0) std::this_thread::sleep_for(std::chrono::duration<double>(idle));
  }
  SampleStats s = compute_stats(std::move(t));
  s.sm_mhz = mhz.empty() ? 0.0 : compute_stats(std::move(mhz)).median;
  return s;
}

PowerThrottle measure_power_throttle(int gpu) {
  constexpr int64_t m = 4096, n = 6144, k = 4096;
  constexpr int kCopies = 4;  // weights rotate: every call reads its weight from HBM, as a layer's do
  gpu::ScopedDevice dev(gpu);
  gpu::DeviceBuffer x(gpu, size_t(m * k) * 2), w(gpu, size_t(kCopies * n * k) * 2), y(gpu, size_t(m * n) * 2);
  gpu::Stream s(gpu);
  gpu::launch_fill_bf16(x.get(), size_t(m * k), 1, s);
  gpu::launch_fill_bf16(w.get(), size_t(kCopies * n * k), 2, s);
  gpu::GemmRunner runner(gpu);
  auto call = [&](int i) {
    runner.run(x.get(), static_cast<const char*>(w.get()) + size_t(i % kCopies) * size_t(n * k) * 2, y.get(), m, n, k, s);
  };
  call(0);  // algorithm choice, outside the timing
  s.synchronize();
  gpu::Event e0(gpu), e1(gpu);
  e0.record(s);
  for (int i = 0; i < 8; ++i) call(i);
  e1.record(s);
  e1.synchronize();
  // ~1.5 s of calls at this GPU's rate (H200 ~0.26 ms a call: ~5600); the host enqueues far faster
  // than they run.
  const double per_call = std::max(e1.seconds_since(e0) / 8, 1e-6);
  const int kCalls = int(std::clamp(1.5 / per_call, 200.0, 20000.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the pause: the clock back at boost
  std::vector<gpu::Event> ev;
  ev.reserve(size_t(kCalls) + 1);
  for (int i = 0; i <= kCalls; ++i) ev.emplace_back(gpu);
  ev[0].record(s);
  for (int i = 0; i < kCalls; ++i) {
    call(i);
    ev[size_t(i) + 1].record(s);
  }
  s.synchronize();
  std::vector<double> t;
  t.reserve(kCalls);
  for (int i = 0; i < kCalls; ++i) t.push_back(ev[size_t(i) + 1].seconds_since(ev[size_t(i)]));
  PowerThrottle p = analyse_power_throttle(t);
  p.m = m, p.n = n, p.k = k;
  return p;
}

}  // namespace peerplan::profiler
