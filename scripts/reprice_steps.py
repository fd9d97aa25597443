#!/usr/bin/env python3
"""Re-prices the recorded decode-step benches (`validate --bench-steps`) of the runs below with a peerplan binary,
each on the profile its lease wrote, and prints GPU / price per batch: one table row per run, model and stream
setting. The step-level companion of revalidate_offline.py (which re-predicts whole serving runs): a pricer change
shows here, on real GPU steps of several leases, in ~15 s and without a GPU.
  scripts/reprice_steps.py BUILD/peerplan [substring ...]    (substrings select rows, e.g. dsv2 session36)
  scripts/reprice_steps.py --check BUILD/peerplan             (a test, ctest runs it: exit 1 if any step reads outside
                                                               GPU / price 0.94-1.06, a guard against a pricer change
                                                               that breaks the steps; the cells spanned 0.948-1.042 in
                                                               session 37)
Two-stream steps (PEERPLAN_SHARED_STREAM=1) are priced on the profile as it is; one-stream ones on a copy with
meta.executor_shared_stream=false, so the pricer prices what the executor ran. Each cell is the mean over the run's
rounds. Session 37 used it to find the one-stream over-price at 1-2 tokens (planner/cost/gemv_prefetch.hpp)."""
import functools, gzip, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS_DIR = os.path.join(ROOT, "docs/validation/runs")
PLANS = {"qwen": ("qwen-moe-1gpu", "qwen1.5-moe-a2.7b"), "dsv2": ("deepseek-v2-lite-1gpu", "deepseek-v2-lite"),
         "8b": ("llama8b-1gpu", "llama-3.1-8b")}
# (run, model, shared stream on?, step directories: the rounds of one setting). Only runs whose profile timed the model.
# Session 21 A's profile predates the router and shared-gate GEMM rows (session 31): those price from the roofline fit,
# ~2.5 us a layer short at 1-2 tokens, so its steps read ~2-4 % slower than priced for that reason.
RUNS = [
    ("2026-12-06-session21/A", "qwen", True, ["steps-qwen1.5-moe-a2.7b-s1-r1", "steps-qwen1.5-moe-a2.7b-s1-r2"]),
    ("2026-12-06-session21/A", "qwen", False, ["steps-qwen1.5-moe-a2.7b-s0-r1", "steps-qwen1.5-moe-a2.7b-s0-r2"]),
    ("2026-12-06-session21/A", "dsv2", True, ["steps-deepseek-v2-lite-s1-r1", "steps-deepseek-v2-lite-s1-r2"]),
    ("2026-12-06-session21/A", "dsv2", False, ["steps-deepseek-v2-lite-s0-r1", "steps-deepseek-v2-lite-s0-r2"]),
    ("2026-12-07-session31/A", "8b", False, ["steps-8b-a1-321", "steps-8b-a1-342"]),
    ("2026-12-07-session34/E", "dsv2", True, ["steps-dsv2-s1-134"]),
    ("2026-12-07-session34/E", "dsv2", False, ["steps-dsv2-s0-135"]),
    ("2026-12-07-session35/A", "qwen", True, ["steps-qwen-s1-41"]),
    ("2026-12-07-session35/A", "qwen", False, ["steps-qwen-s0-45"]),
    ("2026-12-07-session36/A", "qwen", True, ["steps-qwen-s1-42"]),
    ("2026-12-07-session36/A", "qwen", False, ["steps-qwen-s0-46"]),
    ("2026-12-07-session36/B", "qwen", True, ["steps-qwen-s1-153", "steps-qwen-s1-159"]),
    ("2026-12-07-session36/B", "qwen", False, ["steps-qwen-s0-156", "steps-qwen-s0-162"]),
    ("2026-12-07-session36/B", "dsv2", True, ["steps-dsv2-s1-154", "steps-dsv2-s1-161"]),
    ("2026-12-07-session36/B", "dsv2", False, ["steps-dsv2-s0-157", "steps-dsv2-s0-164"]),
]


@functools.lru_cache(maxsize=None)
def machine(tmp, run, shared):
    """The run's profile as a file with the stream setting said; written once for each (run, setting)."""
    with gzip.open(os.path.join(RUNS_DIR, run, "profile.json.gz")) as f:
        d = json.load(f)
    d.setdefault("meta", {})["executor_shared_stream"] = shared
    path = os.path.join(tmp, f"{run.replace('/', '_')}-{int(shared)}.json")
    with open(path, "w") as f:
        json.dump(d, f)
    return path


def reprice(binary, tmp, run, model, shared, dirs):
    plan, name = PLANS[model]
    m = machine(tmp, run, shared)
    ratios = {}
    for d in dirs:
        r = subprocess.run([binary, "validate", "--reprice", os.path.join(RUNS_DIR, run, d, "steps.json"), "--plan",
                            os.path.join(ROOT, "docs/validation/plans", plan + ".json"), "--model", name, "--machine", m],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"reprice_steps: {run}/{d}: {r.stderr.strip()[-400:]}")
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) > 5 and f[0] == "decode":
                ratios.setdefault(int(f[1]), []).append(float(f[-1]))
    return {b: statistics.mean(v) for b, v in ratios.items()}


BAND = (0.94, 1.06)


def main():
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    binary, only = os.path.abspath(args[0]), args[1:]
    outside = []
    batches = [1, 2, 4, 8, 32, 64]
    print(f"{'run':24s} {'model':5s} {'streams':8s} " + " ".join(f"{'b=' + str(b):>6s}" for b in batches) +
          "   (GPU / price)")
    with tempfile.TemporaryDirectory(prefix="reprice-steps-") as tmp:
        for run, model, shared, dirs in RUNS:
            tag = f"{run} {model}"
            if only and not any(o in tag for o in only):
                continue
            r = reprice(binary, tmp, run, model, shared, dirs)
            cells = " ".join(f"{r[b]:6.3f}" if b in r else f"{'-':>6s}" for b in batches)
            print(f"{run:24s} {model:5s} {'two' if shared else 'one':8s} {cells}")
            # Two streams past 8 tokens (session 21 A) is what the executor no longer runs (kSharedStreamMaxTokens).
            outside += [f"{tag} {'two' if shared else 'one'} b={b}: {v:.3f}" for b, v in r.items()
                        if not BAND[0] <= v <= BAND[1] and not (shared and b > 8)]
    if check and outside:
        sys.exit("reprice_steps: outside GPU / price %.2f-%.2f: " % BAND + "; ".join(outside))


if __name__ == "__main__":
    main()
