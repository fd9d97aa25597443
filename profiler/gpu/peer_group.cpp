#include "profiler/gpu/peer_group.hpp"

#include <algorithm>
#include <memory>

#include "profiler/common/peer_allreduce_plan.hpp"
#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::gpu {

void enable_peer_access_all(const std::vector<int>& devs) {
  for (int a : devs)
    for (int b : devs) {
      if (a == b) continue;
      ScopedDevice d(a);
      cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();  // clear the sticky-free error
      else CUDA_CHECK(e);
    }
}

PeerArLocal::PeerArLocal(int device, int64_t bytes)
    : data(device, size_t(bytes)),
      scratch(device, size_t(bytes)),
      out(device, size_t(bytes)),
      signal(device, sizeof(kernels::PeerArSignal)) {
  ScopedDevice d(device);
  CUDA_CHECK(cudaMemset(signal.get(), 0, sizeof(kernels::PeerArSignal)));
  CUDA_CHECK(cudaMemset(out.get(), 0xff, size_t(bytes)));  // NaN bf16s: an unwritten element shows
  CUDA_CHECK(cudaDeviceSynchronize());
}

PeerArGroup::PeerArGroup(const std::vector<int>& devs, int64_t bytes) : devs_(devs) {
  std::vector<int> distinct;
  for (int d : devs)
    if (std::find(distinct.begin(), distinct.end(), d) == distinct.end()) distinct.push_back(d);
  if (distinct.size() > 1) enable_peer_access_all(distinct);
  ranks_.n = int(devs.size());
  for (size_t r = 0; r < devs.size(); ++r) {
    locals_.push_back(std::make_unique<PeerArLocal>(devs[r], bytes));
    ranks_.data[r] = locals_.back()->data.as<__nv_bfloat16>();
    ranks_.scratch[r] = locals_.back()->scratch.as<__nv_bfloat16>();
    ranks_.signal[r] = locals_.back()->signal.as<kernels::PeerArSignal>();
  }
}

void PeerArGroup::fill_inputs(int64_t bytes) {
  const int64_t n = bytes / 2;
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (int r = 0; r < size(); ++r) {
    for (int64_t i = 0; i < n; ++i) h[size_t(i)] = profiler::float_to_bf16(profiler::peer_allreduce_input(r, i));
    ScopedDevice d(devs_[size_t(r)]);
    CUDA_CHECK(cudaMemcpy(locals_[size_t(r)]->data.get(), h.data(), size_t(bytes), cudaMemcpyHostToDevice));
  }
}

int64_t PeerArGroup::mismatches(int r, int64_t bytes) const {
  std::vector<uint16_t> h(size_t(bytes / 2));
  ScopedDevice d(devs_[size_t(r)]);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(h.data(), locals_[size_t(r)]->out.get(), size_t(bytes), cudaMemcpyDeviceToHost));
  return profiler::peer_allreduce_mismatches(h, size());
}

}  // namespace peerplan::gpu
