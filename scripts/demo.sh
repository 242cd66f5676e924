#!/usr/bin/env bash
# The demo: fetch the embedding model and WordNet (cached, never committed), build, run.
# WordNet's ~117,000 glosses go into a key-value database (load, gets, scans, reopen), then
# all of them are embedded with all-MiniLM-L6-v2 (ONNX Runtime; candle where it is missing)
# and searched by meaning, exactly and through HNSW. The semantic database is kept in
# target/demo-db/semantic: a second run reuses its vectors and starts the searches at once
# (`--fresh` embeds again; `--semantic-sample 4000` embeds a sample).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/toolchain.sh

SHALE_MODEL_DIR="$(bash scripts/fetch-model.sh)"
export SHALE_MODEL_DIR
wordnet="$(bash scripts/fetch-wordnet.sh)"
cargo build --release -p shale-demo
exec "${CARGO_TARGET_DIR:-target}/release/shale-demo" --wordnet "$wordnet" "$@"
