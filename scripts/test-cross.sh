#!/usr/bin/env bash
# The "cross" stage of scripts/test.sh: builds the runtime for aarch64 with
# cmake/aarch64-linux-gnu.cmake (NIMBLE_RUNTIME_ONLY), runs its test suites
# under qemu-aarch64 (ctest uses the toolchain's emulator setting), and
# prints the stripped sizes of libnimble_runtime.so and nimble-run for
# aarch64 and, when build/ has them, for x86_64.
#
#   scripts/test-cross.sh --nimble-run   only configure and build the aarch64
#                             nimble-run, print its path as the last line
#                             (scripts/test.sh passes it to the release and
#                             asan stages as NIMBLE_AARCH64_NIMBLE_RUN)
#
#   NIMBLE_TEST_JOBS=N        build and ctest parallelism (default: nproc)
#   NIMBLE_CROSS_BUILD_DIR    build directory (default: build-aarch64)
#   NIMBLE_HOST_BUILD_DIR     x86_64 tree to compare sizes with (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${NIMBLE_CROSS_BUILD_DIR:-$ROOT/build-aarch64}
HOST_BUILD=${NIMBLE_HOST_BUILD_DIR:-$ROOT/build}
JOBS=${NIMBLE_TEST_JOBS:-$(nproc)}
TRIPLE=aarch64-linux-gnu
NIMBLE_RUN_ONLY=0
case "${1:-}" in
  "") ;;
  --nimble-run) NIMBLE_RUN_ONLY=1 ;;
  *) echo "test-cross.sh: unknown argument '$1' (expected nothing or --nimble-run)" >&2; exit 2 ;;
esac

# What the stage needs, each with the Debian package that provides it.
missing=()
command -v $TRIPLE-gcc >/dev/null || missing+=("$TRIPLE-gcc (gcc-aarch64-linux-gnu)")
[ -e /usr/$TRIPLE/lib/libc.so.6 ] || missing+=("/usr/$TRIPLE/lib/libc.so.6 (libc6-dev-arm64-cross)")
command -v qemu-aarch64 >/dev/null || missing+=("qemu-aarch64 (qemu-user)")
[ -e /usr/lib/$TRIPLE/pkgconfig/check.pc ] ||
  missing+=("arm64 Check (dpkg --add-architecture arm64 && apt-get update && apt-get install check:arm64 libsubunit-dev:arm64)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-cross.sh: cannot run the aarch64 stage; missing:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  exit 1
fi

echo "== cross: configure $BUILD for $TRIPLE"
cmake -S "$ROOT" -B "$BUILD" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/$TRIPLE.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNIMBLE_RUNTIME_ONLY=ON -DNIMBLE_BUILD_TESTS=ON >"$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
if [ "$NIMBLE_RUN_ONLY" = 1 ]; then
  cmake --build "$BUILD" -j"$JOBS" --target nimble-run >&2
  echo "$BUILD/runtime/tools/nimble-run"
  exit 0
fi
cmake --build "$BUILD" -j"$JOBS"

echo "== cross: tests under qemu-aarch64"
tests_rc=0
# --no-tests=error: a tree configured without tests (scripts/local-farm.sh
# builds this one with NIMBLE_BUILD_TESTS=OFF) must not pass as "no tests".
ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j"$JOBS" | tee "$BUILD.ctest.log" || tests_rc=$?
echo "== cross: $(grep -c ' (Skipped)$' "$BUILD.ctest.log" || true) tests skipped"
grep ' (Skipped)$' "$BUILD.ctest.log" | sed 's/^[[:space:]]*/   /' || true

# Stripped size of the first file named $2 (or $2.N..., a versioned shared
# library whose plain name is a symlink) under $1 (strip tool $3), or "-".
stripped_size() {
  local dir=$1 name=$2 strip=$3 file tmp
  [ -d "$dir" ] || { echo "-"; return; }
  file=$(find "$dir" \( -name "$name" -o -name "$name.[0-9]*" \) -type f -not -path '*/CMakeFiles/*' 2>/dev/null | head -n 1)
  [ -n "$file" ] || { echo "-"; return; }
  tmp=$(mktemp)
  "$strip" -o "$tmp" "$file"
  stat -c %s "$tmp"
  rm -f "$tmp"
}

echo "== cross: stripped sizes in bytes ('-': not built)"
printf '%-26s %12s %12s\n' "file" "x86_64" "aarch64"
for f in libnimble_runtime.so nimble-run; do
  printf '%-26s %12s %12s\n' "$f" \
    "$(stripped_size "$HOST_BUILD" "$f" strip)" \
    "$(stripped_size "$BUILD" "$f" $TRIPLE-strip)"
done
if [ "$tests_rc" -ne 0 ]; then
  echo "== cross: tests failed (ctest exit $tests_rc)" >&2
  exit "$tests_rc"
fi
echo "== cross: passed"
