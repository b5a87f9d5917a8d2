#!/usr/bin/env bash
# `nimble` must not load LLVM: `nimble compile` runs nimble-compile, the
# program beside it that links the compiler, so that submit/status/fetch
# start in milliseconds. readelf lists what each program needs;
# nimble-compile needing libLLVM shows that the listing works. Alone in a
# folder, `nimble compile` must say it cannot find nimble-compile.
#   test_nimble_without_llvm.sh NIMBLE NIMBLE_COMPILE
set -euo pipefail
nimble=$1 compiler=$2
needed() { readelf -d "$1" | awk '/\(NEEDED\)/ {print $NF}'; }
needed "$compiler" | grep -q 'libLLVM' || { echo "FAIL: readelf shows no libLLVM in $compiler: the check cannot see it"; exit 1; }
needed "$nimble" | grep -q 'libc\.so' || { echo "FAIL: readelf shows no libc in $nimble"; exit 1; }
if needed "$nimble" | grep 'libLLVM'; then
  echo "FAIL: $nimble needs LLVM (it should run nimble-compile for compile)"; exit 1
fi
echo "ok: nimble needs $(needed "$nimble" | wc -l) libraries, none of them LLVM"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$nimble" "$tmp/nimble"
rc=0; "$tmp/nimble" compile x.onnx --target=x86 -o x.nimble 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || { echo "FAIL: nimble compile without nimble-compile exited $rc, want 1"; cat "$tmp/err"; exit 1; }
grep -q "cannot run $tmp/nimble-compile" "$tmp/err" || { echo "FAIL: the error does not name the missing program:"; cat "$tmp/err"; exit 1; }
echo "ok: without nimble-compile: $(cat "$tmp/err")"
