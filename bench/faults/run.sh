#!/usr/bin/env bash
# The farm's fault figures (docs/reliability.md): runs
# build/tests/scheduler/test_fault_injection with the full counts, on
# loopback, outside the test command (ctest runs it with short counts,
# label trust). Prints the seed and the table; exit status non-zero when any
# job was lost, any artifact duplicated or broken, any partial blob visible
# or any cut upload not resumed.
#
#   bench/faults/run.sh [BUILD_DIR] [extra fault_injection args...]
#   e.g. bench/faults/run.sh build --seed 12345 --only worker --worker-kills 10
#
# Needs the targets nimble-scheduler nimble-worker nimble-store
# farm_test_compiler test_fault_injection built in BUILD_DIR, and
# redis-server. Bounded: 20 minutes, then killed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
[ $# -gt 0 ] && shift
BUILD=$(cd "$BUILD" && pwd)
BIN=$BUILD/tests/scheduler/test_fault_injection
[ -x "$BIN" ] || { echo "run.sh: $BIN is not built (cmake --build $BUILD --target test_fault_injection)" >&2; exit 2; }
cd "$BUILD/tests/scheduler"
NIMBLE_BUILD_DIR=$BUILD NIMBLE_SOURCE_DIR=$ROOT CK_DEFAULT_TIMEOUT=1200 \
  timeout --signal=TERM --kill-after=30 1200 "$BIN" \
  --worker-kills 100 --scheduler-kills 20 --redis-kills 10 --store-kills 20 --net-cuts 10 "$@"
