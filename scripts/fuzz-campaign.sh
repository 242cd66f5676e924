#!/usr/bin/env bash
# R9's long fuzzing campaign: run cargo-fuzz targets one after another, each until it has
# used CPU_SECONDS of CPU time (not wall time, so pausing the campaign with SIGSTOP during a
# benchmark does not shorten it), at the lowest CPU priority.
#
#   bash scripts/fuzz-campaign.sh [CPU_SECONDS] [TARGET...]
#
# Do not pause a target with SIGSTOP: libFuzzer's per-input timeout runs on wall time, so
# the input running across the pause is reported as a timeout. Stop the campaign instead
# (the corpus keeps what it found) and start it again for what is left.
#
# Defaults: 3600 s per target, every target of `cargo fuzz list`. Needs the nightly
# toolchain and cargo-fuzz (see fuzz/README.md). Logs and a summary line per target go to
# $FUZZ_LOG_DIR (default target/fuzz-campaign/); crashes land in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

cpu_budget=${1:-3600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
# nice alone does not yield to other sessions when the kernel groups tasks by session
# (autogroup): lower the whole group too.
echo 19 >/proc/self/autogroup 2>/dev/null || true
log_dir=${FUZZ_LOG_DIR:-$PWD/../target/fuzz-campaign}
mkdir -p "$log_dir"
nice -n 19 cargo +nightly fuzz build >/dev/null

ticks=$(getconf CLK_TCK)
cpu_seconds() { # utime + stime of one process, in whole seconds
    awk -v t="$ticks" '{ print int(($14 + $15) / t) }' "/proc/$1/stat" 2>/dev/null || echo 0
}

for target in "${targets[@]}"; do
    mkdir -p "corpus/$target" "artifacts/$target"
    log="$log_dir/$target.log"
    started=$(date -u +%FT%TZ)
    nice -n 19 "target/x86_64-unknown-linux-gnu/release/$target" "corpus/$target" \
        -artifact_prefix="artifacts/$target/" -timeout=60 -print_final_stats=1 \
        >"$log" 2>&1 &
    pid=$!
    used=0
    while kill -0 "$pid" 2>/dev/null && [ "$used" -lt "$cpu_budget" ]; do
        sleep 10
        now=$(cpu_seconds "$pid")
        if [ "$now" -gt 0 ]; then used=$now; fi
    done
    kill -INT "$pid" 2>/dev/null || true
    status=0
    wait "$pid" || status=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    crashes=$(find "artifacts/$target" -newermt "$started" -type f | wc -l)
    echo "$target started=$started cpu_s=$used runs=${runs:-?} exit=$status new_artifacts=$crashes" \
        | tee -a "$log_dir/summary.txt"
done
