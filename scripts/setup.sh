#!/usr/bin/env bash
# Installs what peerplan needs to build and test on Debian 12 / Ubuntu, then configures and builds.
# Idempotent and quiet when everything is already there.
#   scripts/setup.sh [build-dir]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

PKGS=(build-essential cmake pkg-config libboost-graph-dev nlohmann-json3-dev liblua5.4-dev libhwloc-dev
      libcli11-dev libfmt-dev graphviz libgtest-dev libgmock-dev libbenchmark-dev python3 python3-matplotlib
      libopenmpi-dev openmpi-bin)   # MPI: the `--mpi` path is built and its CPU side tested under mpirun
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

JOBS=$(nproc 2>/dev/null || echo 2)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  # -O2 without -g: debug info cost 20-45 % of each unit's compile time (search.cpp 27 -> 22 s,
  # cmd_plan.cpp 47 -> 33 s, 2026-12-02), which a fresh 2-core CI runner pays for every unit.
  # PEERPLAN_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo" for a build with line numbers.
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    ${PEERPLAN_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$JOBS" 2>&1 | grep -E "error|warning: unused|FAILED" || true
cmake --build "$BUILD_DIR" -j "$JOBS" >/dev/null   # fail loudly if the build is broken
