#!/usr/bin/env bash
# The Python package's tests: builds crates/shale-py into a virtual environment under
# target/ and runs its pytest suite. Called by scripts/test.sh after the cargo tests;
# works alone too. Needs only python3 (with venv) and the Rust toolchain; maturin, pytest,
# numpy, LangChain's and LlamaIndex's packages come from PyPI at the pinned versions below.
#
#   SHALE_PY_PROFILE  cargo profile of the extension. Default: dev. Its dependencies are
#                     built exactly as `cargo test --workspace` builds them (opt-level 2,
#                     same features: see crates/shale-py/Cargo.toml), so after the cargo
#                     tests only pyo3, shale, shale-embed and this crate compile, not
#                     candle. (`test` cannot be used: for a library it means the test
#                     harness.) `release` for speed runs.
#   SHALE_MODEL_DIR   the MiniLM model for the semantic search test (scripts/test.sh
#                     sets it; without it that test is skipped and says why)
#   SHALE_SERVER      a shale-server binary for the cluster tests (tests/test_cluster.py
#                     starts three nodes on loopback; without it they are skipped, and
#                     with CI=true they fail)
#   PYTEST_ARGS       extra pytest arguments, e.g. "-k batch"
#   CARGO_TARGET_DIR  where cargo builds (default: target/); the venv is made in it too
set -euo pipefail
cd "$(dirname "$0")/.."

maturin_version="1.16.0"
pytest_version="9.2.0"
# The index API takes and returns numpy arrays (crates/shale-py/src/vectors.rs).
numpy_version="2.4.6"
# shale.langchain's tests run LangChain's standard vector store suite (langchain-tests, which
# brings pytest-asyncio); langchain-core at the version that suite was run with here.
langchain_core_version="1.8.3"
langchain_tests_version="1.1.9"
# shale.llama_index's tests.
llama_index_core_version="0.14.25"
profile="${SHALE_PY_PROFILE:-dev}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$target/py-venv"

start=$(date +%s)
# A venv with a working pip (one left half-made by a failed run is made again).
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "== python3 -m venv $venv"
    rm -rf "$venv"
    if ! python3 -m venv "$venv"; then
        rm -rf "$venv"
        echo "test-python: python3 -m venv failed; on Debian install the python3-venv package" >&2
        exit 1
    fi
fi
# Reinstall only when the pins change.
pins=("maturin==$maturin_version" "pytest==$pytest_version" "numpy==$numpy_version"
    "langchain-core==$langchain_core_version" "langchain-tests==$langchain_tests_version"
    "llama-index-core==$llama_index_core_version")
stamp="$venv/.pins-$(echo "${pins[*]}" | tr ' =' '-_')"
if [[ ! -f "$stamp" ]]; then
    echo "== pip install ${pins[*]}"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
    touch "$stamp"
fi

echo "== maturin build --profile $profile (crates/shale-py), then pip install the wheel"
# The workspace's target/ so that dependencies already built by cargo are reused. The tests
# run against the installed wheel, as a user gets it, not against the source tree.
wheels="$target/wheels-test"
rm -rf "$wheels"
CARGO_TARGET_DIR="$target" "$venv/bin/maturin" build --quiet --profile "$profile" \
    --manifest-path crates/shale-py/Cargo.toml --out "$wheels"
wheel=$(ls "$wheels"/shale_db-*.whl)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --force-reinstall "$wheel"
built=$(date +%s)
echo "== built and installed $(basename "$wheel") in $((built - start)) s"

echo "== pytest crates/shale-py/tests"
# shellcheck disable=SC2086
"$venv/bin/python" -m pytest -q crates/shale-py/tests ${PYTEST_ARGS:-}
echo "== Python tests took $(($(date +%s) - built)) s"
