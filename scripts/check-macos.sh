#!/usr/bin/env bash
# Type-checks and lints the whole workspace for macOS (aarch64-apple-darwin) from Linux:
# `cargo clippy --target aarch64-apple-darwin --all-targets -D warnings`. macOS is where most
# users approve from the menu bar; this catches code that only compiles on Linux (procfs,
# D-Bus, cfg'd modules) and warnings that only show there, without a Mac.
#
#   scripts/check-macos.sh
#
# It adds the target's standard library with rustup when missing. A check never links, so the
# C sources some crates build (bundled SQLite) are handed to a stand-in compiler that only
# creates its outputs: what is checked is Rust, all of it, against macOS's cfgs and std.
# On macOS itself it is a plain clippy run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target=aarch64-apple-darwin

if [ "$(uname -s)" != Darwin ]; then
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        rustup target add "$target"
    fi
    stub="$(mktemp -d "${TMPDIR:-/tmp}/postern-macos-check.XXXXXX")"
    trap 'rm -rf "$stub"' EXIT
    # The stand-in C compiler and archiver: empty outputs where the build script expects them.
    cat >"$stub/cc" <<'SH'
#!/bin/sh
out=""; prev=""
for arg in "$@"; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done
[ -z "$out" ] || : >"$out"
SH
    cat >"$stub/ar" <<'SH'
#!/bin/sh
for arg in "$@"; do case "$arg" in *.a) : >"$arg" ;; esac; done
SH
    chmod +x "$stub/cc" "$stub/ar"
    export CC_aarch64_apple_darwin="$stub/cc" AR_aarch64_apple_darwin="$stub/ar"
fi
status=0
cargo clippy --workspace --all-targets --locked --target "$target" -- -D warnings || status=$?
# A one-shot CI machine never reuses the check's output (about 250 MB); its disk is not fixed.
# (test.sh on CI points both clippy runs at a directory it removes after them.)
if [ "${CI:-}" = true ]; then
    rm -rf "${CARGO_TARGET_DIR:-$root/target}/$target"
fi
exit "$status"
