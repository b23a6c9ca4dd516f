#!/usr/bin/env bash
# deploy/kafka.sh -- a local Apache Kafka 4.x for tests and for trying parley
# by hand: one KRaft node (the default), or a three-broker cluster.  No
# Docker: the JVMs run from the jars deploy/setup.sh fetched from Maven
# Central ($KAFKA_LIBS).
#
#   deploy/kafka.sh start    format fresh storage (random cluster id), start
#                            one KRaft node (broker + controller) on free
#                            127.0.0.1 ports, wait until it serves metadata,
#                            print its version and bootstrap address
#   deploy/kafka.sh start --nodes 3
#                            a cluster: three brokers (node ids 1, 2, 3) and
#                            a quorum of three separate KRaft controllers
#                            (node ids 101, 102, 103); waits until all three
#                            brokers serve metadata
#   deploy/kafka.sh stop     SIGTERM (SIGKILL after a timeout) every node,
#                            delete data
#   deploy/kafka.sh status   print the address and exit 0 when running (a
#                            cluster: one line per broker, exit 0 when all
#                            three run)
# Cluster only, N = a broker's node id (1..3), for fault tests:
#   deploy/kafka.sh kill N        SIGKILL broker N (its data stays)
#   deploy/kafka.sh stop N        SIGTERM broker N (controlled shutdown;
#                                 SIGKILL after the stop timeout)
#   deploy/kafka.sh start-node N  start broker N again on its same port and
#                                 data; waits until it serves metadata
#
# Cluster topology: 3 controllers + 3 brokers, not three combined
# broker+controller nodes.  A broker fault then never costs the metadata
# quorum: with two of three brokers down the controllers still shrink the
# partitions' ISRs, elect leaders and fence the dead brokers, so produces
# fail as on a real cluster (NOT_ENOUGH_REPLICAS under
# min.insync.replicas=2) instead of timing out behind a lost quorum, which
# is what two dead combined nodes of three would give.  It is also Kafka's
# advice for production (combined mode is for small development setups).
# The price is three more JVMs; they are small (PARLEY_KAFKA_CONTROLLER_HEAP).
#
# State lives in $PARLEY_RUN_DIR (see deploy/lib.sh): kafka.addr (bootstrap
# host:port; a cluster: the three brokers' host:port, comma-separated),
# kafka.pid, kafka/ (config, data, broker.log).  A cluster keeps
# kafka.nodes (3), kafka.bN.pid and kafka.cN.pid, and per node a directory
# kafka/bN (broker N) or kafka/cN (controller 100+N) with its
# server.properties, data/, addr and broker.log / controller.log.  Settings:
#   PARLEY_KAFKA_PORT           broker port (default: a free one; single node)
#   PARLEY_KAFKA_START_TIMEOUT  seconds to wait for readiness (default 90)
#   PARLEY_KAFKA_STOP_TIMEOUT   seconds between SIGTERM and SIGKILL (20)
#   PARLEY_KAFKA_HEAP           broker JVM -Xmx (default 512m)
#   PARLEY_KAFKA_CONTROLLER_HEAP  controller JVM -Xmx (cluster; default 256m)
#   PARLEY_KAFKA_SECURE=1       also a SASL_SSL listener (SCRAM-SHA-512) with
#                               ACLs enforced (StandardAuthorizer): a CA and a
#                               broker certificate for 127.0.0.1 made with
#                               openssl (kafka/tls/ca.pem), SCRAM users from
#                               PARLEY_KAFKA_SCRAM_USERS ("name:password ...",
#                               default "parley:parley-secret"); its address
#                               goes to kafka.sasl_addr.  The PLAINTEXT
#                               listener stays, as the super user ANONYMOUS
#                               (the tests' admin door: topics and ACLs).
#                               Single node only.
# A node that fails to start (or is not ready in time) is killed, its log
# is printed to stderr and `start` exits 1.  Tuned for tests: no initial
# rebalance delay, no automatic topic creation (tests create their topics),
# small internal topics.  Single node: replication factor 1 everywhere.  A
# cluster: replication factor 3 and min.insync.replicas 2 for every
# internal topic (__consumer_offsets, __transaction_state, the share
# coordinator's state) and as the default for new topics.
set -euo pipefail

SVC=kafka
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/lib.sh
. "$HERE/lib.sh"
PARLEY_DEPS=${PARLEY_DEPS:-$HOME/.cache/parley}
if [ -z "${KAFKA_LIBS:-}" ] && [ -f "$PARLEY_DEPS/env.sh" ]; then
    # shellcheck disable=SC1091
    . "$PARLEY_DEPS/env.sh"
fi
PATTERN=kafka.Kafka

# shared_props RF MINISR: the settings every broker gets (stdout):
# replication factor RF and min.insync.replicas MINISR for new topics and
# every internal topic, and the test tuning.
shared_props() {
    local rf=$1 misr=$2
    cat <<EOF
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$misr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$misr
transaction.state.log.num.partitions=8
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$misr
group.initial.rebalance.delay.ms=0
# KIP-848 (group.protocol=consumer) groups: heartbeat and session set broker
# side, as short as the classic-protocol tests set them client side
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
auto.create.topics.enable=false
num.network.threads=2
num.io.threads=4
log.retention.hours=1
EOF
}

write_config() {
    local dir=$1 port=$2 cport=$3 sport=${4:-}
    local listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
    local adv="PLAINTEXT://127.0.0.1:$port" map="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    if [ -n "$sport" ]; then
        listeners+=",SASL_SSL://127.0.0.1:$sport"
        adv+=",SASL_SSL://127.0.0.1:$sport"
        map+=",SASL_SSL:SASL_SSL"
    fi
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$adv
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$map
log.dirs=$dir/data
EOF
    shared_props 1 1 >>"$dir/server.properties"
    # every broker logs at INFO (without the file a 4.x broker logs errors
    # only, and `start` cannot print the version it reads from the log)
    write_log4j
    [ -n "$sport" ] || return 0
    cat >>"$dir/server.properties" <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$dir/tls/broker.p12
ssl.keystore.password=parley-test
ssl.key.password=parley-test
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=false
EOF
}

# java_cmd [HEAP]: the JVM command line both the storage formatter and the
# broker run with (HEAP: -Xmx, default $PARLEY_KAFKA_HEAP).
# Sized for a test broker on a small machine: a small heap, the serial GC
# and C1-only JIT (faster start, less CPU taken from the tests).
java_cmd() {
    JAVA_CMD=(java -Xmx"${1:-${PARLEY_KAFKA_HEAP:-512m}}" -Xms128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
              -Djava.awt.headless=true
              -Dlog4j2.configurationFile="$SDIR/log4j2.properties"
              -cp "$KAFKA_LIBS/*")
}

fail_start() {
    svc_err "$1"
    svc_kill "$RUN/kafka.pid" "$PATTERN" 5
    if [ -f "$SDIR/broker.log" ]; then
        echo "----- broker log ($SDIR/broker.log): errors, then the last 60 lines -----" >&2
        grep -E ' (ERROR|FATAL) |Exception:|error:' "$SDIR/broker.log" | head -n 20 >&2 || true
        echo "-----" >&2
        tail -n 60 "$SDIR/broker.log" >&2
        echo "----- end of broker log -----" >&2
    fi
    rm -rf "$SDIR/data" "$RUN/kafka.addr"
    exit 1
}

ready() {
    if command -v kcat >/dev/null; then
        kcat -b "$1" -L -m 3 2>/dev/null | grep -q '1 brokers:'
    else
        grep -q 'Kafka Server started' "$SDIR/broker.log"
    fi
}

# make_tls DIR: a throw-away CA (ca.pem, ca.key) and a broker certificate
# for 127.0.0.1 / localhost signed by it, as the PKCS12 keystore broker.p12.
make_tls() {
    local d=$1
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=parley test CA" \
        -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null &&
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$d/broker.key" -out "$d/broker.csr" 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext" &&
    openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -extfile "$d/san.ext" -out "$d/broker.pem" 2>/dev/null &&
    openssl pkcs12 -export -in "$d/broker.pem" -inkey "$d/broker.key" -certfile "$d/ca.pem" \
        -name broker -passout pass:parley-test -out "$d/broker.p12"
}

# new_cluster_id: a random Kafka Uuid in its text form (URL-safe base64, no
# padding); like Kafka's own Uuid.randomUuid, never one starting with "-",
# which the formatter's argument parser would read as an option.
new_cluster_id() {
    python3 -c '
import base64, uuid
while True:
    cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    if not cid.startswith("-"):
        print(cid)
        break'
}

cmd_start() {
    if svc_pid_alive "$RUN/kafka.pid" "$PATTERN"; then
        svc_log "already running at $(cat "$RUN/kafka.addr") (run dir $RUN)"
        return 0
    fi
    [ -n "${KAFKA_LIBS:-}" ] && [ -d "$KAFKA_LIBS" ] ||
        { svc_err "no Kafka jars: run deploy/setup.sh (or set KAFKA_LIBS)"; exit 1; }
    command -v java >/dev/null || { svc_err "no java on PATH: run deploy/setup.sh"; exit 1; }
    local port cport ports cid pid deadline addr
    ports=$(svc_free_ports 3) # broker, controller, SASL_SSL (PARLEY_KAFKA_SECURE=1)
    set -- $ports
    port=${PARLEY_KAFKA_PORT:-$1}
    cport=$2
    addr=127.0.0.1:$port
    rm -rf "$SDIR"
    mkdir -p "$SDIR/data"
    local sport= scram=()
    if [ "${PARLEY_KAFKA_SECURE:-0}" = 1 ]; then
        sport=$3
        make_tls "$SDIR/tls" || fail_start "cannot make the test certificates (openssl)"
        local u
        for u in ${PARLEY_KAFKA_SCRAM_USERS:-parley:parley-secret}; do
            scram+=(--add-scram "SCRAM-SHA-512=[name=${u%%:*},password=${u#*:}]")
        done
    fi
    write_config "$SDIR" "$port" "$cport" "$sport"
    cid=$(new_cluster_id)
    java_cmd
    if ! "${JAVA_CMD[@]}" kafka.tools.StorageTool format --cluster-id "$cid" \
        --config "$SDIR/server.properties" --ignore-formatted "${scram[@]}" >"$SDIR/broker.log" 2>&1; then
        fail_start "kafka-storage format failed"
    fi
    setsid nohup "${JAVA_CMD[@]}" kafka.Kafka "$SDIR/server.properties" \
        >>"$SDIR/broker.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$RUN/kafka.pid"
    deadline=$((SECONDS + ${PARLEY_KAFKA_START_TIMEOUT:-90}))
    until ready "$addr"; do
        [ -d "/proc/$pid" ] || fail_start "broker exited during start-up"
        [ $SECONDS -lt $deadline ] ||
            fail_start "broker not ready after ${PARLEY_KAFKA_START_TIMEOUT:-90}s"
        sleep 0.5
    done
    echo "$addr" >"$RUN/kafka.addr"
    [ -n "$sport" ] && echo "127.0.0.1:$sport" >"$RUN/kafka.sasl_addr"
    local ver commit
    ver=$(sed -n 's/.*Kafka version: \([^ ]*\).*/\1/p' "$SDIR/broker.log" | head -n1)
    commit=$(sed -n 's/.*Kafka commitId: \([^ ]*\).*/\1/p' "$SDIR/broker.log" | head -n1)
    svc_log "Apache Kafka ${ver:-?} (commit ${commit:-?}), KRaft broker+controller," \
        "cluster $cid, ready at $addr after ${SECONDS}s (pid $pid, run dir $RUN)"
}

# ------------------------------------------------------------ the cluster

# node_name KIND N: b1..b3 (brokers, node id N), c1..c3 (controllers, node
# id 100+N).  The pid file is $RUN/kafka.<name>.pid, the directory $SDIR/<name>.
node_pattern() { printf '%s' "$SDIR/$1/server.properties"; }

# write_node_config NAME ROLE ID PORT VOTERS
write_node_config() {
    local name=$1 role=$2 id=$3 port=$4 voters=$5 d=$SDIR/$1
    mkdir -p "$d/data"
    if [ "$role" = controller ]; then
        cat >"$d/server.properties" <<EOF
process.roles=controller
node.id=$id
controller.quorum.voters=$voters
listeners=CONTROLLER://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT
log.dirs=$d/data
EOF
    else
        cat >"$d/server.properties" <<EOF
process.roles=broker
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$d/data
EOF
    fi
    # Replication factor 3, min.insync.replicas 2, for every topic.  A
    # broker the controllers hear nothing from for 6 s (default 9 s) is
    # fenced and leaves every ISR: a hard-killed broker's partitions move
    # that much sooner.
    shared_props 3 2 >>"$d/server.properties"
    cat >>"$d/server.properties" <<EOF
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
EOF
    echo "127.0.0.1:$port" >"$d/addr"
}

write_log4j() {
    cat >"$SDIR/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
EOF
}

node_log() { case $1 in c*) echo "$SDIR/$1/controller.log" ;; *) echo "$SDIR/$1/broker.log" ;; esac; }

# launch_node NAME: start the node's JVM in the background (its own session,
# log appended), record its pid.
launch_node() {
    local name=$1 heap=${PARLEY_KAFKA_HEAP:-512m} pid
    [ "${name#c}" != "$name" ] && heap=${PARLEY_KAFKA_CONTROLLER_HEAP:-256m}
    java_cmd "$heap"
    setsid nohup "${JAVA_CMD[@]}" kafka.Kafka "$SDIR/$name/server.properties" \
        >>"$(node_log "$name")" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$RUN/kafka.$name.pid"
}

cluster_fail() {
    local n
    svc_err "$1"
    for n in "${@:2}"; do
        if [ -f "$(node_log "$n")" ]; then
            echo "----- $n log ($(node_log "$n")): errors, then the last 40 lines -----" >&2
            grep -E ' (ERROR|FATAL) |Exception:|error:' "$(node_log "$n")" | head -n 20 >&2 || true
            echo "-----" >&2
            tail -n 40 "$(node_log "$n")" >&2
            echo "----- end of $n log -----" >&2
        fi
    done
}

kill_all_nodes() {
    local f name
    for f in "$RUN"/kafka.[bc][0-9]*.pid; do
        [ -f "$f" ] || continue
        name=${f#"$RUN/kafka."}
        name=${name%.pid}
        svc_kill "$f" "$(node_pattern "$name")" "$1"
    done
}

# broker_ready NAME: the broker's own metadata lists it (registered,
# unfenced: it has caught up with the metadata log).
broker_ready() {
    local name=$1 addr
    addr=$(cat "$SDIR/$name/addr")
    if command -v kcat >/dev/null; then
        kcat -b "$addr" -L -m 3 2>/dev/null | grep -q "broker ${name#b} at "
    else
        grep -q 'Kafka Server started' "$(node_log "$name")"
    fi
}

wait_brokers() {
    local deadline=$((SECONDS + ${PARLEY_KAFKA_START_TIMEOUT:-90})) b pending pid
    while :; do
        pending=()
        for b in "$@"; do
            # the process, not its command line: until the forked shell has
            # exec'd the JVM its cmdline is kafka.sh's own, which
            # svc_pid_alive would take for an exit (what failed 2 of 6
            # loaded test_cluster_faults runs, the JVM then killed before
            # it wrote a line)
            pid=$(cat "$RUN/kafka.$b.pid" 2>/dev/null)
            [ -n "$pid" ] && [ -d "/proc/$pid" ] ||
                { cluster_fail "$b exited during start-up" "$b"; return 1; }
            broker_ready "$b" || pending+=("$b")
        done
        [ ${#pending[@]} -eq 0 ] && return 0
        [ $SECONDS -lt $deadline ] || {
            cluster_fail "${pending[*]} not ready after ${PARLEY_KAFKA_START_TIMEOUT:-90}s" \
                "${pending[@]}" c1 c2 c3
            return 1
        }
        sleep 0.5
    done
}

# fixed_ports N: N distinct ports free on 127.0.0.1 now, outside the
# kernel's ephemeral range (ip_local_port_range).  A broker restarted on its
# old port (start-node) must find it free: a port from the ephemeral range
# can meanwhile be taken as the local port of any outgoing connection (the
# clients reconnecting to the very broker that is down), and the broker then
# exits with "Address already in use".
fixed_ports() {
    python3 - "$1" <<'EOF'
import random, socket, sys
try:
    lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
except OSError:
    lo, hi = 32768, 60999
pool = [p for p in range(10000, 65535) if not lo <= p <= hi]
random.shuffle(pool)
got = []
for p in pool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
        got.append(p)
    except OSError:
        pass
    finally:
        s.close()
    if len(got) == int(sys.argv[1]):
        break
print(" ".join(map(str, got)))
EOF
}

cluster_start() {
    local nodes=$1
    [ "$nodes" = 3 ] || { svc_err "--nodes: 1 or 3 (got $nodes)"; exit 2; }
    [ "${PARLEY_KAFKA_SECURE:-0}" != 1 ] ||
        { svc_err "PARLEY_KAFKA_SECURE=1 is for a single node only"; exit 2; }
    if [ -f "$RUN/kafka.nodes" ] || svc_pid_alive "$RUN/kafka.pid" "$PATTERN"; then
        svc_log "already running at $(cat "$RUN/kafka.addr" 2>/dev/null) (run dir $RUN)"
        return 0
    fi
    [ -n "${KAFKA_LIBS:-}" ] && [ -d "$KAFKA_LIBS" ] ||
        { svc_err "no Kafka jars: run deploy/setup.sh (or set KAFKA_LIBS)"; exit 1; }
    command -v java >/dev/null || { svc_err "no java on PATH: run deploy/setup.sh"; exit 1; }
    local ports cid voters=() i n addrs=() pids=()
    # shellcheck disable=SC2207
    ports=($(fixed_ports 6)) # brokers 1..3, controllers 101..103
    for i in 1 2 3; do voters+=("$((100 + i))@127.0.0.1:${ports[i + 2]}"); done
    voters=$(IFS=,; echo "${voters[*]}")
    rm -rf "$SDIR"
    mkdir -p "$SDIR"
    write_log4j
    for i in 1 2 3; do
        write_node_config "c$i" controller $((100 + i)) "${ports[i + 2]}" "$voters"
        write_node_config "b$i" broker "$i" "${ports[i - 1]}" "$voters"
        addrs+=("127.0.0.1:${ports[i - 1]}")
    done
    echo 3 >"$RUN/kafka.nodes"
    cid=$(new_cluster_id)
    java_cmd 256m
    for n in c1 c2 c3 b1 b2 b3; do # in parallel: each is a JVM start
        "${JAVA_CMD[@]}" kafka.tools.StorageTool format --cluster-id "$cid" \
            --config "$SDIR/$n/server.properties" --ignore-formatted \
            >"$(node_log "$n")" 2>&1 &
        pids+=($!)
    done
    i=0
    for n in c1 c2 c3 b1 b2 b3; do
        wait "${pids[i]}" || { cluster_fail "kafka-storage format failed for $n" "$n";
                               rm -rf "$SDIR" "$RUN/kafka.nodes"; exit 1; }
        i=$((i + 1))
    done
    for n in c1 c2 c3 b1 b2 b3; do launch_node "$n"; done
    if ! wait_brokers b1 b2 b3; then
        kill_all_nodes 5
        rm -rf "$SDIR" "$RUN/kafka.nodes" "$RUN/kafka.addr"
        exit 1
    fi
    (IFS=,; echo "${addrs[*]}") >"$RUN/kafka.addr"
    local ver
    ver=$(sed -n 's/.*Kafka version: \([^ ]*\).*/\1/p' "$SDIR/b1/broker.log" | head -n1)
    svc_log "Apache Kafka ${ver:-?}, 3 brokers (node ids 1-3) + 3 KRaft controllers" \
        "(101-103), cluster $cid, ready at $(cat "$RUN/kafka.addr") after ${SECONDS}s (run dir $RUN)"
}

# node_cmd VERB N: kill / stop / start-node on broker N of a cluster.
node_cmd() {
    local verb=$1 n=$2 name pidf pid
    RUN=$(svc_run_dir 0) || { svc_err "not running (no run dir)"; exit 1; }
    SDIR=$RUN/$SVC
    [ -f "$RUN/kafka.nodes" ] || { svc_err "$verb N: no cluster here (start --nodes 3)"; exit 2; }
    [[ $n =~ ^[123]$ ]] || { svc_err "$verb N: N is a broker's node id, 1..3 (got '$n')"; exit 2; }
    name=b$n
    pidf=$RUN/kafka.$name.pid
    case $verb in
        kill)
            if svc_pid_alive "$pidf" "$(node_pattern "$name")"; then
                pid=$(cat "$pidf")
                kill -KILL "$pid"
                while [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
                    sleep 0.05
                done
                svc_log "broker $n killed (SIGKILL, pid $pid)"
            else
                svc_log "broker $n was not running"
            fi
            rm -f "$pidf" ;;
        stop)
            svc_kill "$pidf" "$(node_pattern "$name")" "${PARLEY_KAFKA_STOP_TIMEOUT:-20}"
            svc_log "broker $n stopped" ;;
        start-node)
            if svc_pid_alive "$pidf" "$(node_pattern "$name")"; then
                svc_log "broker $n already running"
                return 0
            fi
            # A restarted broker that exits during start-up fails the call
            # with its log's errors: never retried past.
            launch_node "$name"
            wait_brokers "$name" || { svc_kill "$pidf" "$(node_pattern "$name")" 5; exit 1; }
            svc_log "broker $n running again at $(cat "$SDIR/$name/addr") after ${SECONDS}s" \
                "(pid $(cat "$pidf"))" ;;
    esac
}

cluster_status() {
    local i rc=0 name
    for i in 1 2 3; do
        name=b$i
        if svc_pid_alive "$RUN/kafka.$name.pid" "$(node_pattern "$name")"; then
            svc_log "broker $i running at $(cat "$SDIR/$name/addr") (pid $(cat "$RUN/kafka.$name.pid"))"
        else
            svc_log "broker $i not running ($(cat "$SDIR/$name/addr" 2>/dev/null))"
            rc=1
        fi
    done
    for i in 1 2 3; do
        svc_pid_alive "$RUN/kafka.c$i.pid" "$(node_pattern "c$i")" ||
            { svc_log "controller $((100 + i)) not running"; rc=1; }
    done
    return $rc
}

case ${1:-} in
    start)
        nodes=1
        case ${2:-} in
            "") ;;
            --nodes) nodes=${3:-} ;;
            --nodes=*) nodes=${2#--nodes=} ;;
            *) echo "usage: $0 start [--nodes 1|3]" >&2; exit 2 ;;
        esac
        if [ "$nodes" != 1 ]; then
            RUN=$(svc_run_dir 1)
            SDIR=$RUN/$SVC
            cluster_start "$nodes"
            exit 0
        fi ;;
    kill|start-node)
        [ $# -eq 2 ] || { echo "usage: $0 $1 N" >&2; exit 2; }
        node_cmd "$1" "$2"
        exit 0 ;;
    stop|status)
        if [ $# -eq 2 ] && [ "$1" = stop ]; then
            node_cmd stop "$2"
            exit 0
        fi
        if RUN=$(svc_run_dir 0) && [ -f "$RUN/kafka.nodes" ]; then
            SDIR=$RUN/$SVC
            if [ "$1" = stop ]; then
                kill_all_nodes "${PARLEY_KAFKA_STOP_TIMEOUT:-20}"
                rm -rf "$SDIR" "$RUN/kafka.addr" "$RUN/kafka.nodes"
                svc_log "stopped (run dir $RUN)"
                exit 0
            fi
            cluster_status
            exit
        fi ;;
    "") ;;
    *)
        echo "usage: $0 start [--nodes 1|3] | stop [N] | status | kill N | start-node N" >&2
        exit 2 ;;
esac

svc_main ${PARLEY_KAFKA_STOP_TIMEOUT:-20} "$@"
