#pragma once
// A small measured 2-GPU machine built in code, shared by the profiler tests.
#include "planner/topology/machine.hpp"

namespace peerplan::proftest {

inline CurvePoint point(int64_t bytes, double seconds) {
  CurvePoint p;
  p.bytes = bytes;
  std::vector<double> s(20, seconds);
  s[0] = seconds * 0.9;   // min
  s[19] = seconds * 1.5;  // max
  p.time = compute_stats(s);
  return p;
}

inline Machine two_gpu_profile() {
  Machine m;
  m.name = "fixture";
  m.host = "testhost";
  m.origin = "measured";
  m.date = "2026-11-30T00:00:00Z";
  for (int i = 0; i < 2; ++i) {
    GpuSpec g;
    g.id = i;
    g.name = "NVIDIA H200";
    g.uuid = "GPU-0000000" + std::to_string(i);
    g.pci = "0000:1" + std::to_string(i) + ":00.0";
    g.memory_bytes = int64_t(141) << 30;
    g.sm_count = 132;
    g.compute_capability = "9.0";
    g.numa = 0;
    m.gpus.push_back(g);
  }
  NodeSpec cpu;
  cpu.id = "cpu0";
  cpu.kind = NodeKind::CpuSocket;
  cpu.numa = 0;
  m.nodes.push_back(cpu);
  for (int i = 0; i < 2; ++i) {
    LinkSpec l;
    l.a = "gpu" + std::to_string(i);
    l.b = "cpu0";
    l.kind = LinkKind::Pcie;
    l.pcie_gen = 5;
    l.pcie_width = 16;
    m.links.push_back(l);
  }
  LinkSpec nv;
  nv.a = "gpu0";
  nv.b = "gpu1";
  nv.kind = LinkKind::NvLink;
  nv.nvlinks = 18;
  nv.gbps_per_link = 25;
  m.links.push_back(nv);
  m.p2p.assign(2, std::vector<P2PInfo>(2));
  for (int i = 0; i < 2; ++i) {
    auto& p = m.p2p[size_t(i)][size_t(1 - i)];
    p.access = true;
    p.perf_rank = 0;
    p.atomics = true;
    p.functional = true;
  }
  Measurements ms;
  TransferCurve ce{0, 1, "p2p_ce", "", {}};
  ce.points = {point(4096, 4e-6), point(int64_t(1) << 30, double(int64_t(1) << 30) / 390e9)};
  ms.transfers.push_back(ce);
  ms.latencies.push_back({0, 1, "sm_pointer_chase", point(4, 0.8e-6).time});
  CollectiveCurve ar;
  ar.op = "all_reduce";
  ar.gpus = {0, 1};
  ar.p2p = true;
  // 2 GiB all-reduce in 6.28 ms: algBw 342 GB/s, busBw 342 (factor 2(n-1)/n = 1 for n = 2).
  ar.points = {point(int64_t(2) << 30, double(int64_t(2) << 30) / 342e9)};
  ms.collectives.push_back(ar);
  ms.gemms.push_back({0, 8192, 8192, 8192, "bf16", point(1, 2.0 * 8192.0 * 8192 * 8192 / 700e12).time});
  ms.hbm_gbps = {4300, 4310};
  ms.launch_overhead_s = 2.5e-6;
  m.measurements = ms;
  return m;
}

}  // namespace peerplan::proftest
