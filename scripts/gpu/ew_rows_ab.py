#!/usr/bin/env python3
"""Two profiles' MoE glue rows side by side (moe_route, moe_combine: us at 1-64 rows), for the device scripts' A/B
of those kernels: ew_rows_ab.py NEW.json OLD.json [LABEL] prints "kind cols  LABEL us: rN new/old ..."."""
import json
import sys


def rows(path):
    return {(r["kind"], r["cols"], r["rows"]): r["median_us"] for r in json.load(open(path))["measurements"]["elementwise"]
            if r["kind"] in ("moe_route", "moe_combine")}


def main():
    new, old = rows(sys.argv[1]), rows(sys.argv[2])
    label = sys.argv[3] if len(sys.argv) > 3 else "new / old"
    for (kind, cols) in sorted({(k, c) for (k, c, m) in new}):
        print("  | %-11s cols %5d  %s us: %s" % (kind, cols, label, "  ".join(
            "r%d %.2f/%.2f" % (m, new[(kind, cols, m)], old.get((kind, cols, m), -1))
            for m in (1, 2, 4, 8, 16, 64) if (kind, cols, m) in new)))


if __name__ == "__main__":
    main()
