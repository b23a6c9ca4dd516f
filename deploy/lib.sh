# deploy/lib.sh -- shell helpers shared by deploy/kafka.sh and deploy/redis.sh
# (sourced, not run).
#
# The run directory holds a local service's state: pid file, address file,
# data and log.  It is $PARLEY_RUN_DIR when set; otherwise the first `start`
# makes one with mktemp and remembers it in a pointer file, so that a later
# `stop` or `status` typed by hand finds the same directory.

PARLEY_RUN_POINTER=${TMPDIR:-/tmp}/parley-run-dir.$(id -u)

svc_log() { printf '[%s] %s\n' "$SVC" "$*"; }
svc_err() { printf '[%s] ERROR: %s\n' "$SVC" "$*" >&2; }

# svc_run_dir CREATE: prints the run directory; with CREATE=1 makes one when
# none is configured or remembered.  Returns 1 when there is none.
svc_run_dir() {
    local create=$1 d
    if [ -n "${PARLEY_RUN_DIR:-}" ]; then
        mkdir -p "$PARLEY_RUN_DIR"
        (cd "$PARLEY_RUN_DIR" && pwd)
        return 0
    fi
    if [ -f "$PARLEY_RUN_POINTER" ]; then
        d=$(cat "$PARLEY_RUN_POINTER")
        if [ -d "$d" ]; then echo "$d"; return 0; fi
    fi
    [ "$create" = 1 ] || return 1
    d=$(mktemp -d "${TMPDIR:-/tmp}/parley-run.XXXXXX")
    echo "$d" >"$PARLEY_RUN_POINTER"
    echo "$d"
}

# svc_free_ports N: prints N distinct TCP ports free on 127.0.0.1 right now
# (the kernel picks them; all sockets are held open until all are chosen).
svc_free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# svc_pid_alive PIDFILE PATTERN: true when the pid file names a live process
# whose command line contains PATTERN (guards against a recycled pid).
svc_pid_alive() {
    local pidfile=$1 pattern=$2 pid
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern"
}

# svc_kill PIDFILE PATTERN TIMEOUT: SIGTERM, wait up to TIMEOUT seconds,
# then SIGKILL.  Removes the pid file.
svc_kill() {
    local pidfile=$1 pattern=$2 timeout=$3 pid i
    if svc_pid_alive "$pidfile" "$pattern"; then
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < timeout * 10; i++)); do
            [ -d "/proc/$pid" ] || break
            # A zombie child of ours counts as gone.
            grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && break
            sleep 0.1
        done
        if [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
            svc_log "pid $pid ignored SIGTERM for ${timeout}s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$pidfile"
}

# svc_main STOP_TIMEOUT start|stop|status: the command dispatch both service
# scripts share.  The caller sets SVC (the service name: its state is
# $RUN/$SVC.pid, $RUN/$SVC.addr and the directory $RUN/$SVC) and PATTERN,
# and defines cmd_start, which reads RUN and SDIR.  stop and status are
# generic: stop is SIGTERM then SIGKILL after STOP_TIMEOUT seconds and
# deletes the service's state; status prints the address and returns 0 when
# the service runs.
svc_main() {
    local stop_timeout=$1
    shift
    case ${1:-} in
        start)
            RUN=$(svc_run_dir 1)
            SDIR=$RUN/$SVC
            cmd_start ;;
        stop|status)
            if ! RUN=$(svc_run_dir 0); then
                svc_log "not running (no run dir)"
                [ "$1" = stop ] && return 0
                return 1
            fi
            SDIR=$RUN/$SVC
            if [ "$1" = stop ]; then
                svc_kill "$RUN/$SVC.pid" "$PATTERN" "$stop_timeout"
                rm -rf "$SDIR" "$RUN/$SVC.addr"
                svc_log "stopped (run dir $RUN)"
            elif svc_pid_alive "$RUN/$SVC.pid" "$PATTERN" && [ -f "$RUN/$SVC.addr" ]; then
                svc_log "running at $(cat "$RUN/$SVC.addr") (pid $(cat "$RUN/$SVC.pid"))"
            else
                svc_log "not running"
                return 1
            fi ;;
        *)
            echo "usage: $0 start|stop|status" >&2
            return 2 ;;
    esac
}
