#!/usr/bin/env bash
# Runs every check and test Postern has: the README's one "run all tests" command.
#
#   scripts/test.sh
#
# On a fresh Debian/Ubuntu machine (as root, or with passwordless sudo) or a Mac with Homebrew,
# it first installs what is missing: the Rust toolchain's rustfmt and clippy, Tauri's system
# packages and the test tools (apt-get), Node.js and Python's venv, the third-party MCP servers
# the end-to-end tests run against (scripts/setup-test-deps.sh), and the UI's npm packages.
# A warm run installs nothing and goes straight to the checks.
#
# Then, in order (each step runs even if an earlier check failed, so one run shows every
# problem; the exit status is non-zero if any failed):
#   cargo fmt --check, cargo clippy -D warnings (for this machine, and for macOS through
#   scripts/check-macos.sh, which adds that target's std with rustup), and inside a private
#   D-Bus session with an unlocked gnome-keyring and throwaway XDG_* directories (Linux):
#   cargo test --workspace, then scripts/test-app.sh (the UI's own tests and the app under
#   Xvfb), when that script exists.
#
# Environment: POSTERN_TEST_SKIP_INSTALL=1 skips every install step (offline re-runs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$SECONDS
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

say() { printf '\n==> %s\n' "$*"; }
die() {
    printf '\ntest.sh: error: %s\n' "$*" >&2
    exit 1
}

# Runs a command as root: directly when we are root, through passwordless sudo otherwise.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo "$@"
    else
        return 1
    fi
}

# ---------------------------------------------------------------------------------------------
# Inside the private D-Bus session (the script runs itself again under dbus-run-session).
# ---------------------------------------------------------------------------------------------
if [ "${1:-}" = "__in-session" ]; then
    log="$2"
    # An unlocked secret-service keyring on this session's bus, for the keychain tests.
    if command -v gnome-keyring-daemon >/dev/null 2>&1; then
        printf 'postern-test' | gnome-keyring-daemon --unlock --components=secrets >/dev/null ||
            echo "warning: could not start an unlocked gnome-keyring; keychain tests may fail" >&2
    fi
    say "cargo test --workspace --locked --no-fail-fast"
    set +e
    cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
    echo "${PIPESTATUS[0]}" >"$log.cargo-status"
    set -e
    if [ -f scripts/test-app.sh ]; then
        say "scripts/test-app.sh (UI tests and the app under Xvfb)"
        app_status=0
        bash scripts/test-app.sh || app_status=$?
        echo "$app_status" >"$log.app-status"
    fi
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# 1. Install what is missing.
# ---------------------------------------------------------------------------------------------
os="$(uname -s)"

# Debian packages: Tauri's build dependencies (see shared reference linux-build-and-test.md),
# plus what the tests run: a private D-Bus session with gnome-keyring, Xvfb and WebKitWebDriver,
# and a tray host with xdotool for the tray menu (ui/e2e/tray.mjs), and polkit (polkitd,
# pkttyagent, pkaction; gdbus) for the OS-authentication test (tests/tests/os_auth.rs).
apt_packages=(
    build-essential pkg-config curl wget file libssl-dev
    libwebkit2gtk-4.1-dev libxdo-dev libayatana-appindicator3-dev librsvg2-dev
    xvfb xauth webkit2gtk-driver gnome-keyring dbus dbus-x11 trayer xdotool imagemagick
    polkitd passwd libglib2.0-bin bubblewrap
)

install_system_packages() {
    if [ "$os" = "Darwin" ]; then
        xcode-select -p >/dev/null 2>&1 ||
            die "the Xcode command line tools are missing: run \`xcode-select --install\`, then this again"
        if ! command -v node >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
            command -v brew >/dev/null 2>&1 ||
                die "Node.js >= 20 and Python 3 are needed; install Homebrew (https://brew.sh) or both by hand"
            command -v node >/dev/null 2>&1 || brew install node
            command -v python3 >/dev/null 2>&1 || brew install python
        fi
        return
    fi
    command -v apt-get >/dev/null 2>&1 || {
        echo "not a Debian/Ubuntu system: make sure Tauri's prerequisites, Node.js >= 20 and python3-venv are installed"
        return
    }
    local wanted=("${apt_packages[@]}")
    command -v node >/dev/null 2>&1 || wanted+=(nodejs npm)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || wanted+=(python3 python3-venv)
    local missing=()
    for pkg in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "system packages: all present"
        return
    fi
    echo "system packages missing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
        die "cannot run apt-get (not root and no passwordless sudo); install: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}"
}

install_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        # shellcheck source=/dev/null
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        echo "installing the Rust toolchain with rustup"
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
            sh -s -- -y --profile minimal --component rustfmt,clippy
        # shellcheck source=/dev/null
        . "$HOME/.cargo/env"
    fi
    for component in rustfmt clippy; do
        local probe=fmt
        [ "$component" = clippy ] && probe=clippy
        if ! cargo "$probe" --version >/dev/null 2>&1; then
            command -v rustup >/dev/null 2>&1 ||
                die "cargo $probe is missing and rustup is not available to add $component"
            rustup component add "$component"
        fi
    done
    cargo --version
}

install_ui_packages() {
    [ -f ui/package.json ] || return 0
    local stamp=ui/node_modules/.postern-lock-hash want
    want="$(cat ui/package.json ui/package-lock.json 2>/dev/null | cksum)"
    if [ -d ui/node_modules ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        echo "ui/node_modules: up to date"
    else
        # Three tries, like scripts/setup-test-deps.sh: a dropped registry connection is not a failure.
        local attempt
        for attempt in 1 2 3; do
            (cd ui && npm ci --no-audit --no-fund --loglevel=error) && break
            [ "$attempt" -lt 3 ] || return 1
            echo "npm ci in ui failed (attempt $attempt of 3); trying again in $((attempt * 10)) s" >&2
            sleep $((attempt * 10))
        done
        printf '%s\n' "$want" >"$stamp"
    fi
    # The app embeds ui/dist; building it first means the workspace build embeds the real UI.
    npm --prefix ui run build --silent
}

if [ "${POSTERN_TEST_SKIP_INSTALL:-}" != 1 ]; then
    say "system packages"
    install_system_packages
    say "Rust toolchain"
    install_rust
    say "end-to-end test servers (scripts/setup-test-deps.sh)"
    bash scripts/setup-test-deps.sh
    say "UI packages and build"
    install_ui_packages
fi

# ---------------------------------------------------------------------------------------------
# 2. Checks and tests. Each records its result; a failure does not stop the next step.
# ---------------------------------------------------------------------------------------------
results=()
failed=0
record() { # name status
    if [ "$2" -eq 0 ]; then
        results+=("ok      $1")
    else
        results+=("FAILED  $1")
        failed=1
    fi
}
run_step() { # name command...
    local name="$1"
    shift
    say "$name"
    local status=0
    "$@" || status=$?
    record "$name" "$status"
}

fmt_color=auto
[ -t 1 ] || fmt_color=never
run_step "cargo fmt --check" cargo fmt --all -- --check --color "$fmt_color"
# On CI (a one-shot machine whose free disk is not fixed) both clippy runs write to a target
# dir of their own, removed after them: their check output (about 1 GB) is never read again,
# and the build and tests that follow then have that much more room.
clippy_env=()
if [ "${CI:-}" = true ]; then
    clippy_dir="${CARGO_TARGET_DIR:-$root/target}/ci-clippy"
    clippy_env=(env CARGO_TARGET_DIR="$clippy_dir")
fi
run_step "cargo clippy -D warnings" ${clippy_env[@]+"${clippy_env[@]}"} \
    cargo clippy --workspace --all-targets --locked -- -D warnings
run_step "cargo clippy for macOS (scripts/check-macos.sh)" \
    ${clippy_env[@]+"${clippy_env[@]}"} bash scripts/check-macos.sh
if [ -n "${clippy_dir:-}" ]; then
    rm -rf "$clippy_dir"
fi
# The end-to-end harness asks cargo for `postern` itself; building it here keeps that a no-op.
run_step "cargo build (postern)" cargo build --locked -p postern-cli --bin postern

if [ "$os" = "Linux" ]; then
    # The system bus, polkitd, Postern's polkit actions and the test user (as root).
    say "polkit for the OS-authentication test (scripts/setup-polkit-test.sh)"
    as_root bash scripts/setup-polkit-test.sh ||
        echo "warning: polkit could not be prepared; tests/os_auth.rs fails under CI and is skipped elsewhere" >&2
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/postern-test.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
log="$scratch/cargo-test.log"
test_status=0
if [ "$os" = "Linux" ]; then
    # Throwaway per-user state: webview data, gnome-keyring files and caches stay out of HOME.
    mkdir -p "$scratch/data" "$scratch/cache" "$scratch/config" "$scratch/runtime"
    chmod 700 "$scratch/runtime"
    command -v dbus-run-session >/dev/null 2>&1 ||
        die "dbus-run-session is missing (Debian package dbus); run without POSTERN_TEST_SKIP_INSTALL"
    XDG_DATA_HOME="$scratch/data" XDG_CACHE_HOME="$scratch/cache" \
        XDG_CONFIG_HOME="$scratch/config" XDG_RUNTIME_DIR="$scratch/runtime" \
        dbus-run-session -- bash "$0" __in-session "$log" || test_status=$?
else
    bash "$0" __in-session "$log" || test_status=$?
fi

# The session records each suite's exit status; a missing record means it never ran.
cargo_status="$(cat "$log.cargo-status" 2>/dev/null || echo 1)"
sum_of() { # passed|failed
    awk -v word="$1" '/^test result:/ { for (i = 2; i <= NF; i++) if ($(i) ~ ("^" word ";?$")) s += $(i-1) }
        END { print s + 0 }' "$log" 2>/dev/null || echo 0
}
passed="$(sum_of passed)"
failed_tests="$(sum_of failed)"
record "cargo test --workspace ($passed passed, $failed_tests failed)" "$cargo_status"
if [ -f scripts/test-app.sh ]; then
    record "scripts/test-app.sh" "$(cat "$log.app-status" 2>/dev/null || echo 1)"
else
    results+=("-       scripts/test-app.sh (not present)")
fi
[ "$test_status" -ne 0 ] && record "the test session (dbus-run-session)" "$test_status"

say "summary ($(((SECONDS - started) / 60))m$(((SECONDS - started) % 60))s; disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free)"
printf '  %s\n' "${results[@]}"
if [ "$failed" -ne 0 ]; then
    echo "test.sh: FAILED"
    echo "cargo: $passed passed, $failed_tests failed"
    exit 1
fi
echo "test.sh: all checks passed"
echo "cargo: $passed passed, $failed_tests failed"
