#!/usr/bin/env bash
# Model benchmark: Nimble side by side with ONNX Runtime 1.30 (the npm
# package onnxruntime-node's CPU library, measured twice: through its C API
# with bench/models/ort_capi.c, "ORT-C", the column Nimble is held to, and
# through node's binding, "ORT-node") and PyTorch 1.13 eager (Debian's
# python3-torch). A benchmark, not a test: ctest never runs it (it runs
# ort_capi's correctness test, test_ort_capi_matches_references).
#
#   bench/models/run.sh [--threads 1,2] [--repeat N] [--rounds R]
#                       [--models a,b] [--out FILE.md] [--build DIR]
#                       [--openblas-coretype NAME] [--max-batch-s S]
#                       [--tune-budget-s S]
#
#   --threads   thread counts, all measured in the same interleaved run
#               (default 1,2)
#   --repeat    timed runs per configuration, thread count and framework,
#               spread over the rounds (default 60); a framework's turn also
#               stops after --max-batch-s seconds (default 1.0), with at
#               least 3 runs
#   --rounds    interleaved rounds (default 5): A B C D, B C D A, ...
#   --models    subset of lstm,lstm2,gru,bert_tiny,mlp,cnn,squeezenet1_0,
#               mobilenet_v2,loop_if,treelstm (default: all)
#   --out       also write the Markdown report to FILE.md
#   --openblas-coretype NAME
#               set OPENBLAS_CORETYPE (Haswell: AVX2, SkylakeX: AVX-512) for
#               the measured frameworks; default: the environment as it is
#   --tune-budget-s S
#               seconds of `nimble compile --option tune=true` per model
#               (measured at all its configurations' shapes at once) for
#               the "Nimble tuned" column (default 40; 0: no tuned
#               column); docs/tuning.md
#   --build     Nimble build folder (default build/): Nimble's column needs
#               BUILD/client/nimble (with `compile`) and
#               BUILD/runtime/tools/nimble-run; otherwise it says n/a (why)
#
# Everything it fetches or makes goes to bench/models/.cache/ (gitignored;
# NIMBLE_BENCH_CACHE moves it): the reference models from
# scripts/gen_reference_models.py, onnxruntime-node from npm
# (--ignore-scripts), ort_capi (built with cc; NIMBLE_ORT_CAPI names another
# binary), the inputs and every framework's outputs. The OpenBLAS
# environment (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) is left as it is and
# printed in the report's header. See docs/benchmarks.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=${NIMBLE_REFMODELS_PYTHON:-/usr/bin/python3}
for tool in "$py" node npm; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (see docs/benchmarks.md)" >&2; exit 1; }
done
cd "$repo"
cmd="bench/models/run.sh"
for arg in "$@"; do
  if [[ $arg =~ ^[A-Za-z0-9_.,/=:+-]+$ ]]; then cmd+=" $arg"; else cmd+=" $(printf '%q' "$arg")"; fi
done
exec "$py" "$here/bench.py" --command "$cmd" "$@"
