#!/usr/bin/env bash
# The test command (README quick start, CI): installs what it needs, builds
# Nimble twice (release, and AddressSanitizer + UndefinedBehaviorSanitizer)
# and runs every suite in both, runs the runtime's concurrency suites under
# ThreadSanitizer, builds and tests the runtime for aarch64 under qemu, and
# runs the farm end to end with the real compiler (scripts/farm-run.sh:
# redis, store, scheduler, workers; x86 run natively, aarch64 under qemu),
# then brings the self-hosted fleet up for real (scripts/fleet-run.sh:
# docker/compose.yaml's images built with podman from a local Debian base,
# submit/fetch/run against it, a restart; "fleet: skipped: REASON" where
# podman cannot run containers). Integration suites start their own servers
# (nimble-store, docker-registry, redis-server, ...) on loopback as ctest
# fixtures and stop them by pid.
#
#   NIMBLE_TEST_STAGES="release asan tsan cross farm fleet"   which stages to run (default: all)
#   NIMBLE_TEST_JOBS=N                         build and ctest parallelism
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

STAGES=${NIMBLE_TEST_STAGES:-release asan tsan cross farm fleet}
SKIPPED=()
JOBS=${NIMBLE_TEST_JOBS:-$(nproc)}

bash scripts/setup.sh

# The fleet's images build in the background from the start (their
# downloads and compile overlap the other stages); the fleet stage waits
# for them. Stopped with its process group if this script stops first.
# At the lowest priority: the image build (~400 CPU seconds: packages,
# compile, podman's layer commits) takes the cores the tests leave idle
# instead of slowing every stage.
# setsid gives it a scheduler autogroup of its own, which weighs as much as
# this script's whole session whatever its nice: the group's own nice goes
# to 19 (/proc/self/autogroup). Its containers get a low cgroup weight
# from fleet-run.sh --build-only.
FLEET_PREP=
if [[ " $STAGES " == *" fleet "* ]]; then
  mkdir -p "$ROOT/build"
  echo "== fleet: building the images in the background (log: $ROOT/build/fleet-images.log)"
  setsid bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null; exec nice -n 19 bash "$@"' fleet-prep \
    "$ROOT/scripts/fleet-run.sh" --build-only "$ROOT/build" >"$ROOT/build/fleet-images.log" 2>&1 &
  FLEET_PREP=$!
  trap '[ -n "$FLEET_PREP" ] && kill -- -"$FLEET_PREP" 2>/dev/null || true' EXIT
fi

# The aarch64 nimble-run for the compiler's suites that run aarch64
# artifacts under qemu (NIMBLE_AARCH64_NIMBLE_RUN): built once, before the
# first stage that builds the compiler, by scripts/test-cross.sh into the
# cross stage's build directory. When the cross stage is among the stages
# it must build; otherwise a failure leaves the variable empty and those
# suites say they skipped.
A64_RUN=
A64_RUN_DONE=0
aarch64_nimble_run() {
  [ "$A64_RUN_DONE" = 1 ] && return 0
  A64_RUN_DONE=1
  local out
  echo "== building the aarch64 nimble-run for the suites that run aarch64 artifacts under qemu"
  if out=$(bash "$ROOT/scripts/test-cross.sh" --nimble-run); then
    A64_RUN=${out##*$'\n'}
    echo "   NIMBLE_AARCH64_NIMBLE_RUN=$A64_RUN"
  elif [[ " $STAGES " == *" cross "* ]]; then
    echo "$out"
    echo "== the aarch64 nimble-run did not build (the cross stage needs it)" >&2
    return 1
  else
    echo "   not built: the aarch64 suites will say they skipped"
  fi
}

run_stage() { # NAME BUILD_DIR CMAKE_ARGS...
  local name=$1 dir=$2; shift 2
  echo "== stage $name: configure and build in $dir"
  cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j"$JOBS"
  echo "== stage $name: tests"
  # STAGE_EXCLUDE_LABEL: a ctest label regex this stage leaves out.
  # --no-tests=error: a stage that ran nothing fails.
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$JOBS" ${STAGE_EXCLUDE_LABEL:+-LE "$STAGE_EXCLUDE_LABEL"} \
    | tee "$dir.ctest.log"
  report_skips "$name" "$dir.ctest.log"
}

# How many tests a stage skipped (exit 77: no qemu, no GPU, ...), and which:
# a skip is never a pass, and CI shows it.
report_skips() { # NAME LOG
  local n
  n=$(grep -c ' (Skipped)$' "$2" || true)
  echo "== stage $1: $n tests skipped"
  grep ' (Skipped)$' "$2" | sed 's/^[[:space:]]*/   /' || true
}

T_ALL=$SECONDS
for stage in $STAGES; do
  T_STAGE=$SECONDS
  case $stage in
    release)
      aarch64_nimble_run
      run_stage release "$ROOT/build" -DNIMBLE_AARCH64_NIMBLE_RUN="$A64_RUN" ;;
    asan)
      aarch64_nimble_run
      # The suites that compile (`nimble compile`, the farm's workers, and
      # in-process: tests/support/nimble_test_kernel_cache.h) keep their
      # kernels in BUILD/test-kernel-cache. Seeded from the release stage's
      # (the key is the kernel's loop nest, the target and the code
      # generator's source digest, the same in both builds), they skip LLVM
      # for kernels the release stage compiled; the sanitized code (import,
      # passes, lowering, the runtime) runs all the same, and the code
      # generator's own suites compile without a cache.
      if [ -d "$ROOT/build/test-kernel-cache" ] && [ ! -e "$ROOT/build-asan/test-kernel-cache" ]; then
        mkdir -p "$ROOT/build-asan" && cp -a "$ROOT/build/test-kernel-cache" "$ROOT/build-asan/test-kernel-cache"
      fi
      # halt_on_error keeps a sanitizer report from passing as a mere log line.
      # Left to the release stage, to keep the test command under 30
      # minutes: the ONNX node suite run end to end (label node_run: every
      # case compiles through LLVM), and the big reference models (ctest
      # label "large", Check tag "large": squeezenet, mobilenet, bert,
      # lstm2), which run the same compiler code as the small ones, longer;
      # and the tuning suites (label tune), which measure kernels against a
      # time budget: under ASan a compile takes 6x as long, so a budget
      # that compiles every schedule point would take minutes.
      STAGE_EXCLUDE_LABEL='node_run|large|tune' CK_EXCLUDE_TAGS=large \
      ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1} \
      UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
        run_stage asan "$ROOT/build-asan" -DNIMBLE_SANITIZE=ON -DNIMBLE_AARCH64_NIMBLE_RUN="$A64_RUN" ;;
    tsan)
      # Only the runtime is shared across threads by design; its suites
      # labelled tsan (8 VMs on one executable, the BLAS env) run here.
      echo "== stage tsan: configure and build in $ROOT/build-tsan"
      cmake -S "$ROOT" -B "$ROOT/build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNIMBLE_TSAN=ON \
        -DNIMBLE_ONLY=runtime >"$ROOT/build-tsan.configure.log" 2>&1 \
        || { cat "$ROOT/build-tsan.configure.log"; exit 1; }
      cmake --build "$ROOT/build-tsan" -j"$JOBS"
      echo "== stage tsan: tests"
      TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
        ctest --test-dir "$ROOT/build-tsan" --output-on-failure --no-tests=error -j"$JOBS" -L tsan \
        | tee "$ROOT/build-tsan.ctest.log"
      report_skips tsan "$ROOT/build-tsan.ctest.log" ;;
    cross)
      if [ -f "$ROOT/scripts/test-cross.sh" ]; then bash "$ROOT/scripts/test-cross.sh"; fi ;;
    farm)
      echo "== stage farm: the compile farm end to end (needs the release and cross stages' builds)"
      bash "$ROOT/scripts/farm-run.sh" "$ROOT/build" "${NIMBLE_CROSS_BUILD_DIR:-$ROOT/build-aarch64}" ;;
    fleet)
      # Exit 77: podman cannot run containers here; fleet-run.sh said why.
      echo "== stage fleet: docker/compose.yaml built and run with podman (needs the release build)"
      rc=0
      if [ -n "$FLEET_PREP" ]; then
        wait "$FLEET_PREP" || rc=$?
        FLEET_PREP=
        echo "   the background image build ended with status $rc:"
        tail -3 "$ROOT/build/fleet-images.log" | sed 's/^/   /'
        rc=0 # fleet-run.sh builds again (from the layer cache) and reports any failure itself
      fi
      bash "$ROOT/scripts/fleet-run.sh" "$ROOT/build" "${NIMBLE_CROSS_BUILD_DIR:-$ROOT/build-aarch64}" || rc=$?
      if [ "$rc" = 77 ]; then SKIPPED+=(fleet); elif [ "$rc" != 0 ]; then exit "$rc"; fi ;;
    *) echo "unknown stage '$stage' (release, asan, tsan, cross, farm, fleet)" >&2; exit 2 ;;
  esac
  # Each stage's wall time, so that a slow CI run says where the time went.
  echo "== stage $stage took $((SECONDS - T_STAGE)) s (all so far: $((SECONDS - T_ALL)) s)"
done
echo "== all stages passed: $STAGES${SKIPPED[*]:+ (skipped: ${SKIPPED[*]})}"
