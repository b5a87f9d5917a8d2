#!/usr/bin/env bash
# `nimble` must not load LLVM: `nimble compile` runs nimble-compile, the
# program beside it that links the compiler, so that submit/status/fetch
# start in milliseconds. nimble-compile carries LLVM's static libraries
# (its start would otherwise load the shared libLLVM, ~50 ms): it defines
# LLVM's C API itself and needs no libLLVM, which shows that the check below
# sees LLVM where it is. Alone in a folder, `nimble compile` must say it
# cannot find nimble-compile.
#   test_nimble_without_llvm.sh NIMBLE NIMBLE_COMPILE
set -euo pipefail
nimble=$1 compiler=$2
needed() { readelf -d "$1" | awk '/\(NEEDED\)/ {print $NF}'; }
# LLVM in a program: a libLLVM it needs, or LLVM's C API defined in it.
# (awk reads the whole listing: grep -q would stop early, and pipefail
# would count the writer's SIGPIPE as a miss.)
has_llvm() {
  needed "$1" | grep -q 'libLLVM' ||
    readelf -Ws "$1" | awk '$7 != "UND" && $8 == "LLVMContextCreate" {f = 1} END {exit !f}'
}
has_llvm "$compiler" || { echo "FAIL: no LLVM seen in $compiler: the check cannot see it"; exit 1; }
if needed "$compiler" | grep 'libLLVM'; then
  echo "FAIL: $compiler needs the shared libLLVM (it should carry LLVM's static libraries)"; exit 1
fi
needed "$nimble" | grep -q 'libc\.so' || { echo "FAIL: readelf shows no libc in $nimble"; exit 1; }
if has_llvm "$nimble"; then
  echo "FAIL: $nimble has LLVM (it should run nimble-compile for compile)"; exit 1
fi
echo "ok: nimble needs $(needed "$nimble" | wc -l) libraries, none of them LLVM, and has no LLVM of its own"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$nimble" "$tmp/nimble"
rc=0; "$tmp/nimble" compile x.onnx --target=x86 -o x.nimble 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || { echo "FAIL: nimble compile without nimble-compile exited $rc, want 1"; cat "$tmp/err"; exit 1; }
grep -q "cannot run $tmp/nimble-compile" "$tmp/err" || { echo "FAIL: the error does not name the missing program:"; cat "$tmp/err"; exit 1; }
echo "ok: without nimble-compile: $(cat "$tmp/err")"
