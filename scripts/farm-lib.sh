# The local farm's start and stop, sourced by scripts/farm-run.sh (the
# README's main job and the test command's farm stage) and by
# bench/farm/run.sh. Not a program: `source scripts/farm-lib.sh`, then
#
#   farm_start BUILD_DIR WORK_DIR TARGET...   one worker per target
#   ...  (STORE, CLIENTS, WORKERS, EVENTS, TOKEN, REDIS_PORT are set)
#   farm_stop                                 stops what farm_start started
#
# FARM_WORKER_ARGS (word-split) is added to every worker's command line,
# e.g. "--no-kcache" for compiles that share no kernels.
# Everything listens on loopback on free ports, with a fresh bearer token;
# logs go to WORK_DIR/*.log. The caller owns WORK_DIR and should call
# farm_stop from an EXIT trap.

FARM_PIDS=()

farm_stop() {
  local i p
  for ((i = ${#FARM_PIDS[@]} - 1; i >= 0; i--)); do
    kill "${FARM_PIDS[i]}" 2>/dev/null || true
  done
  for p in "${FARM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  FARM_PIDS=()
}

# Stops one process that farm_start started (e.g. the store, FARM_STORE_PID).
farm_stop_one() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

farm_wait_for_file() { # FILE WHAT WORK
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "$2 did not start; see $3/*.log" >&2
  return 1
}

farm_free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

farm_start() { # BUILD WORK TARGET...
  local build=$1 work=$2 t
  shift 2
  for f in "$build/client/nimble" "$build/artifact-store/server/nimble-store" \
           "$build/scheduler/nimble-scheduler" "$build/compile-workers/worker/nimble-worker"; do
    [ -x "$f" ] || { echo "farm: $f is not built" >&2; return 1; }
  done
  mkdir -p "$work"
  TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$TOKEN" >"$work/tokens"

  REDIS_PORT=$(farm_free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
    >"$work/redis.log" 2>&1 &
  FARM_PIDS+=($!)
  for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

  "$build/artifact-store/server/nimble-store" --listen 127.0.0.1:0 --root "$work/store" \
    --token-file "$work/tokens" --ready-file "$work/store.addr" >"$work/store.log" 2>&1 &
  FARM_STORE_PID=$!
  FARM_PIDS+=($!)
  farm_wait_for_file "$work/store.addr" nimble-store "$work" || return 1
  STORE="http://$(cat "$work/store.addr")"

  "$build/scheduler/nimble-scheduler" --clients 'tcp://127.0.0.1:*' --workers 'tcp://127.0.0.1:*' \
    --events 'tcp://127.0.0.1:*' --redis "127.0.0.1:$REDIS_PORT" --store "$STORE" \
    --store-token-file "$work/tokens" --token-file "$work/tokens" \
    --ready-file "$work/scheduler.ready" >"$work/scheduler.log" 2>&1 &
  FARM_PIDS+=($!)
  farm_wait_for_file "$work/scheduler.ready" nimble-scheduler "$work" || return 1
  CLIENTS=$(sed -n 's/^clients=//p' "$work/scheduler.ready")
  WORKERS=$(sed -n 's/^workers=//p' "$work/scheduler.ready")
  EVENTS=$(sed -n 's/^events=//p' "$work/scheduler.ready")

  for t in "$@"; do
    mkdir -p "$work/worker-$t"
    "$build/compile-workers/worker/nimble-worker" --scheduler "$WORKERS" --store "$STORE" \
      --targets "$t" --id "worker-$t" --compiler "$build/client/nimble" \
      --store-token-file "$work/tokens" --work-dir "$work/worker-$t" ${FARM_WORKER_ARGS:-} \
      >"$work/worker-$t.log" 2>&1 &
    FARM_PIDS+=($!)
  done
}
