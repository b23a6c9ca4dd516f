#!/usr/bin/env bash
# deploy/redis.sh -- a local Redis for parley's KV cache tier and its tests.
#
#   deploy/redis.sh start    start redis-server on a free 127.0.0.1 port:
#                            no persistence (save "", appendonly no),
#                            maxmemory + allkeys-lru as the cache tier wants;
#                            print its version and address
#   deploy/redis.sh stop     SIGTERM (SIGKILL after a timeout), delete state
#   deploy/redis.sh status   print the address and exit 0 when running
#
# State lives in $PARLEY_RUN_DIR (see deploy/lib.sh): redis.addr
# (host:port), redis.pid, redis/ (working dir, redis.log).  Settings:
#   PARLEY_REDIS_PORT        port (default: a free one)
#   PARLEY_REDIS_MAXMEMORY   maxmemory (default 256mb)
set -euo pipefail

SVC=redis
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/lib.sh
. "$HERE/lib.sh"
PATTERN=redis-server

fail_start() {
    svc_err "$1"
    svc_kill "$RUN/redis.pid" "$PATTERN" 5
    if [ -f "$SDIR/redis.log" ]; then
        echo "----- redis log ($SDIR/redis.log) -----" >&2
        tail -n 40 "$SDIR/redis.log" >&2
        echo "----- end of redis log -----" >&2
    fi
    rm -f "$RUN/redis.addr"
    exit 1
}

cmd_start() {
    if svc_pid_alive "$RUN/redis.pid" "$PATTERN"; then
        svc_log "already running at $(cat "$RUN/redis.addr") (run dir $RUN)"
        return 0
    fi
    command -v redis-server >/dev/null || { svc_err "no redis-server: run deploy/setup.sh"; exit 1; }
    local port deadline ver
    port=${PARLEY_REDIS_PORT:-$(svc_free_ports 1)}
    rm -rf "$SDIR"
    mkdir -p "$SDIR"
    # --daemonize writes the pid file itself once the server is up.
    if ! redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
        --save '' --appendonly no --maxmemory "${PARLEY_REDIS_MAXMEMORY:-256mb}" \
        --maxmemory-policy allkeys-lru --dir "$SDIR" --logfile "$SDIR/redis.log" \
        --pidfile "$RUN/redis.pid" --daemonize yes; then
        fail_start "redis-server refused to start"
    fi
    deadline=$((SECONDS + 20))
    until [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; do
        [ $SECONDS -lt $deadline ] || fail_start "redis not answering PING after 20s"
        sleep 0.1
    done
    # Wait for the pid file, written just after the server starts.
    until svc_pid_alive "$RUN/redis.pid" "$PATTERN"; do
        [ $SECONDS -lt $deadline ] || fail_start "no redis pid file"
        sleep 0.1
    done
    echo "127.0.0.1:$port" >"$RUN/redis.addr"
    ver=$(redis-cli -h 127.0.0.1 -p "$port" info server | tr -d '\r' |
          sed -n 's/^redis_version:\(.*\)/\1/p')
    svc_log "Redis ${ver:-?} ready at 127.0.0.1:$port (maxmemory" \
        "${PARLEY_REDIS_MAXMEMORY:-256mb}, allkeys-lru, no persistence; pid" \
        "$(cat "$RUN/redis.pid"), run dir $RUN)"
}

svc_main 10 "$@"
