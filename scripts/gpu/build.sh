#!/usr/bin/env bash
# Builds the CUDA peerplan binary HERE (the build machine has the CUDA toolkit, NCCL headers,
# Boost, Lua, nlohmann) and stages it for a GPU host that has only the driver, CUDA 13 runtime
# libraries and NCCL: .gpu/bin/peerplan (cudart, Lua and hwloc linked statically).
# Usage: scripts/gpu/build.sh [build-dir]      (default build-gpu)
# Then send .gpu with the device tool's `carry` and run scripts/gpu/run_profile.sh there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
cmake -S "$root" -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DPEERPLAN_TESTS=OFF -DPEERPLAN_BENCH=OFF \
      -DPEERPLAN_HWLOC_STATIC=ON >/dev/null
cmake --build "$build" -j"${JOBS:-1}" --target peerplan
mkdir -p "$root/.gpu/bin"
cp "$build/peerplan" "$root/.gpu/bin/peerplan"
strip --strip-debug "$root/.gpu/bin/peerplan" || true
# Fallbacks for libraries a bare GPU host may lack (used only if ldd there reports them missing).
mkdir -p "$root/.gpu/lib"
for l in libudev.so.1; do
  src=$(ldd "$root/.gpu/bin/peerplan" | awk -v l="$l" '$1 == l {print $3}')
  [ -n "$src" ] && cp -L "$src" "$root/.gpu/lib/"
done
exclude=$(cd "$root" && realpath -m "$(git rev-parse --git-path info/exclude)")   # also right in a git worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
echo "staged $(du -h "$root/.gpu/bin/peerplan" | cut -f1) .gpu/bin/peerplan; it needs on the GPU host:"
ldd "$root/.gpu/bin/peerplan" | awk '{print "  " $1}' | grep -v -E 'linux-vdso|ld-linux'
