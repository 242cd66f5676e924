#!/usr/bin/env bash
# Fetches WordNet 3.0 (the Debian package wordnet-base) into a cache outside the repository
# and prints the directory holding its data files (data.noun, data.verb, data.adj, data.adv).
#
#   SHALE_CACHE   the cache root (default $HOME/.cache/shale); the files go to wordnet/ in it
#
# Idempotent: when the four data files are present it downloads nothing. The package is
# downloaded, not installed (`apt-get download`, unpacked with `dpkg-deb -x`). Progress goes
# to stderr; stdout is only the directory, so `dir=$(scripts/fetch-wordnet.sh)`.
set -euo pipefail

cache="${SHALE_CACHE:-${HOME:?set HOME or SHALE_CACHE}/.cache/shale}"
out="$cache/wordnet"
files=(data.noun data.verb data.adj data.adv)

have_all() {
    for f in "${files[@]}"; do
        [[ -s "$out/$f" ]] || return 1
    done
}

if have_all; then
    echo "$out"
    exit 0
fi

for tool in apt-get dpkg-deb; do
    if ! command -v "$tool" >/dev/null; then
        echo "fetch-wordnet: $tool is needed (a Debian-based machine)" >&2
        exit 1
    fi
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fetch-wordnet: downloading the Debian package wordnet-base" >&2
if ! (cd "$work" && apt-get download wordnet-base >&2 2>/dev/null); then
    # A fresh machine may have no package lists yet.
    if [[ "$(id -u)" == 0 ]]; then
        apt-get update >&2
    elif command -v sudo >/dev/null; then
        sudo apt-get update >&2
    fi
    (cd "$work" && apt-get download wordnet-base >&2)
fi
dpkg-deb -x "$work"/wordnet-base_*.deb "$work/x"
mkdir -p "$out"
for f in "${files[@]}"; do
    cp "$work/x/usr/share/wordnet/$f" "$out/$f"
done
cp "$work/x/usr/share/doc/wordnet-base/copyright" "$out/COPYRIGHT" 2>/dev/null || true
have_all
echo "fetch-wordnet: WordNet data in $out" >&2
echo "$out"
