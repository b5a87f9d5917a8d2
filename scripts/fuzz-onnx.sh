#!/usr/bin/env bash
# Fuzzes the ONNX loader: nimble_onnx_model_load_memory plus a walk of the
# whole model (compile-workers/compiler/frontend/onnx/fuzz_onnx_model.c),
# built with clang-16 and -fsanitize=fuzzer,address,undefined.
#
#   scripts/fuzz-onnx.sh [SECONDS]        (default 60)
#
# Seeds: the fixture models (scripts/gen_fixture_models.py), the committed
# crash-regression corpus, and any folders named in NIMBLE_FUZZ_SEEDS
# (colon-separated, e.g. the node suite from scripts/gen_onnx_node_tests.py).
# New crashes, leaks and timeouts are written into tests/compiler/onnx/corpus/
# (commit them once fixed: test_onnx_corpus replays every file there). The
# growing working corpus stays in the work folder, NIMBLE_FUZZ_DIR (default
# build-fuzz-onnx/ at the top of the tree).
set -euo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${NIMBLE_FUZZ_DIR:-$root/build-fuzz-onnx}
corpus=$root/tests/compiler/onnx/corpus
src=$root/compile-workers/compiler/frontend/onnx
proto=${NIMBLE_ONNX_PROTO:-/usr/include/onnx/onnx.proto}
clang=${CLANG:-clang-16}

for tool in "$clang" protoc-c pkg-config /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "fuzz-onnx: $tool not found" >&2; exit 1; }
done
mkdir -p "$work/gen" "$work/seeds" "$work/queue" "$corpus"

protoc-c --proto_path="$(dirname "$proto")" --c_out="$work/gen" "$proto"
cflags=(-g -O1 -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
        -I"$root/compile-workers/include" -I"$root/base/include" -I"$src" -I"$work/gen")
# The generated decoder is built with the same instrumentation, so the
# fuzzer sees its branches too; its warnings are not ours.
"$clang" "${cflags[@]}" -w -c "$work/gen/onnx.pb-c.c" -o "$work/onnx.pb-c.o"
"$clang" "${cflags[@]}" -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
  "$src"/onnx_value_table.c "$src"/onnx_convert.c "$src"/onnx_graph.c "$src"/onnx_model.c \
  "$src"/onnx_wire.c "$src"/op_table.c "$src"/fuzz_onnx_model.c "$root"/base/src/*.c \
  "$work/onnx.pb-c.o" $(pkg-config --libs libprotobuf-c) -o "$work/fuzz_onnx_model"

if [ ! -d "$work/fixtures" ]; then
  /usr/bin/python3 "$root/scripts/gen_fixture_models.py" "$work/fixtures" >/dev/null
fi
find "$work/fixtures" -name '*.onnx' -exec cp {} "$work/seeds/" \;
seed_dirs=("$work/seeds")
IFS=: read -r -a extra <<<"${NIMBLE_FUZZ_SEEDS:-}"
for d in "${extra[@]}"; do [ -n "$d" ] && seed_dirs+=("$d"); done

log=$work/fuzz.log
echo "fuzz-onnx: running for ${seconds}s; log in $log"
set +e
nice -n 10 "$work/fuzz_onnx_model" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$corpus/" \
  "$work/queue" "${seed_dirs[@]}" "$corpus" >"$log" 2>&1
rc=$?
set -e
grep -E '^Done [0-9]+ runs|stat::number_of_executed_units' "$log" || true
if [ $rc -ne 0 ]; then
  echo "fuzz-onnx: the fuzzer stopped with status $rc; see $log and the new files in $corpus" >&2
  exit $rc
fi
