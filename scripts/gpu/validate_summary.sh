#!/usr/bin/env bash
# Summary table (Markdown) of `peerplan validate --out DIR` runs: one row per DIR.
# usage: scripts/gpu/validate_summary.sh DIR...
exec python3 - "$@" <<'PY'
import json, sys
from pathlib import Path
rows = ["| run | plan | TPOT p50 pred / meas (err) | TTFT p50 pred / meas (err) | E2E p99 pred / meas (err) | output tok/s pred / meas | largest op-class difference | targets |",
        "|---|---|---|---|---|---|---|---|"]
for d in sys.argv[1:]:
    p = Path(d) / "validation.json"
    if not p.exists():
        rows.append(f"| {Path(d).name} | (no report: run failed, see its log) | | | | | | |")
        continue
    v = json.loads(p.read_text())
    r = {x["metric"]: x for x in v["rows"]}
    def cell(m, scale=1e3, unit="ms"):
        x = r[m]
        pred = x.get("predicted_us", x.get("predicted")); meas = x.get("measured_us", x.get("measured"))
        err = x.get("rel_error")
        errs = "n/a" if err is None else f"{100*err:+.1f}%"
        mark = "" if not x.get("target") else (" ✓" if x["within_target"] else " ✗")
        return f"{pred/scale:.2f} / {meas/scale:.2f} {unit} ({errs}){mark}"
    t = r["output_tokens_per_s"]
    worst = v.get("worst_class") or "-"
    if worst != "-":
        worst += f' ({v["worst_class_diff_us"]/1e3:+.2f} ms/iter)'
    rows.append(f'| {Path(d).name} | {v["plan"]} | {cell("tpot_p50")} | {cell("ttft_p50")} | {cell("e2e_p99", 1e6, "s")} | '
                f'{t["predicted"]:.0f} / {t["measured"]:.0f} | {worst} | {"met" if v["targets_met"] else "missed"} |')
print("\n".join(rows))
PY
