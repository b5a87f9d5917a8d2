#!/usr/bin/env bash
# The self-hosted fleet, for real: docker/compose.yaml's images built with
# podman from a local Debian base (debootstrap; no registry is needed) and
# brought up with podman-compose: redis (AOF on, a volume), the store (a
# volume), the scheduler, an x86 worker and an aarch64 worker (the same x86
# image: the compiler cross-compiles). Then the README's farm commands run
# from this machine against the published ports: submit the reference MLP
# for x86 and aarch64, status, fetch, run (checked against PyTorch's
# output; the aarch64 artifact under qemu when the cross build's nimble-run
# is given). CurveZMQ is on between the scheduler and the workers (the
# compose default: keys made at the first start in the curve-keys volume),
# and a worker with a key of its own is refused. Then the fleet is taken down (containers removed, volumes
# kept) and brought up again: the job is still known (Redis AOF), the same
# artifact is fetched again byte for byte (the store's volume), the CurveZMQ
# keys are the same (their volume), and a
# resubmission is answered from the cache. The scripts/test.sh stage
# `fleet` runs this.
#
#   scripts/fleet-run.sh BUILD_DIR [AARCH64_BUILD_DIR]
#   scripts/fleet-run.sh --build-only BUILD_DIR
#
# --build-only makes the base image and builds the images, then stops:
# scripts/test.sh runs it in the background from its start, so that the
# downloads (debootstrap, the build stage's packages) and the image's
# compile overlap the other stages; the fleet stage's own build is then
# answered from podman's layer cache (the context leaves out docs, tests and
# build trees, so the other stages do not invalidate it). Its containers
# build at the lowest CPU weight (podman build --cpu-shares=2): they run in
# a cgroup of their own, where the caller's nice does not reach, and would
# otherwise take half the cores from the stages beside them.
#
# Exit 77 with "fleet: skipped: REASON" where podman cannot run containers
# (not root, not installed, no base image can be made). The debootstrapped
# base is cached as BUILD_DIR/fleet/debian-bookworm-minbase.tar between
# runs; podman's layer cache keeps the built images. Times of each step are
# printed at the end. NIMBLE_FLEET_KEEP=1 leaves the fleet up.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_ONLY=0
if [ "${1:-}" = --build-only ]; then BUILD_ONLY=1; shift; mkdir -p "${1:?usage: fleet-run.sh --build-only BUILD_DIR}"; fi
BUILD=$(cd "${1:?usage: fleet-run.sh BUILD_DIR [AARCH64_BUILD_DIR]}" && pwd)
BUILD_A64=${2:-}
PY=/usr/bin/python3
CACHE=$BUILD/fleet
BASE_IMAGE=localhost/nimble-base:bookworm
T0=$(date +%s)
TIMES=()
lap() { TIMES+=("$1: $(( $(date +%s) - LAP ))s"); echo "   ($1: $(( $(date +%s) - LAP )) s)"; LAP=$(date +%s); }
LAP=$T0

skip() { echo "fleet: skipped: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "rootful podman needs root (this is uid $(id -u))"
for tool in podman podman-compose debootstrap curl; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup.sh installs it)"
done
if [ $BUILD_ONLY = 0 ]; then
  for f in "$BUILD/client/nimble" "$BUILD/runtime/tools/nimble-run"; do
    [ -x "$f" ] || { echo "fleet-run.sh: $f is not built" >&2; exit 1; }
  done
fi

# podman as it runs on a rootful host without systemd: runc, cgroupfs, no default
# rlimits; in a file of our own, so the machine's configuration is untouched.
mkdir -p "$CACHE"
cat >"$CACHE/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF=$CACHE/containers.conf

echo "== fleet: the base image $BASE_IMAGE"
if ! podman image exists "$BASE_IMAGE"; then
  TAR=$CACHE/debian-bookworm-minbase.tar
  if [ ! -s "$TAR" ]; then
    echo "   debootstrap --variant=minbase bookworm (cached as $TAR)"
    rm -rf "$CACHE/rootfs"
    debootstrap --variant=minbase bookworm "$CACHE/rootfs" http://deb.debian.org/debian \
      >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -5 "$CACHE/debootstrap.log"; skip "debootstrap could not make a base (no Debian mirror?)"; }
    rm -rf "$CACHE"/rootfs/var/cache/apt/archives/*.deb "$CACHE"/rootfs/var/lib/apt/lists/*
    tar -C "$CACHE/rootfs" -cf "$TAR.tmp" . && mv "$TAR.tmp" "$TAR"
    rm -rf "$CACHE/rootfs"
  fi
  podman import "$TAR" "$BASE_IMAGE" >/dev/null
fi
OUT=$(podman run --rm "$BASE_IMAGE" cat /etc/debian_version 2>&1) \
  || skip "podman cannot run a container here: $(echo "$OUT" | tail -1)"
echo "   Debian $OUT runs in a container"
lap "base image"

WORK=$(mktemp -d /tmp/nimble-fleet.XXXXXX)
PROJECT=nimblefleet$$
COMPOSE=(podman-compose -f "$ROOT/docker/compose.yaml" -p "$PROJECT")
[ $BUILD_ONLY = 1 ] && COMPOSE+=(--podman-build-args=--cpu-shares=2)
SERVICES=(redis store scheduler worker-x86 worker-aarch64)
cleanup() {
  local rc=$?
  if [ "${NIMBLE_FLEET_KEEP:-0}" = 1 ]; then
    echo "== fleet left up (project $PROJECT); work folder $WORK"
    return
  fi
  if [ $rc -ne 0 ]; then
    echo "== fleet: failed; the containers' logs:"
    for s in "${SERVICES[@]}"; do
      echo "--- $s"; podman logs --tail 30 "${PROJECT}_${s}_1" 2>&1 || true
    done
  fi
  "${COMPOSE[@]}" down -v >"$WORK/down.log" 2>&1 || true
  podman network rm -f "${PROJECT}_farm" >/dev/null 2>&1 || true
  # Every build leaves its ~2 GB build stage behind untagged; runs on one
  # machine filled its disk with them. Those older than two hours go (the
  # latest stays, for its layer cache).
  podman image prune -f --filter until=2h >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export NIMBLE_BASE_IMAGE=$BASE_IMAGE NIMBLE_RUNTIME_BASE_IMAGE=$BASE_IMAGE
export NIMBLE_STORE_PORT=$(free_port) NIMBLE_SCHEDULER_PORT=$(free_port) NIMBLE_EVENTS_PORT=$(free_port)
export NIMBLE_DASHBOARD_PORT=$(free_port) NIMBLE_SECRETS=$WORK/secrets
# The farm's own token (store writes by workers and the scheduler) first,
# then the clients' token, which the store also takes: `nimble submit`
# uploads the model there.
mkdir -p "$NIMBLE_SECRETS"
FARM_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n%s\n' "$FARM_TOKEN" "$TOKEN" >"$NIMBLE_SECRETS/store-tokens"
printf '%s\n' "$TOKEN" >"$NIMBLE_SECRETS/client-tokens"
chmod 644 "$NIMBLE_SECRETS"/*

echo "== fleet: podman-compose build (${SERVICES[*]}; one compile for every role)"
"${COMPOSE[@]}" build redis store scheduler worker-x86 >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; echo "fleet: the images did not build" >&2; exit 1; }
# podman-compose exits 0 when a service's build fails, leaving the old
# image under the tag: the fleet would then run stale programs.
if grep -q '^Error: ' "$WORK/build.log"; then
  grep -B20 -m1 '^Error: ' "$WORK/build.log"
  echo "fleet: the images did not build (podman-compose said nothing; its log above)" >&2
  exit 1
fi
podman images --format '   {{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'nimble/(redis|store|scheduler|worker):' || true
lap "images built"
if [ $BUILD_ONLY = 1 ]; then
  echo "== fleet: images built in $(( $(date +%s) - T0 ))s (${TIMES[*]}); --build-only: not brought up"
  exit 0
fi

STORE=http://127.0.0.1:$NIMBLE_STORE_PORT
SCHED=tcp://127.0.0.1:$NIMBLE_SCHEDULER_PORT
DASH=http://127.0.0.1:$NIMBLE_DASHBOARD_PORT
NIMBLE=("$BUILD/client/nimble" --scheduler "$SCHED" --store "$STORE" --token "$TOKEN")
export NIMBLE_EVENTS=tcp://127.0.0.1:$NIMBLE_EVENTS_PORT NIMBLE_CONFIG=/dev/null

fleet_up() { # WHAT
  echo "== fleet: podman-compose up -d ${SERVICES[*]} ($1)"
  "${COMPOSE[@]}" up -d --no-build "${SERVICES[@]}" >"$WORK/up.log" 2>&1 \
    || { tail -30 "$WORK/up.log"; echo "fleet: up failed" >&2; exit 1; }
  # Up when the store answers and both workers are connected (the dashboard's state).
  for _ in $(seq 600); do
    if curl -sf "$STORE/v2/" >/dev/null 2>&1 &&
       curl -sf "$DASH/api/state" 2>/dev/null | $PY -c '
import json, sys
s = json.load(sys.stdin)
live = [w for w in s["workers"] if w["connected"] and s["now_ms"] - w["seen_ms"] < s["worker_timeout_ms"]]
sys.exit(0 if sorted(t for w in live for t in w["targets"]) == ["aarch64", "x86"] else 1)'; then
      echo "   store, scheduler and both workers are up"
      return 0
    fi
    sleep 0.5
  done
  echo "fleet: not up after 300 s" >&2
  exit 1
}

fleet_up "first start"
lap "fleet up"

# CurveZMQ is on by default: the scheduler made its keys and the workers'
# in the curve-keys volume at its first start, and admits only those.
echo "== CurveZMQ between the scheduler and its workers"
SCHED_CTR=${PROJECT}_scheduler_1
# (The log is read whole first: `podman logs | grep -q` fails under
# pipefail when grep stops reading early.)
sched_log_has() { local text; text=$(podman logs "$SCHED_CTR" 2>&1) || true; grep -qF -- "$1" <<<"$text"; }
sched_log_has "CURVE on for workers: 3 key(s) allowed" \
  || { echo "fleet: the scheduler did not turn CURVE on with the 3 workers' keys" >&2; exit 1; }
SCHED_PUB=$(podman exec "$SCHED_CTR" cat /var/lib/nimble-keys/scheduler.public)
echo "   scheduler key $SCHED_PUB; 3 worker keys allowed; both workers connected with theirs"
# A worker with a key of its own (not on the allow-list) is refused.
mkdir -p "$WORK/rogue"
"$BUILD/scheduler/nimble-scheduler" --keygen "$WORK/rogue/rogue" >/dev/null
printf '%s\n' "$SCHED_PUB" >"$WORK/rogue/scheduler.public"
chmod 755 "$WORK/rogue"; chmod 644 "$WORK/rogue"/*
podman run -d --name "${PROJECT}_rogue" --network "${PROJECT}_farm" -v "$WORK/rogue:/keys:ro" \
  nimble/worker:latest --scheduler tcp://scheduler:5556 --store http://store:5000 --targets x86 \
  --id rogue --curve-secret /keys/rogue.secret --scheduler-key /keys/scheduler.public >/dev/null
ROGUE=$(cut -c1-40 "$WORK/rogue/rogue.public")
for _ in $(seq 40); do
  sched_log_has "ZAP: refused worker key $ROGUE" && break
  sleep 0.5
done
sched_log_has "ZAP: refused worker key $ROGUE" \
  || { echo "fleet: a worker key not on the allow-list was not refused" >&2; exit 1; }
echo "   scheduler: ZAP: refused worker key $ROGUE" 
curl -sf "$DASH/api/state" | $PY -c '
import json, sys
s = json.load(sys.stdin)
assert not any(w["id"] == "rogue" for w in s["workers"]), "the rogue worker registered"'
podman rm -f "${PROJECT}_rogue" >/dev/null
echo "   a worker with a key not on the list was refused and never registered"
lap "curve"

echo "== the README's farm commands against the fleet"
MODELS=$BUILD/models
$PY scripts/gen_reference_models.py "$MODELS" --only mlp >/dev/null
X=$MODELS/mlp.ref/1/x.npy
Y=$MODELS/mlp.ref/1/y.npy
mkdir -p "$WORK/out-x86" "$WORK/out-aarch64" "$WORK/out-x86-again"
check() { # OUTPUT_DIR LABEL
  $PY - "$1/y.npy" "$Y" "$2" <<'PY'
import sys, numpy as np
got, want, label = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
print(f"== {label}: output {got.shape}, max |diff| vs PyTorch {np.abs(got - want).max():.2e}: {'OK' if ok else 'WRONG'}")
sys.exit(0 if ok else 1)
PY
}
echo "\$ nimble submit mlp.onnx --targets=x86,aarch64 --name demo/mlp"
"${NIMBLE[@]}" submit "$MODELS/mlp.onnx" --targets=x86,aarch64 --name demo/mlp --timeout 600 | tee "$WORK/submit.out"
JOB=j-1 # the fleet's Redis volume is new: this is its first job
for t in x86 aarch64; do
  grep -q "^$t .*demo/mlp:$t@sha256:" "$WORK/submit.out" || { echo "fleet: $t did not compile" >&2; exit 1; }
done
echo "\$ nimble status $JOB"
"${NIMBLE[@]}" status "$JOB" | tee "$WORK/status.out"
grep -q "^job $JOB: done" "$WORK/status.out"
echo "\$ nimble fetch demo/mlp --target=aarch64 -o mlp-aarch64.nimble"
"${NIMBLE[@]}" fetch demo/mlp --target=aarch64 -o "$WORK/mlp-aarch64.nimble"
"${NIMBLE[@]}" fetch demo/mlp --target=x86 -o "$WORK/mlp-x86.nimble"
echo "\$ nimble run demo/mlp:x86 --input x=x.npy"
NIMBLE_CACHE_DIR=$WORK/cache "${NIMBLE[@]}" run demo/mlp:x86 --input "x=$X" --output-dir "$WORK/out-x86"
check "$WORK/out-x86" "x86 run (fetched from the fleet's store)"
if [ -n "$BUILD_A64" ] && [ -x "$BUILD_A64/runtime/tools/nimble-run" ]; then
  qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib \
    "$BUILD_A64/runtime/tools/nimble-run" "$WORK/mlp-aarch64.nimble" --input "x=$X" \
    --output-dir "$WORK/out-aarch64" >/dev/null
  check "$WORK/out-aarch64" "aarch64 run (compiled by the x86 container, run under qemu)"
else
  echo "== aarch64 run: not run (no aarch64 nimble-run given); the artifact was fetched and verified"
fi
echo "\$ curl $DASH/metrics"
curl -sf "$DASH/metrics" | grep -E '^nimble_scheduler_(jobs_total\{kind="compile",state="done"\}|workers\{)' | sed 's/^/   /'
lap "submit, fetch, run"

echo "== fleet: podman-compose down (containers removed, volumes kept), then up again"
"${COMPOSE[@]}" down >"$WORK/down1.log" 2>&1 || { tail -20 "$WORK/down1.log"; exit 1; }
[ -z "$(podman ps -a -q --filter "label=io.podman.compose.project=$PROJECT")" ] \
  || { echo "fleet: containers left after down" >&2; exit 1; }
fleet_up "restart"
[ "$(podman exec "$SCHED_CTR" cat /var/lib/nimble-keys/scheduler.public)" = "$SCHED_PUB" ] \
  || { echo "fleet: the CurveZMQ keys were not kept across the restart" >&2; exit 1; }
echo "   the CurveZMQ keys were kept (the curve-keys volume)"
echo "\$ nimble status $JOB   (Redis came back from its AOF file)"
"${NIMBLE[@]}" status "$JOB" | tee "$WORK/status2.out"
grep -q "^job $JOB: done" "$WORK/status2.out"
echo "\$ nimble fetch demo/mlp --target=x86   (the store's volume)"
"${NIMBLE[@]}" fetch demo/mlp --target=x86 -o "$WORK/mlp-x86-again.nimble"
cmp "$WORK/mlp-x86.nimble" "$WORK/mlp-x86-again.nimble"
echo "   the same artifact, byte for byte ($(stat -c %s "$WORK/mlp-x86.nimble") bytes)"
NIMBLE_CACHE_DIR=$WORK/cache2 "${NIMBLE[@]}" run demo/mlp:x86 --input "x=$X" --output-dir "$WORK/out-x86-again"
check "$WORK/out-x86-again" "x86 run after the restart"
"${NIMBLE[@]}" submit "$MODELS/mlp.onnx" --targets=x86,aarch64 --name demo/mlp --timeout 120 | tee "$WORK/submit2.out"
[ "$(grep -c '(cached)' "$WORK/submit2.out")" = 2 ] || { echo "fleet: the resubmit was not cached" >&2; exit 1; }
lap "restart, fetch again"

echo "== fleet OK in $(( $(date +%s) - T0 ))s (${TIMES[*]})"
