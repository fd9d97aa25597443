#!/usr/bin/env bash
# README's test command: set up, build, run every test (ctest). Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
cd build && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
