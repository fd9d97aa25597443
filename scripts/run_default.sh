#!/usr/bin/env bash
# README's main command: set up, build, and plan a shipped model on the measured 2xH200 profile.
#   scripts/run_default.sh [extra peerplan plan options]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/peerplan plan --model llama-3.1-70b --machine h200x2-nvlink --workload chat "$@"
