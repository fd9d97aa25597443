#include "profiler/common/summary.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "profiler/common/bus_bw.hpp"
#include "profiler/common/sweep.hpp"

namespace peerplan::profiler {

CurvePeak curve_peak(const std::vector<CurvePoint>& pts) {
  CurvePeak p;
  for (const auto& x : pts) {
    if (x.time.median <= 0) continue;
    double g = double(x.bytes) / x.time.median / 1e9;
    p.gbps_best = std::max(p.gbps_best, g);
    if (x.bytes >= p.bytes) { p.bytes = x.bytes; p.gbps_at_max = g; }
  }
  return p;
}

namespace {

std::string endpoint(int id) { return id < 0 ? "host" : "gpu" + std::to_string(id); }

std::string gpu_list(const std::vector<int>& g) {
  std::string s;
  for (int x : g) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string meta_str(const nlohmann::json& meta, const char* key) {
  if (meta.contains(key) && meta[key].is_string()) return meta[key].get<std::string>();
  if (meta.contains(key) && meta[key].is_number()) return meta[key].dump();
  return "unknown";
}

}  // namespace

std::string summary_table(const Machine& m) {
  std::string s;
  s += fmt::format("Profile of {} ({}), {} GPU(s)", m.name.empty() ? m.host : m.name, m.date.empty() ? "no date" : m.date,
                   m.gpu_count());
  s += fmt::format("; driver {}, CUDA {}, NCCL {}\n", meta_str(m.meta, "driver"), meta_str(m.meta, "cuda_runtime"),
                   meta_str(m.meta, "nccl"));
  for (const auto& g : m.gpus)
    s += fmt::format("  gpu{}  {}  {} SMs  {:.0f} GiB  cc {}  NUMA {}  {}\n", g.id, g.name, g.sm_count,
                     double(g.memory_bytes) / double(1 << 30), g.compute_capability,
                     g.numa < 0 ? std::string("?") : std::to_string(g.numa), g.pci);

  if (m.gpu_count() > 1 && !m.p2p.empty()) {
    s += "\nPeer access (row = source, column = destination; ok = capable and verified, CAPABLE-BROKEN = failed the check)\n";
    s += fmt::format("  {:<6}", "");
    for (int j = 0; j < m.gpu_count(); ++j) s += fmt::format("{:>16}", endpoint(j));
    s += "\n";
    for (int i = 0; i < m.gpu_count(); ++i) {
      s += fmt::format("  {:<6}", endpoint(i));
      for (int j = 0; j < m.gpu_count(); ++j) {
        std::string cell = "-";
        if (i != j && size_t(i) < m.p2p.size() && size_t(j) < m.p2p[size_t(i)].size()) {
          const auto& p = m.p2p[size_t(i)][size_t(j)];
          cell = !p.access ? "no" : (p.functional.has_value() && !*p.functional) ? "CAPABLE-BROKEN" : "ok";
          if (p.access && p.perf_rank >= 0) cell += fmt::format(" r{}", p.perf_rank);
        }
        s += fmt::format("{:>16}", cell);
      }
      s += "\n";
    }
  }
  if (!m.measurements) {
    s += "\nNo measurements (a nominal machine).\n";
    return s;
  }
  const auto& ms = *m.measurements;
  if (!ms.transfers.empty()) {
    s += "\nTransfers (GB/s = 1e9 B/s; median of the samples)\n";
    s += fmt::format("  {:<14} {:<12} {:<12} {:>10} {:>14} {:>10}\n", "mode", "variant", "path", "largest", "GB/s at it", "best GB/s");
    for (const auto& t : ms.transfers) {
      auto pk = curve_peak(t.points);
      s += fmt::format("  {:<14} {:<12} {:<12} {:>10} {:>14.1f} {:>10.1f}\n", t.mode, t.variant.empty() ? "-" : t.variant,
                       endpoint(t.src) + "->" + endpoint(t.dst), format_size(pk.bytes), pk.gbps_at_max, pk.gbps_best);
    }
  }
  if (!ms.latencies.empty()) {
    s += "\nLatency (microseconds)\n";
    s += fmt::format("  {:<12} {:<12} {:>9} {:>9} {:>9}\n", "kind", "path", "min", "median", "p99");
    for (const auto& l : ms.latencies)
      s += fmt::format("  {:<12} {:<12} {:>9.2f} {:>9.2f} {:>9.2f}\n", l.kind, endpoint(l.src) + "->" + endpoint(l.dst),
                       l.time.min * 1e6, l.time.median * 1e6, l.time.p99 * 1e6);
  }
  if (!ms.collectives.empty()) {
    s += "\nNCCL collectives (busBw by nccl-tests' formulas, median time)\n";
    s += fmt::format("  {:<15} {:<6} {:<4} {:>10} {:>10} {:>10} {:>12}\n", "op", "gpus", "p2p", "largest", "algBw", "busBw",
                     "best busBw");
    for (const auto& c : ms.collectives) {
      CollOp op;
      try { op = coll_op_from_name(c.op); } catch (...) { continue; }
      int n = int(c.gpus.size());
      double best = 0, at_max = 0, alg_at_max = 0;
      int64_t largest = 0;
      for (const auto& p : c.points) {
        double b = bus_bw_gbps(op, n, p.bytes, p.time.median);
        best = std::max(best, b);
        if (p.bytes >= largest) { largest = p.bytes; at_max = b; alg_at_max = alg_bw_gbps(p.bytes, p.time.median); }
      }
      s += fmt::format("  {:<15} {:<6} {:<4} {:>10} {:>10.1f} {:>10.1f} {:>12.1f}\n", c.graph ? c.op + " (graph)" : c.op, gpu_list(c.gpus),
                       c.p2p ? "on" : "off", format_size(largest), alg_at_max, at_max, best);
    }
  }
  if (!ms.hbm_gbps.empty() || ms.launch_overhead_s > 0) {
    s += "\nPer GPU\n";
    for (size_t i = 0; i < ms.hbm_gbps.size(); ++i)
      s += fmt::format("  gpu{}  device-local copy {:.0f} GB/s (read + write)\n", i, ms.hbm_gbps[i]);
    if (ms.launch_overhead_s > 0) s += fmt::format("  kernel launch overhead {:.2f} us\n", ms.launch_overhead_s * 1e6);
  }
  if (!ms.gemms.empty()) {
    double best = 0;
    const GemmTime* bg = nullptr;
    for (const auto& g : ms.gemms) {
      double tf = 2.0 * double(g.m) * double(g.n) * double(g.k) / g.time.median / 1e12;
      if (tf > best) { best = tf; bg = &g; }
    }
    s += fmt::format("\nGEMM: {} bf16 shapes timed; best {:.0f} TFLOP/s at m={} n={} k={}\n", ms.gemms.size(), best,
                     bg ? bg->m : 0, bg ? bg->n : 0, bg ? bg->k : 0);
  }
  if (const auto& t = ms.power_throttle) {
    // The clock the tables were timed at decides which prefills they price right (docs/profiler.md, Clocks).
    s += t->factor > 1 ? fmt::format("Power throttle: bf16 GEMM m={} n={} k={} {:.1f} us at boost, {:.1f} us ({:.2f}x) "
                                     "after {:.0f} ms of back-to-back work\n",
                                     t->m, t->n, t->k, t->boost_s * 1e6, t->sustained_s * 1e6, t->factor, t->onset_s * 1e3)
                       : fmt::format("Power throttle: none within {:.1f} s of back-to-back GEMMs\n", t->onset_s);
    for (const ThrottleMix& x : t->mixes)
      s += fmt::format("  at {:3.0f} % attention: GEMM {:.3f}x, attention {:.3f}x, elementwise {:.3f}x\n",
                       100 * x.attention_share, x.gemm, x.attention, x.elementwise);
    for (const GroupedThrottle& g : t->grouped) {
      s += fmt::format("  {} MoE dispatch ({} tokens, {} of {} experts a token) in place of the GEMM:\n", g.model,
                       g.tokens, g.topk, g.experts);
      for (const ThrottleMix& x : g.mixes)
        s += fmt::format("    at {:3.0f} % attention: dispatch {:.3f}x, attention {:.3f}x, elementwise {:.3f}x\n",
                         100 * x.attention_share, x.gemm, x.attention, x.elementwise);
    }
  }
  if (!ms.attention.empty()) s += fmt::format("Attention: {} kernel timings\n", ms.attention.size());
  if (ms.extra.contains("not_applicable"))
    for (const auto& [k, v] : ms.extra["not_applicable"].items())
      s += fmt::format("Not applicable: {} ({})\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

}  // namespace peerplan::profiler
