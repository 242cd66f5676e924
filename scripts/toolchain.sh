#!/usr/bin/env bash
# Sourced by the scripts that run cargo (under `set -euo pipefail`: nothing here may fail).
# rust-toolchain.toml pins 1.95.0. On a machine whose `stable` toolchain is 1.95.0 but that
# has none by that name, rustup would try to download one; use stable instead
# (RUSTUP_TOOLCHAIN overrides the file; nothing is fetched), with its rustfmt and clippy.
pinned="$(sed -n 's/^channel *= *"\([^"]*\)".*$/\1/p' rust-toolchain.toml 2>/dev/null || true)"
if [[ -n "$pinned" ]] && command -v rustup >/dev/null 2>&1; then
    installed="$(rustup toolchain list 2>/dev/null || true)"
    if ! grep -qE "^${pinned//./\\.}(-|$| )" <<<"$installed"; then
        stable="$(cd / && rustup run stable rustc --version 2>/dev/null || true)"
        if [[ "$(awk '{print $2}' <<<"$stable")" == "$pinned" ]]; then
            echo "== using the installed stable toolchain, which is $pinned" >&2
            export RUSTUP_TOOLCHAIN=stable
            rustup component add --toolchain stable rustfmt clippy >/dev/null 2>&1 || true
        fi
    fi
fi
