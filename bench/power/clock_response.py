#!/usr/bin/env python3
"""How the GPU's SM clock answers sustained tensor-core work (issue 18 / session 13 S4: the profile times GEMMs
back to back at the power cap, 1830 MHz, while serving runs at 1980).

  clock_response.py OUT_DIR            the study: bursts of a bf16 GEMM of 8B's qkv at M = 4096 (torch.matmul),
                                       sustained, at duty cycles, and recovery after a sustained run; NVML sampled
                                       every ~1 ms beside it; writes OUT_DIR/clock_response.json and prints a table
  clock_response.py --sample OUT.csv   only the sampler (SM MHz, power W, clock-event reasons, every ~5 ms) until
                                       killed: run it beside a validation to see the clock of each iteration

NVML through ctypes (no pynvml on the GPU host). Reasons bits: 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal.
"""
import ctypes
import json
import os
import signal
import sys
import threading
import time


class Nvml:
    def __init__(self, index=0):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0, "nvmlInit_v2 failed"
        self.h = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.h)) == 0
        self.reasons_fn = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            self.lib.nvmlDeviceGetCurrentClocksThrottleReasons

    def sample(self):
        mhz, mw, r = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        self.lib.nvmlDeviceGetClockInfo(self.h, 1, ctypes.byref(mhz))  # NVML_CLOCK_SM
        self.lib.nvmlDeviceGetPowerUsage(self.h, ctypes.byref(mw))
        self.reasons_fn(self.h, ctypes.byref(r))
        return mhz.value, mw.value / 1000.0, r.value


class Sampler(threading.Thread):
    def __init__(self, nvml, period_s):
        super().__init__(daemon=True)
        self.nvml, self.period, self.rows, self.stop = nvml, period_s, [], False

    def run(self):
        while not self.stop:
            t = time.perf_counter()
            self.rows.append((t,) + self.nvml.sample())
            time.sleep(max(0.0, self.period - (time.perf_counter() - t)))


def sample_only(path):
    nvml = Nvml()
    done = []
    signal.signal(signal.SIGTERM, lambda *_: done.append(1))
    with open(path, "w") as f:
        f.write("unix_s,sm_mhz,power_w,reasons\n")
        while not done:
            mhz, w, r = nvml.sample()
            f.write(f"{time.time():.4f},{mhz},{w:.1f},{r:#x}\n")
            time.sleep(0.005)


def study(out_dir):
    import torch
    nvml = Nvml()
    dev = torch.device("cuda:0")
    x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    ws = [torch.randn(6144, 4096, device=dev, dtype=torch.bfloat16) for _ in range(4)]
    y = torch.empty(4096, 6144, device=dev, dtype=torch.bfloat16)
    for w in ws:
        torch.matmul(x, w.t(), out=y)
    torch.cuda.synchronize()
    s = Sampler(nvml, 0.001)
    s.start()
    t_zero = time.perf_counter()

    def burst(seconds):
        """GEMMs for about `seconds`, each between CUDA events; returns (host start, [(host offset, us)])."""
        calls = max(1, int(seconds / 300e-6))
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(calls + 1)]
        t0 = time.perf_counter()
        ev[0].record()
        for i in range(calls):
            torch.matmul(x, ws[i % 4].t(), out=y)
            ev[i + 1].record()
        torch.cuda.synchronize()
        ts, acc = [], 0.0
        for i in range(calls):
            d = ev[i].elapsed_time(ev[i + 1]) * 1e3
            ts.append((acc, d))
            acc += d * 1e-6
        return t0, ts

    def clock_between(a, b):
        v = sorted(r[1] for r in s.rows if a <= r[0] <= b)
        return v[len(v) // 2] if v else 0

    res = {"gemm": "bf16 [4096 x 4096] x [6144 x 4096]^T (Llama-3.1-8B qkv at M = 4096), torch.matmul",
           "device": torch.cuda.get_device_name(0)}
    time.sleep(0.5)
    # 1. Sustained 4 s from idle: GEMM time and clock against time.
    t0, ts = burst(4.0)
    series = []
    for lo in [0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 3.9]:
        sel = [d for (o, d) in ts if lo <= o < lo + 0.01]
        if sel:
            series.append({"t_ms": lo * 1e3, "gemm_us": sorted(sel)[len(sel) // 2],
                           "sm_mhz": clock_between(t0 + lo, t0 + lo + 0.02)})
    res["sustained"] = series
    # 2. Recovery: after 1.5 s sustained, idle g ms, then 10 GEMMs.
    rec = []
    for g in [0.2, 1, 2, 5, 10, 20, 50, 100, 200, 500]:
        burst(1.5)
        time.sleep(g * 1e-3)
        t1, ts1 = burst(0.003)
        rec.append({"idle_ms": g, "gemm_us": sorted(d for _, d in ts1)[len(ts1) // 2],
                    "sm_mhz": clock_between(t1, t1 + 0.005)})
    res["recovery"] = rec
    # 2b. Recovery under memory-bound work (decode steps stream weights at HBM speed): after 1.5 s
    # sustained, copies of a 1 GiB tensor for g ms, then 10 GEMMs.
    src = torch.empty(1 << 29, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    light = []
    for g in [10, 20, 50, 100, 200]:
        burst(1.5)
        t_end = time.perf_counter() + g * 1e-3
        while time.perf_counter() < t_end:
            dst.copy_(src)
            torch.cuda.synchronize()
        t1, ts1 = burst(0.003)
        light.append({"copy_ms": g, "gemm_us": sorted(d for _, d in ts1)[len(ts1) // 2],
                      "sm_mhz": clock_between(t1, t1 + 0.005)})
    res["recovery_under_copies"] = light
    del src, dst
    time.sleep(0.5)
    # 3. Bursts of L ms at duty cycles 50 % and 20 %, ~2 s each: median GEMM time over the bursts after the first 0.5 s.
    duty = []
    for L in [2, 5, 10, 20, 50, 100, 200, 500]:
        for gap_factor in [1, 4]:
            start = time.perf_counter()
            per, clocks = [], []
            while time.perf_counter() - start < 2.0:
                tb, tsb = burst(L * 1e-3)
                if tb - start > 0.5:
                    per += [d for _, d in tsb]
                    clocks.append(clock_between(tb, tb + L * 1e-3))
                time.sleep(L * gap_factor * 1e-3)
            if per:
                duty.append({"burst_ms": L, "idle_ms": L * gap_factor, "duty": 1 / (1 + gap_factor),
                             "gemm_us": sorted(per)[len(per) // 2], "sm_mhz": sorted(clocks)[len(clocks) // 2]})
        time.sleep(0.3)
    res["duty"] = duty
    s.stop = True
    s.join()
    res["samples"] = [(round(r[0] - t_zero, 4), r[1], round(r[2], 1), r[3]) for r in s.rows]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "clock_response.json"), "w") as f:
        json.dump(res, f)
    print("sustained from idle:   t ms   GEMM us   SM MHz")
    for r in series:
        print(f"                   {r['t_ms']:7.0f}  {r['gemm_us']:8.1f}  {r['sm_mhz']:7d}")
    print("after 1.5 s sustained, idle ms -> GEMM us, SM MHz")
    for r in rec:
        print(f"                   {r['idle_ms']:7.1f}  {r['gemm_us']:8.1f}  {r['sm_mhz']:7d}")
    print("after 1.5 s sustained, HBM copies for ms -> GEMM us, SM MHz")
    for r in light:
        print(f"                   {r['copy_ms']:7.1f}  {r['gemm_us']:8.1f}  {r['sm_mhz']:7d}")
    print("bursts: burst ms  idle ms  GEMM us  SM MHz")
    for r in duty:
        print(f"          {r['burst_ms']:7d}  {r['idle_ms']:7d}  {r['gemm_us']:7.1f}  {r['sm_mhz']:6d}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sample":
        sample_only(sys.argv[2])
    elif len(sys.argv) == 2:
        study(sys.argv[1])
    else:
        sys.exit(__doc__)
