#!/usr/bin/env bash
# Runs the VM micro-benchmark and prints a Markdown table of its medians.
# There are no peers here: the numbers are the VM's own overheads, which
# the paper's design keeps small next to any real kernel.
#
#   bench/vm/run.sh [BUILD_DIR] [RUNS] [CALLS]     defaults: build 9 3000
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
RUNS=${2:-9}
CALLS=${3:-3000}
BIN=$BUILD/bench/vm/vm_bench
[ -x "$BIN" ] || { echo "run.sh: $BIN not built (cmake --build $BUILD --target vm_bench)" >&2; exit 1; }
out=$("$BIN" "$RUNS" "$CALLS")
echo "$out" >&2
call=$(echo "$out" | awk -F: '/call overhead/ {print $2}' | awk '{print $1}')
move=$(echo "$out" | awk -F: '/per instruction/ {print $2}' | awk '{print $1}')
packed=$(echo "$out" | awk -F: '/per InvokePacked/ {print $2}' | awk '{print $1}')
echo
echo "| VM cost (median of $RUNS runs x $CALLS calls) | ns |"
echo "|---|---:|"
echo "| call: set_input + invoke + Ret | $call |"
echo "| one instruction (Move) | $move |"
echo "| one InvokePacked (no-op kernel, 2 tensors) | $packed |"
