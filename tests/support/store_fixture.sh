#!/usr/bin/env bash
# Starts and stops a nimble-store for tests, on loopback with a free port.
#
#   store_fixture.sh start DIR [extra nimble-store args...]
#       creates DIR/tokens (holding "test-token"), starts nimble-store with
#       --listen 127.0.0.1:0 --root DIR/root --ready-file DIR/addr
#       --token-file DIR/tokens, waits (at most 20 s) for DIR/addr
#       ("HOST:PORT"), and writes the server's pid to DIR/pid. Its stderr
#       goes to DIR/log; its stdin and stdout are /dev/null, so a caller
#       that waits for its output pipes (ctest) is not held up.
#   store_fixture.sh stop DIR
#       sends SIGTERM to the pid in DIR/pid, waits (at most 20 s, then
#       SIGKILL), and removes DIR/pid. Exit status 0 when the server exited 0.
#
# The binary is $NIMBLE_STORE_BIN, or
# $NIMBLE_BUILD_DIR/artifact-store/server/nimble-store.
set -u

usage() { echo "usage: $0 start DIR [args...] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2

case "$cmd" in
  start)
    bin=${NIMBLE_STORE_BIN:-${NIMBLE_BUILD_DIR:-}/artifact-store/server/nimble-store}
    if [ ! -x "$bin" ]; then
      echo "store_fixture: nimble-store not found at '$bin' (set NIMBLE_STORE_BIN or NIMBLE_BUILD_DIR)" >&2
      exit 1
    fi
    # A server left by an earlier run of this fixture is stopped first.
    if [ -f "$dir/pid" ]; then "$0" stop "$dir" >/dev/null 2>&1 || true; fi
    mkdir -p "$dir"
    rm -rf "$dir/root" "$dir/addr" "$dir/log"
    printf '# written by store_fixture.sh\ntest-token\n' > "$dir/tokens"
    "$bin" --listen 127.0.0.1:0 --root "$dir/root" --ready-file "$dir/addr" \
      --token-file "$dir/tokens" "$@" < /dev/null > /dev/null 2> "$dir/log" &
    pid=$!
    echo "$pid" > "$dir/pid"
    for _ in $(seq 1 200); do
      if [ -s "$dir/addr" ]; then
        echo "store_fixture: nimble-store pid $pid on $(cat "$dir/addr")"
        exit 0
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "store_fixture: nimble-store exited before it was ready:" >&2
        cat "$dir/log" >&2
        rm -f "$dir/pid"
        exit 1
      fi
      sleep 0.1
    done
    echo "store_fixture: nimble-store did not become ready in 20 s" >&2
    kill -KILL "$pid" 2>/dev/null
    rm -f "$dir/pid"
    exit 1
    ;;
  stop)
    [ -f "$dir/pid" ] || { echo "store_fixture: no pid file in $dir" >&2; exit 0; }
    pid=$(cat "$dir/pid")
    rm -f "$dir/pid"
    case "$pid" in ''|*[!0-9]*) echo "store_fixture: bad pid '$pid'" >&2; exit 1 ;; esac
    kill -TERM "$pid" 2>/dev/null || exit 0
    for _ in $(seq 1 400); do
      # Gone, or a zombie waiting for a parent that is not this shell.
      state=$(sed -n 's/^[0-9]* ([^)]*) \([A-Z]\).*/\1/p' "/proc/$pid/stat" 2>/dev/null)
      if ! kill -0 "$pid" 2>/dev/null || [ "$state" = Z ]; then
        # The server is our child only when started in this shell; otherwise
        # its exit status is not ours to read, and it is gone.
        wait "$pid" 2>/dev/null
        exit 0
      fi
      sleep 0.05
    done
    echo "store_fixture: nimble-store $pid ignored SIGTERM for 20 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null
    exit 1
    ;;
  *) usage ;;
esac
