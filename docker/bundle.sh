#!/usr/bin/env bash
# Copies Nimble programs and the shared libraries they need (everything
# ldd names except the C library itself) into DEST/bin and DEST/lib, so a
# runtime image needs no -dev packages and can be a different distribution
# (the CUDA image is Ubuntu) as long as its glibc is at least as new.
#
#   docker/bundle.sh DEST PROGRAM...     (a PROGRAM that does not exist is an error)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DEST PROGRAM..." >&2; exit 2; }
dest=$1; shift
mkdir -p "$dest/bin" "$dest/lib"
for prog in "$@"; do
  [ -x "$prog" ] || { echo "bundle: '$prog' is not an executable" >&2; exit 1; }
  cp "$prog" "$dest/bin/"
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)"; glibc's own pieces stay with the base image.
  ldd "$prog" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*) continue ;;
    esac
    cp -L -n "$lib" "$dest/lib/" 2>/dev/null || cp -L "$lib" "$dest/lib/"
  done
done
echo "bundle: $(ls "$dest/bin" | wc -l) program(s), $(ls "$dest/lib" | wc -l) librar(ies) in $dest"
