#!/usr/bin/env bash
# Installs every Debian package Nimble needs to build, test and run its
# local farm. Idempotent and non-interactive: safe to run on every CI run.
#
#   scripts/setup.sh           everything (build, tests, farm, fleet)
#   scripts/setup.sh --build   only what building the programs needs (the
#                              images of docker/ build with this)
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config git ca-certificates
  # libraries named in DESIGN.md
  libcurl4-openssl-dev libjansson-dev libzmq3-dev libsodium-dev
  libhiredis-dev libopenblas-dev check libprotobuf-c-dev protobuf-c-compiler
  libonnx-dev libdlpack-dev libmicrohttpd-dev llvm-16-dev lld-16 clang-16 libclang-rt-16-dev
  # what LLVM's static libraries call (nimble-compile links them)
  libzstd-dev zlib1g-dev
  # the linkers of the kernels' shared objects, one per target (GNU ld)
  binutils-x86-64-linux-gnu binutils-aarch64-linux-gnu
  # services the tests start on loopback
  redis-server docker-registry skopeo docker-compose
  # cross target: aarch64 runtime under qemu
  qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  # arm64 builds of the test framework, for the runtime's suites under qemu
  # (Debian multiarch; see cmake/aarch64-linux-gnu.cmake for the qemu flags)
  check:arm64 libsubunit-dev:arm64
  # fixture generators (ONNX conformance cases, reference models)
  python3 python3-onnx python3-numpy python3-torch python3-torchvision
  # tools the tests call
  curl
  # the Python package's tests (python/tests) and its offline pip install
  python3-pytest python3-venv python3-pip python3-setuptools
  # farm observability tests (tests/observe): the Prometheus text parser
  # that reads every /metrics, and headless Chromium for the dashboard
  python3-prometheus-client chromium
  # the fleet stage (scripts/fleet-run.sh): the compose file's images built
  # and run with rootful podman from a debootstrapped base; dnsname lets
  # the containers find each other by service name on podman's CNI network
  podman runc debootstrap podman-compose golang-github-containernetworking-plugin-dnsname
)

# What `cmake --build` of the programs needs (no tests, no cross builds).
BUILD_PACKAGES=(
  build-essential cmake pkg-config ca-certificates
  libcurl4-openssl-dev libjansson-dev libzmq3-dev libsodium-dev
  libhiredis-dev libprotobuf-c-dev protobuf-c-compiler
  libonnx-dev libdlpack-dev libmicrohttpd-dev llvm-16-dev lld-16 libzstd-dev zlib1g-dev
  binutils-x86-64-linux-gnu binutils-aarch64-linux-gnu
)
if [ "${1:-}" = "--build" ]; then
  PACKAGES=("${BUILD_PACKAGES[@]}")
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--build]" >&2
  exit 2
fi

# The arm64 packages need Debian's multiarch support for that architecture.
need_update=0
if [ "${1:-}" != "--build" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  SUDO_DPKG=""; [ "$(id -u)" -ne 0 ] && SUDO_DPKG="sudo"
  $SUDO_DPKG dpkg --add-architecture arm64
  need_update=1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ] && [ "$need_update" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -o DPkg::Lock::Timeout=600 -qq
$SUDO apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"
echo "setup: done"
