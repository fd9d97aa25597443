// Functional P2P check: a capable pair is not trusted until data written through it arrives.
// (Under an IOMMU in translated mode, peer writes can be dropped while cudaDeviceCanAccessPeer
// says yes.) Both paths are checked: SM stores into peer memory, and a copy-engine peer copy.
#include "profiler/discovery/discovery.hpp"

#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"

namespace peerplan::profiler {
namespace {

constexpr size_t kWords = size_t(4) << 20;  // 16 MiB: spans many pages, quick to check

bool enable_peer(int from, int to, std::string& why) {
  gpu::ScopedDevice d(from);
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) { cudaGetLastError(); return true; }
  if (e != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cudaDeviceEnablePeerAccess failed: ") + cudaGetErrorName(e);
    return false;
  }
  return true;
}

}  // namespace

void check_p2p_functional(Machine& m) {
  int n = m.gpu_count();
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst) {
      if (src == dst) continue;
      auto& c = m.p2p[size_t(src)][size_t(dst)];
      if (!c.access) continue;
      std::string why;
      // The kernel runs on src and stores into dst's memory: src needs access to dst.
      if (!enable_peer(src, dst, why)) { c.functional = false; c.note = why; continue; }
      gpu::DeviceBuffer local(src, kWords * 4), remote(dst, kWords * 4);
      // SM path: a kernel on src writes the pattern straight into dst's memory.
      {
        gpu::ScopedDevice d(src);
        CUDA_CHECK(cudaMemset(remote.get(), 0, remote.bytes()));
        gpu::launch_fill_pattern(remote.as<uint32_t>(), kWords, 0x5eed0000u + uint32_t(src * 16 + dst), nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
      }
      size_t sm_bad = gpu::count_pattern_errors(remote.get(), dst, kWords, 0x5eed0000u + uint32_t(src * 16 + dst));
      // Copy-engine path: pattern on src, cudaMemcpyPeer to dst, verify on dst.
      size_t ce_bad = 0;
      {
        gpu::ScopedDevice d(src);
        gpu::launch_fill_pattern(local.as<uint32_t>(), kWords, 0xce000000u + uint32_t(src * 16 + dst), nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpyPeer(remote.get(), dst, local.get(), src, local.bytes()));
        CUDA_CHECK(cudaDeviceSynchronize());
      }
      ce_bad = gpu::count_pattern_errors(remote.get(), dst, kWords, 0xce000000u + uint32_t(src * 16 + dst));
      c.functional = sm_bad == 0 && ce_bad == 0;
      if (!*c.functional) {
        c.note = "reported capable but BROKEN: " + std::to_string(sm_bad) + " of " + std::to_string(kWords) +
                 " words wrong after SM peer stores, " + std::to_string(ce_bad) +
                 " after a copy-engine peer copy (IOMMU in translated mode? ACS redirect?)";
        gpu::ScopedDevice d(src);
        cudaDeviceDisablePeerAccess(dst);
        cudaGetLastError();
      } else {
        c.note = "verified: SM stores and copy-engine copy of 16 MiB arrived intact";
      }
    }
}

}  // namespace peerplan::profiler
