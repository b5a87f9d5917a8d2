#!/usr/bin/env bash
# Starts and stops a redis-server for tests, on loopback with a free port.
#
#   redis_fixture.sh start DIR [--appendonly yes|no] [--port P]
#       starts redis-server bound to 127.0.0.1 with --save '' and
#       --appendonly (default no), its data in DIR/data (kept between a stop
#       and a start, so a restart with AOF on finds its data), waits (at most
#       20 s) until it answers PING, then writes "127.0.0.1:PORT" to DIR/addr
#       and the server's pid to DIR/pid. Without --port a free port is picked
#       (a bind failure is retried on another port). Its log is DIR/log.
#   redis_fixture.sh stop DIR
#       sends SIGTERM to the pid in DIR/pid (redis flushes its AOF and exits),
#       waits (at most 20 s, then SIGKILL) and removes DIR/pid.
#
# Same contract as store_fixture.sh: DIR/addr, DIR/pid, stopped by pid.
set -u

usage() { echo "usage: $0 start DIR [--appendonly yes|no] [--port P] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2

alive() { # PID: running and not a zombie
  local state
  state=$(sed -n 's/^[0-9]* ([^)]*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
  kill -0 "$1" 2>/dev/null && [ "$state" != Z ]
}

case "$cmd" in
  start)
    aof=no
    port=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --appendonly) aof=${2:-}; shift 2 ;;
        --port) port=${2:-}; shift 2 ;;
        *) usage ;;
      esac
    done
    case "$aof" in yes|no) ;; *) echo "redis_fixture: --appendonly takes yes or no" >&2; exit 2 ;; esac
    command -v redis-server >/dev/null || { echo "redis_fixture: redis-server is not installed" >&2; exit 1; }
    if [ -f "$dir/pid" ]; then "$0" stop "$dir" >/dev/null 2>&1 || true; fi
    mkdir -p "$dir/data"
    rm -f "$dir/addr"
    tries=1
    [ -n "$port" ] || tries=20
    for _ in $(seq 1 "$tries"); do
      p=$port
      [ -n "$p" ] || p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
      redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly "$aof" \
        --dir "$dir/data" --daemonize no --protected-mode yes \
        < /dev/null > "$dir/log" 2>&1 &
      pid=$!
      for _ in $(seq 1 200); do
        if ! alive "$pid"; then break; fi
        if redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null | grep -q PONG; then
          echo "$pid" > "$dir/pid"
          echo "127.0.0.1:$p" > "$dir/addr.tmp" && mv "$dir/addr.tmp" "$dir/addr"
          echo "redis_fixture: redis-server pid $pid on 127.0.0.1:$p (appendonly $aof)"
          exit 0
        fi
        sleep 0.1
      done
      if alive "$pid"; then
        echo "redis_fixture: redis-server did not answer in 20 s" >&2
        kill -KILL "$pid" 2>/dev/null
        exit 1
      fi
      wait "$pid" 2>/dev/null
    done
    echo "redis_fixture: redis-server could not start:" >&2
    cat "$dir/log" >&2
    exit 1
    ;;
  stop)
    [ -f "$dir/pid" ] || { echo "redis_fixture: no pid file in $dir" >&2; exit 0; }
    pid=$(cat "$dir/pid")
    rm -f "$dir/pid"
    case "$pid" in ''|*[!0-9]*) echo "redis_fixture: bad pid '$pid'" >&2; exit 1 ;; esac
    kill -TERM "$pid" 2>/dev/null || exit 0
    for _ in $(seq 1 400); do
      if ! alive "$pid"; then wait "$pid" 2>/dev/null; exit 0; fi
      sleep 0.05
    done
    echo "redis_fixture: redis-server $pid ignored SIGTERM for 20 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null
    exit 1
    ;;
  *) usage ;;
esac
