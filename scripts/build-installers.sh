#!/usr/bin/env bash
# Builds the desktop app's installers through the Tauri CLI, with both of the app's programs:
# the window process (`postern-app`, the crate Tauri bundles) and the resident process
# (`postern-desk`, shipped beside it as an external binary, which Tauri names
# `postern-desk-<target triple>` on the way in and installs as `postern-desk`).
#
#   scripts/build-installers.sh                  every installer the platform has
#   scripts/build-installers.sh --bundles deb    only these (passed on to `tauri build`)
#
# The external binary is named only here, in the configuration merged for this build: a plain
# `cargo build` of the app needs no prebuilt resident.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
triple="$(rustc -vV | sed -n 's/^host: //p')"

echo "[build-installers] cargo build --release -p postern-desk"
cargo build --release -p postern-desk --bin postern-desk
mkdir -p "$target_dir/sidecar"
cp "$target_dir/release/postern-desk" "$target_dir/sidecar/postern-desk-$triple"

# An absolute path: the Tauri CLI would read a relative one from src-tauri/ (docs/app.md).
sidecar="$(cd "$target_dir/sidecar" && pwd)/postern-desk"
config="{\"bundle\":{\"externalBin\":[\"$sidecar\"]}}"
echo "[build-installers] tauri build --config $config $*"
npm --prefix ui run tauri -- build --config "$config" "$@"
