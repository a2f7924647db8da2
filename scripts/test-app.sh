#!/usr/bin/env bash
# Tests the desktop app: the UI's own tests, then the real app driven over WebDriver.
#
#   scripts/test-app.sh              everything below
#   scripts/test-app.sh servers      only the e2e scenarios whose name contains "servers"
#
# 1. UI: TypeScript type check and the vitest unit tests (ui/src/*.test.ts, happy-dom).
# 2. App end to end (Linux): builds the app (`postern-app`, `postern-desk`) and `postern`, then
#    runs ui/e2e/app.e2e.mjs under Xvfb inside a private D-Bus session, with throwaway XDG_*
#    directories. Each scenario gives the app a fresh temporary POSTERN_HOME (configured with
#    the `postern` CLI) and drives its windows through WebKitWebDriver attached to the window
#    process (TAURI_WEBVIEW_AUTOMATION=true, no tauri-driver needed; see ui/e2e/webdriver.mjs).
#    macOS has no WebDriver for WKWebView, so there this step is skipped and says so.
#
# Installs what is missing first (through scripts/run-app.sh --build-only --with-test-deps).
# Exits non-zero if any step failed, after a summary. E2E_VERBOSE=1 shows driver and app logs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
filter="${1:-}"

say() { printf '\n[test-app] %s\n' "$*"; }

results=()
failed=0
step() { # name command...
    local name="$1" status=0
    shift
    say "$name"
    "$@" || status=$?
    if [ "$status" -eq 0 ]; then
        results+=("ok      $name")
    else
        results+=("FAILED  $name (exit $status)")
        failed=1
    fi
    return 0
}

summary() {
    say "summary"
    printf '  %s\n' "${results[@]}"
    if [ "$failed" -ne 0 ]; then
        echo "test-app.sh: FAILED"
        exit 1
    fi
    echo "test-app.sh: all passed"
}

os="$(uname -s)"
build_flags=(--build-only)
[ "$os" = Linux ] && build_flags+=(--with-test-deps)
if ! bash scripts/run-app.sh "${build_flags[@]}"; then
    results+=("FAILED  install and build (scripts/run-app.sh ${build_flags[*]})")
    failed=1
    summary
fi

step "UI type check (tsc)" npm --prefix ui run --silent typecheck
step "UI unit tests (vitest)" npm --prefix ui test --silent

if [ "$os" != Linux ]; then
    results+=("skipped app e2e: WebDriver for the app's webview exists on Linux only (WebKitWebDriver)")
    summary
fi

step "cargo build -p postern-cli" cargo build -p postern-cli --bin postern

# The private bus's daemons chat on stdout and stderr; none of it is about the app.
drop_session_noise() {
    sed -e '/^dbus-daemon\[/d' -e '/^SpiRegistry/d' -e '/^discover_other_daemon/d' \
        -e '/couldn.t access control socket/d'
}

# Inside the private bus: an unlocked secret-service keyring (the engine keeps its audit key in
# the OS keychain) and an X server, then the command.
desktop='
if command -v gnome-keyring-daemon >/dev/null 2>&1; then
    printf postern-test | gnome-keyring-daemon --unlock --components=secrets >/dev/null
fi
exec xvfb-run -a -s "-screen 0 1280x800x24" "$@"'

e2e() {
    local scratch status=0
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/postern-app-e2e.XXXXXX")"
    mkdir -p "$scratch/data" "$scratch/cache" "$scratch/config" "$scratch/runtime"
    chmod 700 "$scratch/runtime"
    local target="${CARGO_TARGET_DIR:-$root/target}"
    XDG_DATA_HOME="$scratch/data" XDG_CACHE_HOME="$scratch/cache" \
        XDG_CONFIG_HOME="$scratch/config" XDG_RUNTIME_DIR="$scratch/runtime" \
        POSTERN_APP="$target/debug/postern-app" POSTERN_CLI="$target/debug/postern" \
        dbus-run-session -- bash -c "$desktop" desktop \
        node ui/e2e/app.e2e.mjs "$filter" 2>&1 | drop_session_noise ||
        status=$?
    rm -rf "$scratch"
    return "$status"
}
step "app end to end (WebDriver under Xvfb)" e2e

summary
