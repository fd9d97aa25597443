#!/usr/bin/env bash
# Builds the W4A16 weight-layout experiment (bench/quant/w4layout.cu): sm_90, CUDA 13.
# Usage: bench/quant/w4layout.sh [output (default w4layout)]      Run: ./w4layout
set -euo pipefail
cd "$(dirname "$0")/../.."
nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -I. \
  bench/quant/w4layout.cu profiler/kernels/w4a16.cu profiler/gpu/timing.cu planner/core/error.cpp -o "${1:-w4layout}"
