// Helpers of the kernel self-test shared by its case files (self_test_util.hpp).
#include "profiler/exec/self_test_util.hpp"

#include <algorithm>
#include <cmath>

#include <cuda_fp8.h>

#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::exec::selftest {

namespace {
using bf16 = __nv_bfloat16;
constexpr double kTol = 1e-2;  // bf16 outputs (METHOD.md)
}  // namespace

gpu::DeviceBuffer upload(int dev, const std::vector<bf16>& v) {
  gpu::DeviceBuffer b(dev, v.size() * 2);
  CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  return b;
}
gpu::DeviceBuffer upload_int(int dev, const std::vector<int>& v) {
  gpu::DeviceBuffer b(dev, std::max<size_t>(4, v.size() * 4));
  CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return b;
}
gpu::DeviceBuffer poisoned(int dev, size_t n) {
  gpu::DeviceBuffer b(dev, n * 2);
  CUDA_CHECK(cudaMemset(b.get(), 0xff, n * 2));  // 0xffff is a bf16 NaN
  return b;
}

SelfTestResult compare(const std::string& kernel, const std::string& shape, const gpu::DeviceBuffer& out,
                       const std::vector<double>& ref) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<bf16> h(ref.size());
  CUDA_CHECK(cudaMemcpy(h.data(), out.get(), h.size() * 2, cudaMemcpyDeviceToHost));
  SelfTestResult r;
  r.kernel = kernel;
  r.shape = shape;
  r.tolerance = kTol;
  r.all_written = true;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = double(__bfloat162float(h[i]));
    if (std::isnan(g)) r.all_written = false;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  r.rel_error = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (!r.all_written) r.rel_error = INFINITY;
  return r;
}

// Reference attention of one query row against keys/values [0, n).
void ref_attend(const double* q, const std::vector<double>& K, const std::vector<double>& V, int64_t base, int n, int D,
                double scale, double* out) {
  std::vector<double> s(static_cast<size_t>(n));
  double m = -INFINITY;
  for (int t = 0; t < n; ++t) {
    double acc = 0;
    for (int d = 0; d < D; ++d) acc += q[d] * K[size_t(base + int64_t(t) * D + d)];
    s[size_t(t)] = acc * scale;
    m = std::max(m, s[size_t(t)]);
  }
  double l = 0;
  for (auto& x : s) l += (x = std::exp(x - m));
  for (int d = 0; d < D; ++d) {
    double acc = 0;
    for (int t = 0; t < n; ++t) acc += s[size_t(t)] * V[size_t(base + int64_t(t) * D + d)];
    out[d] = acc / l;
  }
}

double e4m3_value(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -v : v;
}

uint8_t e4m3_code(float v) { return uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3)); }

}  // namespace peerplan::exec::selftest
