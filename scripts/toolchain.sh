#!/usr/bin/env bash
# Sourced by the scripts that run cargo. rust-toolchain.toml pins 1.95.0. On a machine whose
# `stable` toolchain is 1.95.0 but that has none by that name, rustup would try to download
# one; use stable instead (RUSTUP_TOOLCHAIN overrides the file; nothing is fetched).
pinned="$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)"
if command -v rustup >/dev/null 2>&1 && ! rustup toolchain list | grep -q "^$pinned"; then
    stable="$(cd / && rustup run stable rustc --version 2>/dev/null | awk '{print $2}')"
    if [[ "$stable" == "$pinned" ]]; then
        echo "== using the installed stable toolchain, which is $pinned" >&2
        export RUSTUP_TOOLCHAIN=stable
    fi
fi
