#!/usr/bin/env bash
# Fuzzes the ONNX importer: any bytes through the loader, then
# nimble_onnx_import_model, type inference and the printer
# (compile-workers/compiler/frontend/onnx_import/fuzz_onnx_import.c), built
# with clang-16 and -fsanitize=fuzzer,address,undefined.
#
#   scripts/fuzz-onnx-import.sh [SECONDS]        (default 60)
#
# Seeds: the fixture models (scripts/gen_fixture_models.py), the ONNX node
# suite (scripts/gen_onnx_node_tests.py, model.onnx of each case), the
# loader's corpus (tests/compiler/onnx/corpus/), the importer's committed
# crash-regression corpus, and any folders named in NIMBLE_FUZZ_SEEDS
# (colon-separated). New crashes, leaks and timeouts are written into
# tests/compiler/onnx_import/corpus/ (commit them once fixed, minimised with
# -minimize_crash=1: test_onnx_import_corpus replays every file there). The
# working corpus stays in NIMBLE_FUZZ_DIR (default build-fuzz-onnx-import/).
# NIMBLE_FUZZ_NICE (default 19) is the nice level. The script ends by
# printing the CPU-seconds the fuzzer used (the budget that counts). NIMBLE_FUZZ_KEEP_GOING=1
# runs in libFuzzer's fork mode and carries on past crashes, leaks and
# timeouts (each still lands in the corpus folder), for long unattended runs.

set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${NIMBLE_FUZZ_DIR:-$root/build-fuzz-onnx-import}
corpus=$root/tests/compiler/onnx_import/corpus
compiler=$root/compile-workers/compiler
proto=${NIMBLE_ONNX_PROTO:-/usr/include/onnx/onnx.proto}
clang=${CLANG:-clang-16}

for tool in "$clang" protoc-c pkg-config /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "fuzz-onnx-import: $tool not found" >&2; exit 1; }
done
mkdir -p "$work/gen" "$work/obj" "$work/seeds" "$work/queue" "$corpus"

protoc-c --proto_path="$(dirname "$proto")" --c_out="$work/gen" "$proto"
cflags=(-g -O1 -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer
        -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
        -I"$root/compile-workers/include" -I"$root/base/include" -I"$compiler"
        -I"$compiler/frontend/onnx" -I"$compiler/frontend/onnx_import" -I"$work/gen")
# The generated decoder is built with the same instrumentation, so the
# fuzzer sees its branches too; its warnings are not ours.
"$clang" "${cflags[@]}" -w -c "$work/gen/onnx.pb-c.c" -o "$work/obj/onnx.pb-c.o"
# Everything the importer links: the IR, the operator registry, typing, the
# text frontend (for the printer's counterpart), the loader and the importer.
srcs=("$compiler"/ir/*.c "$compiler"/ops/*.c "$compiler"/typing/*.c
      "$compiler"/frontend/text/lexer.c "$compiler"/frontend/text/parser.c
      "$root"/base/src/*.c)
for f in "$compiler"/frontend/onnx/*.c "$compiler"/frontend/onnx_import/*.c; do
  case $(basename "$f") in fuzz_*) ;; *) srcs+=("$f") ;; esac
done
objs=()
for f in "${srcs[@]}"; do
  o=$work/obj/$(echo "${f#"$root"/}" | tr / _).o
  if [ ! -e "$o" ] || [ "$f" -nt "$o" ]; then
    nice -n 10 "$clang" "${cflags[@]}" -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
      -c "$f" -o "$o"
  fi
  objs+=("$o")
done
"$clang" "${cflags[@]}" -fsanitize=fuzzer -Wall -Wextra \
  "$compiler/frontend/onnx_import/fuzz_onnx_import.c" "${objs[@]}" "$work/obj/onnx.pb-c.o" \
  $(pkg-config --libs libprotobuf-c) -lm -o "$work/fuzz_onnx_import"

if [ ! -d "$work/fixtures" ]; then
  /usr/bin/python3 "$root/scripts/gen_fixture_models.py" "$work/fixtures" >/dev/null
fi
if [ ! -d "$work/node-tests" ]; then
  /usr/bin/python3 "$root/scripts/gen_onnx_node_tests.py" "$work/node-tests" >/dev/null || true
fi
find "$work/fixtures" -name '*.onnx' -exec cp {} "$work/seeds/" \;
if [ -d "$work/node-tests" ]; then
  find "$work/node-tests" -name model.onnx | while read -r f; do
    cp "$f" "$work/seeds/node-$(basename "$(dirname "$f")").onnx"
  done
fi
seed_dirs=("$work/seeds" "$root/tests/compiler/onnx/corpus")
IFS=: read -r -a extra <<<"${NIMBLE_FUZZ_SEEDS:-}"
for d in "${extra[@]}"; do [ -n "$d" ] && seed_dirs+=("$d"); done

keep=()
if [ "${NIMBLE_FUZZ_KEEP_GOING:-0}" = 1 ]; then
  keep=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
log=$work/fuzz.log
echo "fuzz-onnx-import: running for ${seconds}s; log in $log"
times >"$work/times.before" # the build's CPU, not counted below
set +e
nice -n "${NIMBLE_FUZZ_NICE:-19}" "$work/fuzz_onnx_import" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$corpus/" "${keep[@]}" \
  "$work/queue" "${seed_dirs[@]}" "$corpus" >"$log" 2>&1
rc=$?
set -e
grep -E '^Done [0-9]+ runs|stat::number_of_executed_units' "$log" || true
# CPU time, not wall time, is what a fuzzing budget counts: on a shared
# machine at nice 19 the two differ by 10x. `times` gives the children's.
times >"$work/times.txt" # a builtin in this shell: a pipe would run it in a subshell
secs() { tail -1 "$1" | awk '{
  n = split($1 " " $2, t, " "); s = 0
  for (i = 1; i <= n; i++) { split(t[i], p, "m"); s += p[1] * 60 + p[2] }
  printf "%.0f", s }'; }
cpu=$(( $(secs "$work/times.txt") - $(secs "$work/times.before") ))
echo "fuzz-onnx-import: ${cpu} CPU-seconds in the fuzzer (wall ${seconds}s asked)" | tee -a "$log"
if [ $rc -ne 0 ]; then
  echo "fuzz-onnx-import: the fuzzer stopped with status $rc; see $log and the new files in $corpus" >&2
  exit $rc
fi
