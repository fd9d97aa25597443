// One routed expert's matmul on the eager cuBLAS path, alone, against its rows (the expert_gemms table;
// planner/topology/measurements.hpp's ExpertGemmTime). moe_expert_gemm's cuBLAS branch runs one
// cuBLASLt call per touched expert, and cuBLASLt changes kernels at per-expert row counts (Mixtral int8
// gets faster past 512 rows an expert, slower past 1024; docs/moe_routing.md), which the grouped rows'
// per-expert mean cannot show: the pricer sums this curve over an op's experts' own rows and takes the
// path's fixed part (offsets' copy, synchronisation, gather) from the grouped rows.
// Each point is exactly the per-expert work of that branch (profiler/kernels/moe_expert_gemm.cpp) for
// one expert: the same runner call with a one-expert offsets array {0, rows}, so fp8 / int8's token
// quantization and int4 / mxfp4's dequantization are in it, the offsets' copy, the synchronisation
// and the gather are not. Behind the gate, weights rotating over copies that exceed the L2 (each call
// reads its expert from HBM, as grouped_gemm.cpp does), at the rows expert_gemm_rows plans.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "planner/compile/graph_batch.hpp"
#include "planner/core/dtype.hpp"
#include "planner/model/moe_kernel_class.hpp"
#include "profiler/common/mxfp4_expert_layout.hpp"
#include "profiler/common/quant_shapes.hpp"
#include "profiler/common/sweep.hpp"
#include "profiler/common/w4_expert_layout.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/quant.hpp"
#include "profiler/measure/pacing.hpp"
#include "profiler/measure/shape_timing.hpp"

namespace peerplan::profiler {

namespace kn = peerplan::kernels;

namespace {

using ExpertKey = std::tuple<int64_t, int64_t, std::string>;  // (n, k, dtype): the table's key

// At most this many kernel launches behind the gate: the launch queue holds about a thousand, and a
// full queue blocks the host while the spin kernel holds the GPU (as grouped_gemm.cpp's cuBLAS rows).
constexpr int kMaxGatedLaunches = 256;
constexpr int kMaxCopies = 16;

// One expert's weights in its format, `copies` times: codes (bf16 weights, fp8 / int8 codes, packed
// int4 / mxfp4 words) and their scales (none for bf16).
struct ExpertCopies {
  std::vector<gpu::DeviceBuffer> codes, scales;
};

double weight_bytes(const std::string& dtype, int64_t n, int64_t k) {
  if (dtype == "int4") return double(kn::w4e_words(1, n, k)) * 4 + double(kn::w4e_scales(1, n, k)) * 2;
  if (dtype == "mxfp4") return double(kn::mxe_words(1, n, k)) * 4 + double(kn::mxe_scales(1, n, k));
  if (dtype == "fp8" || dtype == "int8") return double(n * k) + double(n) * 4;
  return double(n * k) * 2;
}

ExpertCopies make_copies(int g, const std::string& dtype, int64_t n, int64_t k, int copies, cudaStream_t st) {
  ExpertCopies w;
  for (int c = 0; c < copies; ++c) {
    const uint32_t seed = 101 + 7 * uint32_t(c);
    if (dtype == "bf16") {
      w.codes.emplace_back(g, size_t(n * k) * 2);
      gpu::launch_fill_bf16(w.codes.back().get(), size_t(n * k), seed, st);
    } else if (dtype == "fp8" || dtype == "int8") {
      w.codes.emplace_back(g, size_t(n * k));
      if (dtype == "fp8") kn::fill_random_fp8(w.codes.back().as<uint8_t>(), n * k, seed, st);
      else kn::fill_random_int8(w.codes.back().as<int8_t>(), n * k, seed, st);
      w.scales.emplace_back(g, size_t(n) * 4);
      kn::fill_random_f32(w.scales.back().as<float>(), n, seed + 1, 1.f / 8192, 1.f / 4096, st);
    } else if (dtype == "int4") {
      w.codes.emplace_back(g, size_t(kn::w4e_words(1, n, k)) * 4);
      kn::fill_random_u32(w.codes.back().as<uint32_t>(), kn::w4e_words(1, n, k), seed, st);
      w.scales.emplace_back(g, size_t(kn::w4e_scales(1, n, k)) * 2);
      kn::fill_random(w.scales.back().as<__nv_bfloat16>(), kn::w4e_scales(1, n, k), seed + 1, 1.f / 256, st);
    } else {  // mxfp4
      w.codes.emplace_back(g, size_t(kn::mxe_words(1, n, k)) * 4);
      kn::fill_random_u32(w.codes.back().as<uint32_t>(), kn::mxe_words(1, n, k), seed, st);
      w.scales.emplace_back(g, size_t(kn::mxe_scales(1, n, k)));
      kn::fill_random_e8m0(w.scales.back().as<uint8_t>(), kn::mxe_scales(1, n, k), seed + 1, st);
    }
  }
  return w;
}

// Kernel launches of one call, for the gate's budget: bf16 one cuBLASLt matmul (two with a split-K
// reduction); fp8 the quantization, the scales' padding and the matmul; int8 the quantization, the
// matmul and its dequantization; int4 / mxfp4 a dequantization and a matmul per slab of rows of W
// (gemm_quant.cpp's int4_slab_rows: 64 MiB of bf16, whole 128-row multiples).
int launches_per_call(const std::string& dtype, int64_t n, int64_t k) {
  if (dtype == "bf16") return 2;
  if (dtype == "fp8" || dtype == "int8") return 4;
  const int64_t slab = std::min(n, std::max<int64_t>(128, (int64_t(32) << 20) / k / 128 * 128));
  return int(2 * ((n + slab - 1) / slab)) + 1;
}

}  // namespace

void time_expert_shapes(Context& ctx, const std::set<GroupedShapeKey>& keys, const std::vector<int64_t>& tokens) {
  const std::vector<int64_t> counts = grouped_token_counts(tokens);
  const int g = ctx.measured_gpus().front();
  // The rows of each expert shape: the union of its keys' plans (TP-split experts, EP shards and
  // models that share an (n, k) route their rows differently).
  std::map<ExpertKey, std::set<int64_t>> plan;
  for (const GroupedShapeKey& s : keys) {
    const std::optional<DType> dt = parse_dtype(s.dtype);
    const bool runs = s.dtype == "bf16" || s.dtype == "fp8" || s.dtype == "int8" || s.dtype == "int4" || s.dtype == "mxfp4";
    if (!runs || !dt || !kn::quant_grouped_shape_ok(*dt, s.n, s.k)) continue;  // the grouped sweep notes these
    // moe_cublas_path with threshold 0: n and k multiples of 128 (which covers the quantized runner's 16).
    if (!moe_cublas_path(1, 1, 0, s.n, s.k, 0)) {
      ctx.not_applicable(fmt::format("expert_gemm n={} k={} ({})", s.n, s.k, s.dtype),
                         "the cuBLAS path needs n and k multiples of 128; these experts run the grouped kernel at every size");
      continue;
    }
    for (int64_t r : expert_gemm_rows(counts, s.topk, s.model_experts)) plan[{s.n, s.k, s.dtype}].insert(r);
  }
  // A shape whose grouped rows (timed just before, on this GPU) never took the cuBLAS path (too few
  // FLOPs per expert at every eager token count) is never priced from this table.
  for (auto it = plan.begin(); it != plan.end();) {
    const auto& [n, k, dtype] = it->first;
    bool timed = false, cublas = false;
    for (const GroupedGemmTime& r : ctx.ms.grouped_gemms)
      if (r.gpu == g && r.n == n && r.k == k && r.dtype == dtype) timed = true, cublas = cublas || r.cublas;
    if (timed && !cublas) {
      ctx.not_applicable(fmt::format("expert_gemm n={} k={} ({})", n, k, dtype),
                         "no grouped row of this shape took the cuBLAS path (moe_cublas_rule.hpp's threshold)");
      it = plan.erase(it);
    } else {
      ++it;
    }
  }
  if (plan.empty()) return;

  gpu::ScopedDevice dev(g);
  gpu::Stream st(g);
  gpu::BlockingGate gate;
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, g));
  size_t total = 0, done = 0;
  for (const auto& [key, rows] : plan) total += rows.size();
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& [key, row_set] : plan) {
    // Plain variables, which the lambdas below capture.
    const int64_t n = std::get<0>(key), k = std::get<1>(key);
    const std::string dtype = std::get<2>(key);
    const std::vector<int64_t> rows(row_set.begin(), row_set.end());
    const int64_t max_rows = rows.back();
    const bool w4 = dtype == "int4" || dtype == "mxfp4";
    // Copies: 4x the L2 together (so consecutive calls read their expert from HBM, as a layer's
    // experts are read), within a quarter of free memory.
    const double wb = weight_bytes(dtype, n, k);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const int64_t want = int64_t(4.0 * double(std::max(l2_bytes, 1)) / wb) + 1;
    const int64_t fit = int64_t(double(free_b / 4) / wb);
    const int copies = int(std::clamp<int64_t>(std::min(want, fit), 1, kMaxCopies));
    const ExpertCopies w = make_copies(g, dtype, n, k, copies, st);
    gpu::DeviceBuffer x(g, size_t(max_rows * k) * 2), y(g, size_t(max_rows * n) * 2), off_dev(g, 2 * sizeof(int));
    gpu::launch_fill_bf16(x.get(), size_t(max_rows * k), 3, st);
    // Fresh runners per shape: the quantized runner's scratch grows to the first call's rows and keeps
    // every outgrown buffer (for captured graphs), so the largest rows go first, once.
    gpu::GemmRunner cublas(g);
    gpu::QuantGemmRunner qcublas(g);
    std::array<int, 2> off = {0, 0};
    auto set_rows = [&](int64_t m) {  // the one expert's offsets, host and device (fp8 pads scales by them)
      off = {0, int(m)};
      CUDA_CHECK(cudaMemcpyAsync(off_dev.get(), off.data(), sizeof off, cudaMemcpyHostToDevice, st));
      st.synchronize();
    };
    // moe_expert_gemm's per-expert call for expert copy c at off[1] rows (its cuBLAS branch, experts = 1).
    auto call = [&](int c) {
      const size_t i = size_t(c % copies);
      if (dtype == "bf16") {
        cublas.run_any_m(x.get(), w.codes[i].get(), y.get(), off[1], n, k, st);
      } else if (dtype == "fp8") {
        qcublas.run_fp8_channel_groups(x.get(), off.data(), off_dev.as<int>(), 1, n, k, w.codes[i].as<uint8_t>(),
                                       w.scales[i].as<float>(), y.get(), st);
      } else if (dtype == "int8") {
        qcublas.run_int8_channel_groups(x.get(), off.data(), 1, n, k, w.codes[i].as<int8_t>(), w.scales[i].as<float>(),
                                        y.get(), st);
      } else {
        kn::MoeGemmArgs e;
        e.n = n, e.k = k;
        if (dtype == "int4") e.w_int4 = w.codes[i].as<uint32_t>(), e.w_int4_scale = w.scales[i].as<__nv_bfloat16>();
        else e.w_mxfp4 = w.codes[i].as<uint32_t>(), e.w_mxfp4_scale = w.scales[i].as<uint8_t>();
        qcublas.run_4bit_expert_groups(x.get(), off.data(), 1, e, y.get(), st);
      }
    };
    set_rows(max_rows);
    call(0);  // scratch at its largest, outside the gate (growing it synchronises)
    st.synchronize();
    const int max_reps = std::max(1, kMaxGatedLaunches / launches_per_call(dtype, n, k));
    std::vector<std::pair<int64_t, double>> curve;  // this shape's (rows, median), for the refinement
    auto time_rows = [&](int64_t m) {
      ctx.progress.update(std::min(1.0, double(done++) / double(total)),
                          fmt::format("expert gemm n={} k={} {} rows={} (one expert, cuBLAS path)", n, k, dtype, m));
      set_rows(m);
      call(0);  // this row count's cuBLASLt algorithm lookup, outside the gate
      st.synchronize();
      // ~300 us a region at a rough 400 TFLOP/s or 4 TB/s (int4 / mxfp4 also write and read their bf16 slab)
      const double bytes = wb + (w4 ? double(n * k) * 4 : 0.0) + double(m) * double(n + k) * 2;
      const double expect_s = std::max(2.0 * double(m) * double(n) * double(k) / 400e12, bytes / 4e12) + 5e-6;
      const int reps = std::clamp(int(300e-6 / expect_s), 1, std::min(64, max_reps));
      int c = 0;
      auto region = [&] {
        return gpu::time_region(&gate, st, {}, [&] {
          for (int i = 0; i < reps; ++i) call(c++);
        });
      };
      ctx.ms.expert_gemms.push_back({g, n, k, m, dtype, time_compute_samples(ctx, g, region, reps)});
      curve.push_back({m, ctx.ms.expert_gemms.back().time.median});
    };
    for (int64_t m : rows) time_rows(m);
    // Inside the steps where cuBLASLt changed kernels, every 4 rows (sweep.hpp refine_expert_rows).
    const std::vector<int64_t> fine = refine_expert_rows(curve);
    total += fine.size();
    for (int64_t m : fine) time_rows(m);
    shapes.push_back({{"n", n}, {"k", k}, {"dtype", dtype}, {"copies", copies}, {"rows_first", rows.front()},
                      {"rows_last", max_rows}, {"points", rows.size() + fine.size()}, {"refined", fine},
                      {"call", dtype == "bf16" ? "GemmRunner::run_any_m"
                               : dtype == "fp8" ? "QuantGemmRunner::run_fp8_channel_groups"
                               : dtype == "int8" ? "QuantGemmRunner::run_int8_channel_groups"
                                                 : "QuantGemmRunner::run_4bit_expert_groups"}});
  }
  ctx.ms.extra["expert_gemm"] = {
      {"gpu", g},
      {"what", "one routed expert's matmul on moe_expert_gemm's cuBLAS path (profiler/kernels/moe_expert_gemm.cpp), "
               "the runner's call with a one-expert offsets array {0, rows}: fp8 / int8 token quantization and int4 / "
               "mxfp4 dequantization included; the offsets' copy, the synchronisation and the gather not"},
      {"rows", fmt::format("{}, {}, ... up to the busiest expert of any eager grouped call (tokens > {}), uniform "
                           "routing at the first {} layers, rounded up to {} (profiler/common/sweep.hpp expert_gemm_rows)",
                           kExpertRowsStep, 2 * kExpertRowsStep, kGraphTimedMaxRows, kExpertRowsLayers, kExpertRowsStep)},
      {"timing", "behind the gate, ~300 us a region, weights rotating over copies that exceed the L2 4x"},
      {"refined", "every 4 rows inside the steps where the time departs from the curve's typical step (a kernel change: "
                  "sweep.hpp refine_expert_rows)"},
      {"shapes", shapes}};
}

}  // namespace peerplan::profiler
