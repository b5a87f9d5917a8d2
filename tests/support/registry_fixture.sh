#!/usr/bin/env bash
# Starts or stops Debian's docker-registry (CNCF distribution) on loopback,
# as a peer for the store client's interoperability tests.
#
#   registry_fixture.sh start DIR   writes DIR/addr (127.0.0.1:PORT), DIR/pid,
#                                   DIR/config.yml, DIR/registry.log; no auth
#   registry_fixture.sh stop DIR    stops it by pid and removes DIR/data
#
# Same contract as store_fixture.sh, so one suite runs against either.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
REGISTRY=${NIMBLE_DOCKER_REGISTRY:-/usr/bin/docker-registry}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

stop() {
  if [ -f "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
  fi
  rm -rf "$dir/data"
}

start() {
  if [ ! -x "$REGISTRY" ]; then
    echo "registry_fixture: $REGISTRY not found (apt-get install docker-registry)" >&2
    exit 1
  fi
  stop
  mkdir -p "$dir/data"
  rm -f "$dir/addr"
  # A free port: try a few random ones; the registry exits at once when the
  # port was taken between our check and its bind, and we try again.
  for _ in $(seq 1 20); do
    local port=$((20000 + RANDOM % 40000))
    port_in_use "$port" && continue
    cat >"$dir/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$port
YAML
    "$REGISTRY" serve "$dir/config.yml" </dev/null >"$dir/registry.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/pid"
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      if curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/" 2>/dev/null; then
        echo "127.0.0.1:$port" >"$dir/addr"
        return 0
      fi
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
  done
  echo "registry_fixture: docker-registry did not start; log:" >&2
  cat "$dir/registry.log" >&2 || true
  exit 1
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
