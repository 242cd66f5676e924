#!/usr/bin/env bash
# The demo: fetch the embedding model and WordNet (cached, never committed), build, run.
# WordNet's ~117,000 glosses go into a key-value database (load, gets, scans, reopen), then a
# sample of them (default 4000; `scripts/demo.sh --semantic-sample 10000` for more) is
# embedded with all-MiniLM-L6-v2 and searched by meaning, exactly and through HNSW.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/toolchain.sh

SHALE_MODEL_DIR="$(bash scripts/fetch-model.sh)"
export SHALE_MODEL_DIR
wordnet="$(bash scripts/fetch-wordnet.sh)"
cargo build --release -p shale-demo
exec ./target/release/shale-demo --wordnet "$wordnet" "$@"
