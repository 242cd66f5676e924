#!/usr/bin/env bash
# Every test of the project: formatting, lints, and the whole test suite.
# This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
