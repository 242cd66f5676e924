#!/usr/bin/env bash
# Every test of the project: formatting, lints, and the whole test suite.
# This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/toolchain.sh
# Each stage's heading says how far into the run it starts, for CI's time budget.
stage() { echo "== [${SECONDS} s] $*"; }

stage "scripts/fetch-model.sh (the embedding model shale-embed's tests run, candle and ONNX; cached)"
SHALE_MODEL_DIR="$(bash scripts/fetch-model.sh)"
export SHALE_MODEL_DIR
stage "scripts/fetch-wordnet.sh (WordNet, for shale-embed's quality guard and the text bench; cached)"
wordnet_dir="$(bash scripts/fetch-wordnet.sh)"
stage "scripts/fetch-bench-data.sh --vectors-only (GloVe, for the HNSW recall test; cached)"
bash scripts/fetch-bench-data.sh --vectors-only >/dev/null
stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy"
cargo clippy --workspace --all-targets --features shale/fuzzing,shale-search/fuzzing,shale-server/fuzzing -- -D warnings
stage "cargo doc (broken or private intra-doc links fail)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
stage "the engine's module graph (no import cycle, no upward import)"
python3 scripts/check-modules.py --self-test
python3 scripts/check-modules.py
stage "cargo test (with the fuzz entry points, for the fuzz_smoke tests)"
cargo test --workspace --features shale/fuzzing,shale-search/fuzzing,shale-server/fuzzing
stage "fuzzing: every fuzz target for 60 s, the server's for 20 s (stable; random mutations of the seeds, see fuzz_smoke.rs)"
fuzz_log="$(mktemp)"
bench_tmp=""
# Temporary files go whether the script passes or fails.
trap 'rm -rf "$fuzz_log" ${bench_tmp:+"$bench_tmp"}' EXIT
# The integration test binaries the test stage just built, run directly on their fuzz_smoke
# module: `cargo test -p <crate>` would resolve a narrower feature set and rebuild the crates
# under it.
fuzz_features=shale/fuzzing,shale-search/fuzzing,shale-server/fuzzing
declare -A fuzz_bin
while read -r crate bin; do
    fuzz_bin[$crate]="$bin"
done < <(cargo test --workspace --features "$fuzz_features" --test engine --test search --test server \
    --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["src_path"].split("/crates/")[1].split("/")[0], m["executable"])
')
# The server's three decoders are small and fast: 20 s each covers millions of inputs.
for crate_seconds in shale:60 shale-search:60 shale-server:20; do
    crate="${crate_seconds%%:*}"
    bin="${fuzz_bin[$crate]:?no integration test binary built for $crate}"
    if ! SHALE_FUZZ_SECONDS="${crate_seconds##*:}" "$bin" fuzz_smoke:: --test-threads=2 --nocapture \
        >"$fuzz_log" 2>&1; then
        cat "$fuzz_log"
        exit 1
    fi
    grep -E "seeds,|test result" "$fuzz_log"
done
stage "scripts/chaos.sh (the replicated server under faults; porcupine, with a negative control)"
SHALE_CHAOS_SECONDS="${SHALE_CHAOS_SECONDS:-30}" bash scripts/chaos.sh
stage "scripts/local-cluster.sh (three nodes over TLS: start, write, restart, read, stop)"
cluster_dir="$(mktemp -d)"
export SHALE_SERVER="$PWD/target/debug/shale-server" SHALE_CLI="$PWD/target/debug/shale" SHALE_PORT_BASE=17301
bash scripts/local-cluster.sh start "$cluster_dir" --tls
cluster=(--server 127.0.0.1:17301,127.0.0.1:17302,127.0.0.1:17303 --tls-ca "$cluster_dir/certs/ca.pem")
"$SHALE_CLI" "${cluster[@]}" put local-cluster works
bash scripts/local-cluster.sh stop "$cluster_dir"
bash scripts/local-cluster.sh start "$cluster_dir"
test "$("$SHALE_CLI" "${cluster[@]}" get local-cluster)" = works
bash scripts/local-cluster.sh stop "$cluster_dir"
rm -rf "$cluster_dir"
unset SHALE_SERVER SHALE_CLI SHALE_PORT_BASE
stage "scripts/test-python.sh (the Python package, crates/shale-py; shale.connect against the server the cargo tests built)"
SHALE_SERVER="$PWD/target/debug/shale-server" SHALE_WORDNET_DIR="$wordnet_dir" bash scripts/test-python.sh
stage "shale-bench --quick (smoke run, no speed thresholds)"
bench_tmp="$(mktemp -d "${PWD}/target/bench-quick.XXXXXX" 2>/dev/null || mktemp -d)"
cargo run --release -p shale-bench -- --quick --engines shale --out "$bench_tmp" --db-dir "$bench_tmp/db"
stage "shale-bench text --quick (keyword search smoke run: 5,000 glosses, pruned = exhaustive)"
cargo run --release -p shale-bench -- text --quick --engines shale --wordnet "$wordnet_dir" \
    --dir "$bench_tmp" --out "$bench_tmp/text"
