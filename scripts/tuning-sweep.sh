#!/usr/bin/env bash
# The tuning sweep of docs/tuning.md: YCSB load, A, B and D on Shale alone, changing one
# setting at a time from the defaults (the LevelDB/YCSB tuning study's method). Each setting's
# results are labelled with its name, so `shale-bench report` shows them side by side.
#
#   scripts/tuning-sweep.sh [OUT]          OUT defaults to bench-results/YYYY-MM-DD-tuning (today, UTC)
#
# Environment: SHALE_BENCH (the binary; default target/release/shale-bench, built with
# `cargo build --release -p shale-bench`), RECORDS and OPS (YCSB records and operations per
# workload; default 1,000,000 each), VALUE (value bytes; default 100), REPEAT (runs per
# setting; default 1), DB_DIR (where databases go; default target/bench-db), ONLY (a
# space-separated list of labels to run; default all).
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${SHALE_BENCH:-target/release/shale-bench}"
out="${1:-bench-results/$(date -u +%Y-%m-%d)-tuning}"
mkdir -p "$out"
common=(
    --engines shale
    --workloads ycsb-load,ycsb-a,ycsb-b,ycsb-d
    --ycsb-records "${RECORDS:-1000000}"
    --ycsb-ops "${OPS:-1000000}"
    --value-size "${VALUE:-100}"
    --repeat "${REPEAT:-1}"
    --out "$out"
    --json-lines "$out/sweep.jsonl"
    --db-dir "${DB_DIR:-target/bench-db}"
)

# label, then the flags that differ from the defaults (64 MiB write buffer and file target,
# 4 KiB blocks, restart interval 16, 10 filter bits per key, 64 MiB cache, LZ4).
settings=(
    "shale"
    "wb-16m --write-buffer-mib 16"
    "wb-256m --write-buffer-mib 256"
    "file-8m --target-file-kib 8192"
    "file-256m --target-file-kib 262144"
    "block-1k --block-bytes 1024"
    "block-16k --block-bytes 16384"
    "restart-4 --restart-interval 4"
    "restart-64 --restart-interval 64"
    "bits-0 --filter-bits 0"
    "bits-5 --filter-bits 5"
    "bits-20 --filter-bits 20"
    "cache-8m --cache-mib 8"
    "cache-512m --cache-mib 512"
    "compress-none --compression none"
    "compress-zstd --compression zstd"
    "compress-snappy --compression snappy"
)

for setting in "${settings[@]}"; do
    read -r label flags <<<"$setting"
    if [[ -n "${ONLY:-}" && " $ONLY " != *" $label "* ]]; then
        continue
    fi
    echo "== $label ${flags:-(defaults)}" >&2
    # shellcheck disable=SC2086  # flags are words on purpose
    "$bin" "${common[@]}" --label "$label" $flags
done
echo "results: $out/sweep.jsonl" >&2
