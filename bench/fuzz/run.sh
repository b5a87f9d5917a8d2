#!/usr/bin/env bash
# Fuzzes the network-facing parsers, one target after the other
# (docs/reliability.md, "Fuzzing"):
#
#   bench/fuzz/run.sh TARGET... MINUTES
#
# TARGET is json_reader, oci_manifest, reference, store_request, message, or
# all. Each is built with clang-16 (`cmake --build $NIMBLE_BUILD --target
# fuzz_TARGET`), then run for MINUTES of wall time (-max_total_time) under
# nice, starting from its committed corpus (tests/fuzz/TARGET/corpus) and
# the working queue of earlier runs ($NIMBLE_BUILD/fuzz/TARGET/queue). At
# the end the inputs that add coverage are merged back into the committed
# corpus with -merge=1 (review and commit them), and one summary line per
# target is printed and appended to $NIMBLE_BUILD/fuzz/summary.txt: runs,
# CPU-seconds (what a fuzzing budget counts: at nice on a shared machine it
# is far below the wall time), the final cov: and ft:, and the faults found.
#
# A crash, leak, UB report or oracle failure stops the target (libFuzzer's
# default) and leaves the input in $NIMBLE_BUILD/fuzz/TARGET/faults/; fix
# the bug, minimise the input (-minimize_crash=1), put it in the corpus and
# name it in tests/fuzz/test_fuzz_corpus.c. NIMBLE_FUZZ_KEEP_GOING=1 runs in
# fork mode and carries on past faults, for long unattended campaigns.
#
# Environment: NIMBLE_BUILD (default build), NIMBLE_FUZZ_NICE (default 10),
# NIMBLE_FUZZ_TIMEOUT_S (default 10: one input running longer is a fault;
# raise it at a high nice on a busy machine, where a starved process can
# take that long in wall time on a fast input),
# NIMBLE_FUZZ_RSS_MB (default 2048), NIMBLE_FUZZ_NO_MERGE=1 (leave the
# committed corpus alone).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
all=(json_reader oci_manifest reference store_request message)
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET... MINUTES   (TARGET: ${all[*]} or all)" >&2
  exit 2
fi
minutes=${*: -1}
case $minutes in '' | *[!0-9.]*) echo "fuzz: MINUTES must be a number, got '$minutes'" >&2; exit 2 ;; esac
targets=()
for t in "${@:1:$#-1}"; do
  if [ "$t" = all ]; then targets+=("${all[@]}"); else targets+=("$t"); fi
done
build=${NIMBLE_BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')

binary_of() {
  case $1 in
    json_reader | oci_manifest | reference) echo "$build/runtime/fetch/fuzz_$1" ;;
    store_request) echo "$build/artifact-store/server/fuzz_$1" ;;
    message) echo "$build/protocol/fuzz_$1" ;;
    *) echo "fuzz: unknown target '$1' (${all[*]})" >&2; return 1 ;;
  esac
}
max_len_of() {
  case $1 in json_reader | oci_manifest | store_request | message) echo 16384 ;; *) echo 4096 ;; esac
}

[ -f "$build/CMakeCache.txt" ] || { echo "fuzz: $build is not a configured build" >&2; exit 1; }
mkdir -p "$build/fuzz"
status=0
for t in "${targets[@]}"; do
  bin=$(binary_of "$t")
  corpus=$root/tests/fuzz/$t/corpus
  work=$build/fuzz/$t
  mkdir -p "$work/queue" "$work/faults" "$corpus"
  cmake --build "$build" --target "fuzz_$t" >"$work/build.log" 2>&1 ||
    { echo "fuzz: building fuzz_$t failed; see $work/build.log" >&2; exit 1; }
  keep=()
  if [ "${NIMBLE_FUZZ_KEEP_GOING:-0}" = 1 ]; then
    keep=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  fi
  log=$work/fuzz.log
  echo "fuzz: $t for ${seconds}s; log in $log"
  touch "$work/started"
  set +e
  /usr/bin/time -f "%U %S" -o "$work/cpu.txt" nice -n "${NIMBLE_FUZZ_NICE:-10}" "$bin" \
    -max_total_time="$seconds" -max_len="$(max_len_of "$t")" -timeout="${NIMBLE_FUZZ_TIMEOUT_S:-10}" \
    -rss_limit_mb="${NIMBLE_FUZZ_RSS_MB:-2048}" -print_final_stats=1 \
    -artifact_prefix="$work/faults/" "${keep[@]}" "$work/queue" "$corpus" >"$log" 2>&1
  rc=$?
  ended=$(date +%s)
  set -e
  # The last line: time writes "Command exited with non-zero status N" first on a fault.
  cpu=$(tail -1 "$work/cpu.txt" 2>/dev/null | awk '{ printf "%.0f", $1 + $2 }')
  runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | tail -1 | awk '{ print $2 }')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | awk '{ print $2 }')
  ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | awk '{ print $2 }')
  faults=$(find "$work/faults" -type f -newer "$work/started" | wc -l)
  if [ "${NIMBLE_FUZZ_NO_MERGE:-0}" != 1 ]; then
    before=$(find "$corpus" -type f | wc -l)
    nice -n "${NIMBLE_FUZZ_NICE:-10}" "$bin" -merge=1 -max_len="$(max_len_of "$t")" \
      -rss_limit_mb="${NIMBLE_FUZZ_RSS_MB:-2048}" "$corpus" "$work/queue" >"$work/merge.log" 2>&1 || true
    merged=$(($(find "$corpus" -type f | wc -l) - before))
  else
    merged=0
  fi
  line="$(date -u +%FT%TZ) $t: $((ended - $(stat -c %Y "$work/started")))s wall (of ${seconds}s asked), ${cpu:-?} CPU-s, ${runs:-?} runs, cov ${cov:-?}, ft ${ft:-?}, faults $faults (exit $rc), $merged new corpus files"
  echo "fuzz: $line"
  echo "$line" >>"$build/fuzz/summary.txt"
  if [ $rc = 72 ] && [ "$faults" = 0 ]; then
    # libFuzzer's exit status after SIGINT/SIGTERM (-interrupted_exitcode):
    # stopped early on purpose (a campaign counted in CPU-seconds), not a fault.
    echo "fuzz: $t was interrupted (status 72) after ${cpu:-?} CPU-s; no fault"
  elif [ $rc -ne 0 ]; then
    echo "fuzz: $t stopped with status $rc; the input is in $work/faults/ (see $log)" >&2
    status=$rc
  fi
done
exit $status
