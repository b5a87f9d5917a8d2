#!/usr/bin/env bash
# The farm's kernel cache, measured (docs/farm.md, "The farm's kernel
# cache"): a local farm (redis-server, nimble-store, nimble-scheduler) and
# one worker at a time, each with an empty kernel cache folder of its own.
#
#   bench/farm/kcache.sh [--build DIR] [--models DIR] [--keep] [FIRST SECOND]
#
# Worker A compiles FIRST (default bert_tiny); then, on a fresh worker B,
# SECOND (default bert_tiny_emb, which shares most of its kernels) with
# the farm's kernel cache, and on a fresh worker C with --no-kcache (the
# same compile; --option tune=true keeps the compile cache out of it). It
# prints each `nimble submit -v`'s wall time and kernel line. A benchmark,
# not a test: ctest never runs it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
MODELS=
KEEP=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) break ;;
  esac
done
# The reference models the build makes (the reference_models fixture).
MODELS=${MODELS:-$BUILD/models}
FIRST=${1:-bert_tiny}
SECOND=${2:-bert_tiny_emb}
for m in "$FIRST" "$SECOND"; do
  [ -f "$MODELS/$m.onnx" ] || { echo "kcache bench: no $MODELS/$m.onnx (build the tests, or give --models DIR)" >&2; exit 2; }
done
NIMBLE=$BUILD/client/nimble
WORK=$(mktemp -d /tmp/nimble-kcache-bench.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ]; then echo "kept $WORK (logs, submit output)"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_file() { for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "no $1" >&2; exit 1; }

TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$TOKEN" >"$WORK/tokens"
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$BUILD/artifact-store/server/nimble-store" --listen 127.0.0.1:0 --root "$WORK/store" \
  --token-file "$WORK/tokens" --ready-file "$WORK/store.addr" >"$WORK/store.log" 2>&1 &
PIDS+=($!)
wait_file "$WORK/store.addr"
STORE="http://$(cat "$WORK/store.addr")"
"$BUILD/scheduler/nimble-scheduler" --clients 'tcp://127.0.0.1:*' --workers 'tcp://127.0.0.1:*' \
  --events 'tcp://127.0.0.1:*' --redis "127.0.0.1:$RP" --store "$STORE" \
  --store-token-file "$WORK/tokens" --worker-timeout-ms 1000 \
  --ready-file "$WORK/scheduler.ready" >"$WORK/scheduler.log" 2>&1 &
PIDS+=($!)
wait_file "$WORK/scheduler.ready"
CLIENTS=$(sed -n 's/^clients=//p' "$WORK/scheduler.ready")
WORKERS=$(sed -n 's/^workers=//p' "$WORK/scheduler.ready")
export NIMBLE_EVENTS=$(sed -n 's/^events=//p' "$WORK/scheduler.ready")

WORKER_PID=
start_worker() { # ID [ARGS...]
  local id=$1
  shift
  "$BUILD/compile-workers/worker/nimble-worker" --scheduler "$WORKERS" --store "$STORE" \
    --targets x86 --id "$id" --compiler "$NIMBLE" --store-token-file "$WORK/tokens" \
    --work-dir "$WORK" --kcache-dir "$WORK/kcache-$id" "$@" >"$WORK/worker-$id.log" 2>&1 &
  WORKER_PID=$!
  PIDS+=($!)
}
stop_worker() {
  kill "$WORKER_PID"
  wait "$WORKER_PID" 2>/dev/null || true
  sleep 1.5 # the scheduler drops it after --worker-timeout-ms
}
submit() { # LABEL MODEL [ARGS...]
  local label=$1 model=$2
  shift 2
  local t0 t1
  t0=$(date +%s.%N)
  "$NIMBLE" --scheduler "$CLIENTS" --store "$STORE" --token "$TOKEN" submit "$MODELS/$model.onnx" \
    --targets=x86 --name "bench/$model" -v "$@" >"$WORK/$label.out" 2>"$WORK/$label.err"
  t1=$(date +%s.%N)
  printf '| %s | %s | %.2f | %s |\n' "$label" "$model" "$(echo "$t1 - $t0" | bc)" \
    "$(sed -n 's/^nimble: x86: //p' "$WORK/$label.err" | tail -1)"
}

echo "| step | model | nimble submit (s) | kernels |"
echo "|---|---|---:|---|"
start_worker a
submit "A, cold" "$FIRST"
stop_worker
start_worker b
submit "B, farm cache" "$SECOND"
stop_worker
start_worker c --no-kcache
submit "C, --no-kcache" "$SECOND" --option tune=true
stop_worker
echo
echo "index: $(redis-cli -p "$RP" hlen nimble:kcache:x86) entries;" \
  "blobs in the store: $(find "$WORK/store" -path '*blobs*' -type f | wc -l)"
