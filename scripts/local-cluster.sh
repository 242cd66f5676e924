#!/usr/bin/env bash
# A three-node Shale cluster on this machine (docs/replication.md, "A local cluster"):
#   scripts/local-cluster.sh start DIR [--tls]   start nodes 1-3, wait for a leader
#   scripts/local-cluster.sh status DIR          each node's view (shale cluster-status)
#   scripts/local-cluster.sh stop DIR            stop them (SIGTERM, then SIGKILL after 10 s)
# Node N listens on 127.0.0.1:$((SHALE_PORT_BASE + N - 1)) (SHALE_PORT_BASE defaults to
# 7001) and keeps its data in DIR/node-N, its log in DIR/node-N.log, its process id in
# DIR/node-N.pid. Node 1 bootstraps the cluster the first time; a later start reopens the
# same data. With --tls, DIR/certs is made by scripts/make-certs.sh and every connection
# uses TLS (clients then need `--tls-ca DIR/certs/ca.pem`). The binaries are
# target/release/shale-server and target/release/shale, built if missing, or those named
# by SHALE_SERVER and SHALE_CLI. Tokens (SHALE_TOKEN, SHALE_READ_ONLY_TOKEN,
# SHALE_PEER_TOKEN) pass through the environment to the nodes.
set -euo pipefail
usage="usage: scripts/local-cluster.sh start|status|stop DIR [--tls]"
cmd="${1:?$usage}"
dir="${2:?$usage}"
tls="${3:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
base="${SHALE_PORT_BASE:-7001}"
server="${SHALE_SERVER:-$root/target/release/shale-server}"
cli="${SHALE_CLI:-$root/target/release/shale}"
addr() { echo "127.0.0.1:$((base + $1 - 1))"; }
addrs="$(addr 1),$(addr 2),$(addr 3)"

cli_args=(--server "$addrs")
if [ -f "$dir/certs/ca.pem" ]; then
    cli_args+=(--tls-ca "$dir/certs/ca.pem")
fi

running() { [ -f "$dir/node-$1.pid" ] && kill -0 "$(cat "$dir/node-$1.pid")" 2>/dev/null; }

build() {
    local need=()
    [ -x "$server" ] || need+=(-p shale-server --bin shale-server)
    [ -x "$cli" ] || need+=(-p shale-cli --bin shale)
    if [ ${#need[@]} -gt 0 ]; then
        echo "local-cluster: building ${need[*]}" >&2
        (cd "$root" && cargo build --release "${need[@]}")
    fi
}

start() {
    build
    mkdir -p "$dir"
    local flags=()
    if [ "$tls" = "--tls" ]; then
        [ -f "$dir/certs/ca.pem" ] || bash "$root/scripts/make-certs.sh" "$dir/certs" 3
        cli_args=(--server "$addrs" --tls-ca "$dir/certs/ca.pem")
    elif [ -n "$tls" ]; then
        echo "$usage" >&2
        exit 2
    fi
    for id in 1 2 3; do
        if running "$id"; then
            echo "local-cluster: node $id runs already (pid $(cat "$dir/node-$id.pid"))" >&2
            continue
        fi
        flags=(--id "$id" --listen "$(addr "$id")" --data-dir "$dir/node-$id")
        for peer in 1 2 3; do
            [ "$peer" = "$id" ] || flags+=(--peer "$peer=$(addr "$peer")")
        done
        [ "$id" = 1 ] && flags+=(--bootstrap)
        if [ -f "$dir/certs/ca.pem" ]; then
            flags+=(--tls-cert "$dir/certs/node-$id.pem" --tls-key "$dir/certs/node-$id.key"
                --tls-ca "$dir/certs/ca.pem")
        fi
        nohup "$server" "${flags[@]}" >>"$dir/node-$id.log" 2>&1 &
        echo $! >"$dir/node-$id.pid"
    done
    # A leader within 30 s: every node names the same one.
    for _ in $(seq 1 300); do
        if status=$("$cli" "${cli_args[@]}" cluster-status 2>/dev/null) &&
            ! echo "$status" | grep -q 'leader=none' &&
            [ "$(echo "$status" | grep -o 'leader=[0-9]*' | sort -u | wc -l)" = 1 ]; then
            echo "$status"
            echo "local-cluster: serving at $addrs (logs in $dir/node-*.log)"
            return 0
        fi
        sleep 0.1
    done
    echo "local-cluster: no leader within 30 s; see $dir/node-*.log" >&2
    exit 1
}

stop() {
    for id in 1 2 3; do
        if running "$id"; then
            kill -TERM "$(cat "$dir/node-$id.pid")"
        fi
    done
    for _ in $(seq 1 100); do
        if ! running 1 && ! running 2 && ! running 3; then
            rm -f "$dir"/node-*.pid
            echo "local-cluster: stopped"
            return 0
        fi
        sleep 0.1
    done
    for id in 1 2 3; do
        if running "$id"; then
            echo "local-cluster: node $id did not stop in 10 s; killing it" >&2
            kill -KILL "$(cat "$dir/node-$id.pid")"
        fi
    done
    rm -f "$dir"/node-*.pid
}

case "$cmd" in
start) start ;;
status) "$cli" "${cli_args[@]}" cluster-status ;;
stop) stop ;;
*)
    echo "$usage" >&2
    exit 2
    ;;
esac
