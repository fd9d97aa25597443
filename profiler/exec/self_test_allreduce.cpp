// Self-test of the peer-memory all-reduce kernels (issue 17) on one GPU: every rank of a group
// emulated in one cooperative launch on this device (profiler/kernels/peer_allreduce.hpp), with
// the same flags, epochs and sums as across GPUs. Inputs are small integers, so the sums are exact
// and any misplaced, missing or doubled share shows as an error. Two calls per shape (the second
// on the advanced epochs, as every call after the first), then one in place (the executor's way).
#include <cstdio>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "profiler/common/peer_allreduce_plan.hpp"
#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/peer_group.hpp"
#include "profiler/kernels/peer_allreduce.hpp"

namespace peerplan::exec::selftest {

void allreduce_cases(std::vector<SelfTestResult>& out, int dev) {
  for (int n : {2, 4, 8})
    for (int64_t bytes : {int64_t(16 * n), int64_t(4096 * n), int64_t(3) << 20, int64_t(36 * 512 * 16 * n + 16 * n)})
      for (ArImpl impl : {ArImpl::OneShot, ArImpl::TwoShot}) {
        const int64_t b = (bytes + 16 * n - 1) / (16 * n) * (16 * n);
        gpu::PeerArGroup g(std::vector<int>(size_t(n), dev), b);
        g.fill_inputs(b);
        std::vector<__nv_bfloat16*> outs;
        for (int r = 0; r < n; ++r) outs.push_back(g.local(r).out.as<__nv_bfloat16>());
        for (int call = 0; call < 2; ++call) kernels::peer_allreduce_emulated(impl, g.ranks(), outs.data(), b, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<double> ref(size_t(b / 2));
        for (size_t i = 0; i < ref.size(); ++i) ref[i] = profiler::peer_allreduce_expected(n, int64_t(i));
        for (int r = 0; r < n; ++r)
          out.push_back(compare(fmt::format("peer_allreduce[{}]", to_string(impl)),
                                fmt::format("{} ranks emulated, {} B, rank {}", n, b, r), g.local(r).out, ref));
        // In place, as the executor runs it (each rank's input buffer is its output): a third call.
        std::vector<__nv_bfloat16*> in_place;
        for (int r = 0; r < n; ++r) in_place.push_back(const_cast<__nv_bfloat16*>(g.ranks().data[r]));
        kernels::peer_allreduce_emulated(impl, g.ranks(), in_place.data(), b, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        for (int r = 0; r < n; ++r)
          out.push_back(compare(fmt::format("peer_allreduce[{}]", to_string(impl)),
                                fmt::format("{} ranks emulated, {} B, rank {}, in place", n, b, r), g.local(r).data, ref));
      }
}

}  // namespace peerplan::exec::selftest
