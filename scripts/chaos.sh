#!/usr/bin/env bash
# The chaos test of the replicated server (docs/replication.md, "Chaos test"): three
# shale-server processes under kills, a replica removed and added back, pauses, partitions
# (as root) and whole-cluster restarts, 8 clients recording every call; porcupine (chaos/,
# Go) must find the history linearizable, again with the key space split into two shards
# (two Raft groups on every node, clients routing by key), and must find the first negative control's
# (servers that read without the read index, --read-consistency serializable) not. The
# second negative control, a vote written without fsync, must be caught by both modules
# of the server's `vote_power_loss` test binary on MemFs (its `negative_control_*` tests).
# After every fault a leader must be elected within a bound; the third, election timeouts
# 100 times the default, must fail the run for want of one. Each control is a setting
# chosen when the servers or the log stores are built; one build serves every run.
# SHALE_CHAOS_SECONDS sets the length of each run (default 40).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/toolchain.sh

seconds="${SHALE_CHAOS_SECONDS:-40}"
# Network namespaces (and so partitions) need root and ip(8); elsewhere the servers share
# the loopback interface and the faults are kills and pauses only.
netns=()
if [ "$(id -u)" -eq 0 ] && ip netns add shale-chaos-probe 2>/dev/null; then
    ip netns del shale-chaos-probe
    netns=(--netns)
else
    echo "== chaos: no network namespaces here (not root, or no ip netns): no partitions"
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The checker is Go; shale-chaos signals the servers with kill(1) (procps).
if ! command -v go >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq golang-go >/dev/null
fi
if [ ! -x /usr/bin/kill ] && [ ! -x /bin/kill ]; then
    apt-get update -qq && apt-get install -y -qq procps >/dev/null
fi
echo "== chaos: the porcupine checker (Go module github.com/anishathalye/porcupine), and its model's tests"
(cd chaos && go build -o "$work/check" . && go test ./...)

# Every build here asks for the features of the test stage (scripts/test.sh) and names
# shale-py beside shale-server: shale-py's dependencies turn on the few features that the
# workspace's dev-dependencies turn on there, so after that stage cargo reuses every
# dependency it built and compiles shale-server alone (run by itself, this script builds
# them once).
packages=(-p shale-server -p shale-py)
features=shale/fuzzing,shale-search/fuzzing,shale-server/fuzzing
echo "== chaos: shale-server and shale-chaos"
cargo build "${packages[@]}" --features "$features" --bins
cp "$target/debug/shale-server" "$work/server"
cp "$target/debug/shale-chaos" "$work/chaos"

echo "== chaos: ${seconds} s of faults; the history must be linearizable"
"$work/chaos" --server-bin "$work/server" --dir "$work/run" --history "$work/history.jsonl" \
    --seconds "$seconds" "${netns[@]}"
"$work/check" "$work/history.jsonl"

echo "== chaos: the key space split at k2 (two Raft groups on every node), ${seconds} s of faults"
# Each pair of keys in a shard of its own: the clients route by key, the history must be
# linearizable, and each group's replicas must agree and hold only their shard's keys.
"$work/chaos" --server-bin "$work/server" --split k2 --dir "$work/sharded" \
    --history "$work/sharded.jsonl" --seconds "$seconds" --seed 7 "${netns[@]}"
"$work/check" "$work/sharded.jsonl"

echo "== chaos: negative control (reads without the read index) must be caught"
found=0
for attempt in 1 2 3; do
    "$work/chaos" --server-bin "$work/server" --server-arg=--read-consistency=serializable \
        --dir "$work/stale-$attempt" --history "$work/stale-$attempt.jsonl" \
        --seconds "$seconds" --seed "$attempt" "${netns[@]}"
    set +e
    "$work/check" "$work/stale-$attempt.jsonl"
    rc=$?
    set -e
    if [ "$rc" -eq 1 ]; then
        found=1
        break
    fi
    echo "negative control run $attempt: checker exit $rc, not Illegal; trying another seed"
done
if [ "$found" -ne 1 ]; then
    echo "FAIL: three runs with stale reads were not caught by the checker"
    exit 1
fi

echo "== negative control 2: a vote written without fsync must be caught on MemFs"
# Twice: by the log store alone, and by an in-process cluster whose checker sees a
# replica that lost its vote elect a second, lower leader. Each catch is a test that
# passes only if the check of its synced twin fails; the twins run beside them.
if ! cargo test "${packages[@]}" --features "$features" --test vote_power_loss \
    >"$work/vote.log" 2>&1; then
    cat "$work/vote.log"
    echo "FAIL: the vote's power-loss tests or their negative controls failed"
    exit 1
fi
for control in vote_durability::negative_control_an_unsynced_vote_is_lost \
    cluster_vote_power_loss::negative_control_an_unsynced_vote_elects_a_lower_leader; do
    if ! grep -q "^test $control \.\.\. ok$" "$work/vote.log"; then
        cat "$work/vote.log"
        echo "FAIL: the negative control $control did not run"
        exit 1
    fi
done
echo "caught: the unsynced vote was lost by the power loss, and a lower leader elected"
echo "== negative control 3 (election timeouts 100 times the default) must fail for want of a leader"
if "$work/chaos" --server-bin "$work/server" --server-arg=--election-timeout-min-ms=30000 \
    --server-arg=--election-timeout-max-ms=40000 --dir "$work/slow" \
    --history "$work/slow.jsonl" --seconds 15 "${netns[@]}" >"$work/slow.log" 2>&1; then
    cat "$work/slow.log"
    echo "FAIL: a cluster that does not elect again passed the chaos run"
    exit 1
fi
if ! grep -q "no leader within" "$work/slow.log"; then
    cat "$work/slow.log"
    echo "FAIL: the slow-election run failed for another reason"
    exit 1
fi
grep "no leader within" "$work/slow.log"
echo "caught: no leader after a fault healed"

echo "chaos: 5 passed, 0 failed (the history with a leader after every fault, the stale reads caught, no re-election caught, the unsynced vote caught twice)"
