#!/usr/bin/env bash
# The main job (README quick start): sets up, builds, starts a local farm on
# loopback, runs the pipeline end to end, and stops everything it started.
#
# Today the farm is the artifact store: this pushes an artifact (blobs and a
# Nimble manifest) to nimble-store, reads it back through the OCI API with
# curl and skopeo, checks every digest, and stops the store. As the compiler,
# scheduler and workers land, this script grows into "compile an example
# model for x86, aarch64 and cuda, then run it" under the same name.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${NIMBLE_BUILD_DIR:-$ROOT/build}

bash scripts/setup.sh
echo "== building Nimble in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null

WORK=$(mktemp -d /tmp/nimble-farm.XXXXXX)
STORE_PID=""
cleanup() {
  if [ -n "$STORE_PID" ] && kill -0 "$STORE_PID" 2>/dev/null; then
    kill "$STORE_PID"; wait "$STORE_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$TOKEN" >"$WORK/tokens"
"$BUILD/artifact-store/server/nimble-store" --listen 127.0.0.1:0 --root "$WORK/store" \
  --token-file "$WORK/tokens" --ready-file "$WORK/addr" --quiet &
STORE_PID=$!
for _ in $(seq 100); do [ -s "$WORK/addr" ] && break; sleep 0.1; done
[ -s "$WORK/addr" ] || { echo "nimble-store did not start" >&2; exit 1; }
STORE="http://$(cat "$WORK/addr")"
echo "== nimble-store listening on $STORE (pid $STORE_PID)"

sha() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }
push_blob() { # FILE -> prints digest
  local d; d=$(sha "$1")
  curl -fsS -X POST -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/octet-stream" \
    --data-binary @"$1" "$STORE/v2/demo/model/blobs/uploads/?digest=$d" -o /dev/null
  echo "$d"
}

# An artifact's parts: a config blob and three layers standing in for the
# metadata, bytecode and weights of a compiled model (docs/artifacts.md).
printf '{"compilerVersion":"0.1.0","target":"x86_64-linux-gnu"}' >"$WORK/config.json"
head -c 65536 /dev/urandom >"$WORK/constants.bin"
printf 'NIMBLE demo bytecode' >"$WORK/bytecode.bin"
printf 'NIMBLE demo metadata' >"$WORK/metadata.bin"
CFG=$(push_blob "$WORK/config.json"); W=$(push_blob "$WORK/constants.bin"); B=$(push_blob "$WORK/bytecode.bin")
M=$(push_blob "$WORK/metadata.bin")
size() { stat -c %s "$1"; }
cat >"$WORK/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.nimble.executable.v1","config":{"mediaType":"application/vnd.nimble.executable.config.v1+json","digest":"$CFG","size":$(size "$WORK/config.json")},"layers":[{"mediaType":"application/vnd.nimble.executable.metadata.v1","digest":"$M","size":$(size "$WORK/metadata.bin")},{"mediaType":"application/vnd.nimble.bytecode.v1","digest":"$B","size":$(size "$WORK/bytecode.bin")},{"mediaType":"application/vnd.nimble.constants.v1","digest":"$W","size":$(size "$WORK/constants.bin")}]}
JSON
curl -fsS -X PUT -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/vnd.oci.image.manifest.v1+json" \
  --data-binary @"$WORK/manifest.json" "$STORE/v2/demo/model/manifests/x86" -o /dev/null
echo "== pushed demo/model:x86 ($(sha "$WORK/manifest.json"))"

curl -fsS "$STORE/v2/demo/model/manifests/x86" -o "$WORK/pulled.json"
cmp -s "$WORK/manifest.json" "$WORK/pulled.json" || { echo "manifest changed in the store" >&2; exit 1; }
for d in "$CFG" "$M" "$B" "$W"; do
  curl -fsS "$STORE/v2/demo/model/blobs/$d" -o "$WORK/blob"
  [ "$(sha "$WORK/blob")" = "$d" ] || { echo "blob $d corrupted" >&2; exit 1; }
done
echo "== pulled the manifest byte-exact and 4 blobs with matching digests"
skopeo inspect --raw --tls-verify=false "docker://$(cat "$WORK/addr")/demo/model:x86" >"$WORK/skopeo.json"
cmp -s "$WORK/manifest.json" "$WORK/skopeo.json" && echo "== skopeo (an independent OCI client) reads the same manifest"
echo "== local farm OK; stopping nimble-store"
