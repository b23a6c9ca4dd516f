#!/usr/bin/env bash
# deploy/kafka.sh -- a local single-node Apache Kafka 4.x broker for tests
# and for trying parley by hand.  No Docker: the broker runs from the jars
# deploy/setup.sh fetched from Maven Central ($KAFKA_LIBS).
#
#   deploy/kafka.sh start    format fresh storage (random cluster id), start
#                            one KRaft node (broker + controller) on free
#                            127.0.0.1 ports, wait until it serves metadata,
#                            print its version and bootstrap address
#   deploy/kafka.sh stop     SIGTERM (SIGKILL after a timeout), delete data
#   deploy/kafka.sh status   print the address and exit 0 when running
#
# State lives in $PARLEY_RUN_DIR (see deploy/lib.sh): kafka.addr (bootstrap
# host:port), kafka.pid, kafka/ (config, data, broker.log).  Settings:
#   PARLEY_KAFKA_PORT           broker port (default: a free one)
#   PARLEY_KAFKA_START_TIMEOUT  seconds to wait for readiness (default 90)
#   PARLEY_KAFKA_STOP_TIMEOUT   seconds between SIGTERM and SIGKILL (20)
#   PARLEY_KAFKA_HEAP           JVM -Xmx (default 512m)
#   PARLEY_KAFKA_SECURE=1       also a SASL_SSL listener (SCRAM-SHA-512) with
#                               ACLs enforced (StandardAuthorizer): a CA and a
#                               broker certificate for 127.0.0.1 made with
#                               openssl (kafka/tls/ca.pem), SCRAM users from
#                               PARLEY_KAFKA_SCRAM_USERS ("name:password ...",
#                               default "parley:parley-secret"); its address
#                               goes to kafka.sasl_addr.  The PLAINTEXT
#                               listener stays, as the super user ANONYMOUS
#                               (the tests' admin door: topics and ACLs).
# A broker that fails to start (or is not ready in time) is killed, its log
# is printed to stderr and `start` exits 1.  Tuned for tests: replication
# factor 1 everywhere, no initial rebalance delay, no automatic topic
# creation (tests create their topics), small internal topics.
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
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
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
    cat >"$dir/log4j2.properties" <<'EOF'
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

# The JVM command line both the storage formatter and the broker run with.
# Sized for a test broker on a small machine: a small heap, the serial GC
# and C1-only JIT (faster start, less CPU taken from the tests).
java_cmd() {
    JAVA_CMD=(java -Xmx"${PARLEY_KAFKA_HEAP:-512m}" -Xms128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
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
    # A random Kafka Uuid in its text form (URL-safe base64, no padding);
    # like Kafka's own Uuid.randomUuid, never one starting with "-", which
    # the formatter's argument parser would read as an option.
    cid=$(python3 -c '
import base64, uuid
while True:
    cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    if not cid.startswith("-"):
        print(cid)
        break')
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

svc_main ${PARLEY_KAFKA_STOP_TIMEOUT:-20} "$@"
