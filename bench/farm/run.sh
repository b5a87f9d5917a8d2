#!/usr/bin/env bash
# Farm benchmark: starts a local farm on loopback (redis-server, nimble-store,
# nimble-scheduler, one nimble-worker per target; scripts/farm-lib.sh), then
# measures submissions answered from the cache, a multi-target fan-out
# against the slowest single target, and nimble-run's start-up fetch with a
# cold, a warm and an offline cache (bench/farm/bench.py says how), prints a
# Markdown report and stops everything. A benchmark, not a test.
#
#   bench/farm/run.sh [--build DIR] [--model NAME] [--targets x86,aarch64,cuda]
#                     [--submits N] [--clients C] [--reps R] [--out FILE]
#
# --model is a reference model (scripts/gen_reference_models.py; default mlp),
# made into bench/farm/.cache/models. A target whose compile fails is left
# out of the timings, with the reason in the report.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build MODEL=mlp TARGETS=x86,aarch64,cuda SUBMITS=40 NCLIENTS=4 REPS=3 OUT=
CMD="bench/farm/run.sh $*"
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --targets) TARGETS=$2; shift 2 ;;
    --submits) SUBMITS=$2; shift 2 ;;
    --clients) NCLIENTS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/farm/run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" && pwd)
NIMBLE_RUN=$BUILD/runtime/tools/nimble-run
[ -x "$NIMBLE_RUN" ] || { echo "bench/farm/run.sh: $NIMBLE_RUN is not built" >&2; exit 1; }

MODELS=$ROOT/bench/farm/.cache/models
/usr/bin/python3 "$ROOT/scripts/gen_reference_models.py" "$MODELS" --only "$MODEL" >/dev/null
INPUT=$(ls "$MODELS/$MODEL.ref/1/"*.npy | head -1)
INPUT_NAME=$(basename "$INPUT" .npy)

WORK=$(mktemp -d /tmp/nimble-bench-farm.XXXXXX)
source "$ROOT/scripts/farm-lib.sh"
cleanup() { farm_stop; rm -rf "$WORK"; }
trap cleanup EXIT
IFS=, read -r -a TARGET_LIST <<<"$TARGETS"
# The workers' kernel folder, which the cold compiles empty (bench.py).
export FARM_WORKER_ARGS="--kcache-dir $WORK/kcache ${FARM_WORKER_ARGS:-}"
farm_start "$BUILD" "$WORK" "${TARGET_LIST[@]}"

# The farm's events endpoint is on a random port: the submits follow
# their jobs by events, as a user's would, not by the STATUS polls alone.
NIMBLE_EVENTS=$EVENTS /usr/bin/python3 "$ROOT/bench/farm/bench.py" --nimble "$BUILD/client/nimble" --nimble-run "$NIMBLE_RUN" \
  --clients "$CLIENTS" --store "$STORE" --token "$TOKEN" --model "$MODELS/$MODEL.onnx" \
  --input "$INPUT_NAME=$INPUT" --work "$WORK" --command "$CMD" --redis-port "$REDIS_PORT" \
  --store-pid "$FARM_STORE_PID" --kcache-dir "$WORK/kcache" --targets "$TARGETS" --submits "$SUBMITS" --clients-n "$NCLIENTS" \
  --reps "$REPS" | tee "$WORK/report.md"
[ -z "$OUT" ] || cp "$WORK/report.md" "$OUT"
