#!/usr/bin/env bash
# The farm, end to end, on loopback: starts redis-server, nimble-store,
# nimble-scheduler and one nimble-worker per target (the real compiler,
# `nimble compile`, behind each), submits the example model for x86,
# aarch64 and cuda, runs the x86 artifact with nimble-run fetching it from
# the store, runs the aarch64 artifact with the aarch64 nimble-run under
# qemu, checks both against PyTorch's output, runs the cuda artifact where a
# CUDA driver exists (else says it skipped it, and why), resubmits (answered
# from the cache), and stops everything it started. Used by scripts/local-farm.sh
# (the README's main job) and by scripts/test.sh's farm stage.
#
#   scripts/farm-run.sh BUILD_DIR AARCH64_BUILD_DIR
#   NIMBLE_FARM_KEEP=1 keeps the work folder (logs, artifacts)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:?usage: farm-run.sh BUILD_DIR AARCH64_BUILD_DIR}
BUILD_A64=${2:?usage: farm-run.sh BUILD_DIR AARCH64_BUILD_DIR}
PY=/usr/bin/python3
for f in "$BUILD/client/nimble" "$BUILD/runtime/tools/nimble-run" "$BUILD_A64/runtime/tools/nimble-run"; do
  [ -x "$f" ] || { echo "farm-run.sh: $f is not built" >&2; exit 1; }
done

echo "== making the example model (mlp: 784-512-512-10, dynamic batch)"
MODELS=$BUILD/models
$PY scripts/gen_reference_models.py "$MODELS" --only mlp >/dev/null
MODEL=$MODELS/mlp.onnx

WORK=$(mktemp -d /tmp/nimble-farm.XXXXXX)
source scripts/farm-lib.sh
cleanup() {
  local rc=$?
  farm_stop
  if [ "${NIMBLE_FARM_KEEP:-0}" = 1 ] || [ $rc -ne 0 ]; then
    echo "== work folder kept: $WORK (logs in $WORK/*.log)"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

farm_start "$BUILD" "$WORK" x86 aarch64 cuda
echo "== farm up: redis :$REDIS_PORT, store $STORE, scheduler $CLIENTS, workers x86 aarch64 cuda"

NIMBLE=("$BUILD/client/nimble" --scheduler "$CLIENTS" --store "$STORE" --token "$TOKEN")
echo "== nimble submit mlp.onnx --targets=x86,aarch64,cuda"
"${NIMBLE[@]}" submit "$MODEL" --targets=x86,aarch64,cuda --name demo/mlp --events "$EVENTS" \
  --timeout 600 | tee "$WORK/submit.out"
for t in x86 aarch64 cuda; do
  grep -q "^$t " "$WORK/submit.out" || { echo "$t did not compile" >&2; exit 1; }
done

# The reference case: batch 3, expected output from PyTorch.
X=$MODELS/mlp.ref/1/x.npy
Y=$MODELS/mlp.ref/1/y.npy
check() { # OUTPUT_DIR LABEL
  local out
  out=$1/y.npy # nimble-run names output files after the model's outputs (mlp's is y)
  $PY - "$out" "$Y" "$2" <<'PY'
import sys, numpy as np
got, want, label = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
print(f"== {label}: output {got.shape}, max |diff| vs PyTorch {np.abs(got - want).max():.2e}: {'OK' if ok else 'WRONG'}")
sys.exit(0 if ok else 1)
PY
}

echo "== x86: nimble-run fetches $STORE/demo/mlp:x86 at start-up (verified, cached) and runs it"
mkdir -p "$WORK/out-x86"
NIMBLE_CACHE_DIR="$WORK/cache" NIMBLE_TOKEN="$TOKEN" "$BUILD/runtime/tools/nimble-run" \
  "$STORE/demo/mlp:x86" --input "x=$X" --output-dir "$WORK/out-x86"
check "$WORK/out-x86" "x86 run"

echo "== aarch64: nimble fetch -o mlp-aarch64.nimble (one file), then the aarch64 nimble-run under qemu"
"${NIMBLE[@]}" fetch demo/mlp --target=aarch64 -o "$WORK/mlp-aarch64.nimble"
mkdir -p "$WORK/out-aarch64"
qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib \
  "$BUILD_A64/runtime/tools/nimble-run" "$WORK/mlp-aarch64.nimble" --input "x=$X" \
  --output-dir "$WORK/out-aarch64"
check "$WORK/out-aarch64" "aarch64 run (qemu)"

echo "== cuda: nimble-run on the cuda artifact (PTX kernels, x86_64 host code)"
mkdir -p "$WORK/out-cuda"
set +e
NIMBLE_CACHE_DIR="$WORK/cache" NIMBLE_TOKEN="$TOKEN" "$BUILD/runtime/tools/nimble-run" \
  "$STORE/demo/mlp:cuda" --input "x=$X" --output-dir "$WORK/out-cuda" 2>"$WORK/cuda-run.err"
CUDA_RC=$?
set -e
if [ $CUDA_RC -eq 0 ]; then
  check "$WORK/out-cuda" "cuda run"
elif grep -q 'cannot load libcuda.so.1' "$WORK/cuda-run.err"; then
  echo "== cuda run: skipped: no CUDA driver on this machine ($(head -n 1 "$WORK/cuda-run.err"))"
else
  cat "$WORK/cuda-run.err" >&2
  exit 1
fi

echo "== nimble submit again: answered from the cache"
"${NIMBLE[@]}" submit "$MODEL" --targets=x86,aarch64,cuda --name demo/mlp --events "$EVENTS" --timeout 60
echo "== local farm OK; stopping redis, store, scheduler and workers"
