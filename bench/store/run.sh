#!/usr/bin/env bash
# Store benchmark: starts nimble-store and docker-registry on loopback side by
# side, runs bench_store against both (repetitions interleaved), prints a
# Markdown table (medians, and nimble-store / docker-registry), and stops both.
#
#   bench/store/run.sh [BUILD_DIR] [bench_store args...]   (default BUILD_DIR: build)
#   e.g. bench/store/run.sh build --reps 7 --head-ms 2000
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
[ $# -gt 0 ] && shift
BUILD=$(cd "$BUILD" && pwd)
BENCH=$BUILD/bench/store/bench_store
if [ ! -x "$BENCH" ]; then
  echo "run.sh: $BENCH not built (cmake --build $BUILD --target bench_store nimble-store)" >&2
  exit 1
fi
WORK=$(mktemp -d /tmp/nimble-bench-store.XXXXXX)
cleanup() {
  bash "$ROOT/tests/support/store_fixture.sh" stop "$WORK/store" >/dev/null 2>&1 || true
  bash "$ROOT/tests/support/registry_fixture.sh" stop "$WORK/registry" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

NIMBLE_BUILD_DIR=$BUILD bash "$ROOT/tests/support/store_fixture.sh" start "$WORK/store" \
  >"$WORK/store.start.log" 2>&1 </dev/null || { cat "$WORK/store.start.log" >&2; exit 1; }
bash "$ROOT/tests/support/registry_fixture.sh" start "$WORK/registry" \
  >"$WORK/registry.start.log" 2>&1 </dev/null || { cat "$WORK/registry.start.log" >&2; exit 1; }

echo "Store benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; docker-registry $(/usr/bin/docker-registry --version 2>/dev/null | awk '{print $3}')."
"$BENCH" --store "nimble-store=http://$(cat "$WORK/store/addr"),test-token" \
         --store "docker-registry=http://$(cat "$WORK/registry/addr")" "$@"
