#!/usr/bin/env bash
# The main job (README quick start): sets up, builds Nimble (and its runtime
# for aarch64), then runs scripts/farm-run.sh: a local compile farm on
# loopback — redis-server, nimble-store, nimble-scheduler and one
# nimble-worker per target — compiles an example model for x86, aarch64 and
# cuda, runs what comes back (x86 natively, aarch64 under qemu), checks the
# outputs against the reference, and stops everything it started.
#
#   NIMBLE_BUILD_DIR        the x86_64 build tree (default build/)
#   NIMBLE_CROSS_BUILD_DIR  the aarch64 runtime tree (default build-aarch64/)
#   NIMBLE_FARM_KEEP=1      keep the work folder (logs, artifacts) afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${NIMBLE_BUILD_DIR:-$ROOT/build}
BUILD_A64=${NIMBLE_CROSS_BUILD_DIR:-$ROOT/build-aarch64}
JOBS=$(nproc)

bash scripts/setup.sh
echo "== building Nimble in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$JOBS" >/dev/null
echo "== building the aarch64 runtime in $BUILD_A64"
cmake -S "$ROOT" -B "$BUILD_A64" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNIMBLE_RUNTIME_ONLY=ON -DNIMBLE_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD_A64" -j"$JOBS" --target nimble-run >/dev/null

exec bash scripts/farm-run.sh "$BUILD" "$BUILD_A64"
