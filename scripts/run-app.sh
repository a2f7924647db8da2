#!/usr/bin/env bash
# Builds and runs the Postern desktop app: the README's "build and run the app" command.
#
#   scripts/run-app.sh                        install what is missing, build, run
#   scripts/run-app.sh --build-only           the same without running (scripts/test-app.sh and
#                                             scripts/screenshot.sh use this)
#   scripts/run-app.sh --with-test-deps ...   also install Xvfb and WebKitWebDriver (Linux)
#   scripts/run-app.sh --release              an optimized build (slower to compile)
#   scripts/run-app.sh --demo                 run on a throwaway home and play `postern demo`
#                                             against it once its engine listens (an agent, an
#                                             approval for you to give, a rebuild); the home is
#                                             removed when the app quits
#   POSTERN_HOME=DIR scripts/run-app.sh       run on another Postern home
#
# On a fresh Debian/Ubuntu machine (as root, or with sudo) or a Mac, it first installs what is
# missing: Tauri's system packages (apt-get) or the Xcode command line tools (checked), Node.js
# >= 20.19, the Rust toolchain (rustup), and the UI's npm packages (npm ci). A warm run installs
# nothing: it rebuilds the UI (about a second), lets cargo rebuild what changed, and starts the app.
#
# Environment: POSTERN_TEST_SKIP_INSTALL=1 skips every install step (offline re-runs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

run=1
test_deps=0
demo=0
profile=debug
for arg in "$@"; do
    case "$arg" in
    --build-only) run=0 ;;
    --with-test-deps) test_deps=1 ;;
    --release) profile=release ;;
    --demo) demo=1 ;;
    -h | --help)
        sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "run-app.sh: unknown argument $arg (try --help)" >&2
        exit 2
        ;;
    esac
done

say() { printf '[run-app] %s\n' "$*"; }
die() {
    printf '[run-app] error: %s\n' "$*" >&2
    exit 1
}

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        return 1
    fi
}

os="$(uname -s)"

# Tauri's build dependencies on Debian/Ubuntu (Tauri v2 prerequisites, measured on bookworm),
# and bubblewrap, the sandbox confined servers run in.
apt_packages=(
    build-essential pkg-config curl wget file libssl-dev
    libwebkit2gtk-4.1-dev libxdo-dev libayatana-appindicator3-dev librsvg2-dev bubblewrap
)
# What the app's WebDriver tests and screenshots need: an X server, a bus with a keyring, the
# WebKit driver, and a tray host with a hand and a camera for the tray menu (ui/e2e/tray.mjs).
apt_test_packages=(xvfb xauth dbus dbus-x11 gnome-keyring webkit2gtk-driver trayer xdotool imagemagick)

install_system_packages() {
    if [ "$os" = Darwin ]; then
        xcode-select -p >/dev/null 2>&1 ||
            die "the Xcode command line tools are missing: run \`xcode-select --install\`, then this again"
        return
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        say "not a Debian/Ubuntu system: install Tauri's prerequisites yourself (https://v2.tauri.app/start/prerequisites/)"
        return
    fi
    local wanted=("${apt_packages[@]}") missing=()
    [ "$test_deps" = 1 ] && wanted+=("${apt_test_packages[@]}")
    for pkg in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return
    say "installing system packages: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
        die "cannot run apt-get as root; install these and run again: ${missing[*]}"
}

node_ok() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
        node -e 'const [a, b] = process.versions.node.split(".").map(Number);
                 process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
}

install_node() {
    node_ok && return
    say "Node.js >= 20.19 is needed (Vite 7); found: $(node --version 2>/dev/null || echo none)"
    if [ "$os" = Darwin ]; then
        command -v brew >/dev/null 2>&1 || die "install Node.js >= 20.19 (https://nodejs.org or Homebrew), then run this again"
        brew install node
    elif command -v apt-get >/dev/null 2>&1; then
        # Debian's own nodejs is too old on bookworm; NodeSource packages the current LTS.
        curl -fsSL https://deb.nodesource.com/setup_22.x -o /tmp/nodesource_setup.sh &&
            as_root bash /tmp/nodesource_setup.sh >/dev/null &&
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs ||
            die "cannot install Node.js; install Node.js >= 20.19 and run this again"
    else
        die "install Node.js >= 20.19, then run this again"
    fi
    node_ok || die "Node.js is still older than 20.19: $(node --version)"
}

install_rust() {
    command -v cargo >/dev/null 2>&1 || { [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"; } || true
    command -v cargo >/dev/null 2>&1 && return
    say "installing the Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    . "$HOME/.cargo/env"
}

# `npm ci` only when package.json or the lock file changed since the last install.
install_ui_packages() {
    local stamp=ui/node_modules/.postern-lock-hash want
    want="$(cat ui/package.json ui/package-lock.json | cksum)"
    if [ -d ui/node_modules ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return
    fi
    say "installing the UI's npm packages (npm ci)"
    (cd ui && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$stamp"
}

if [ "${POSTERN_TEST_SKIP_INSTALL:-}" != 1 ]; then
    install_system_packages
    install_node
    install_rust
    install_ui_packages
fi

say "building the UI (ui/dist)"
npm --prefix ui run build --silent >/dev/null
# The app is two programs: the resident process (engine, tray) and the window process it
# starts for its windows, found beside it.
cargo_flags=(-p postern-desk --bin postern-desk -p postern-app --bin postern-app)
[ "$profile" = release ] && cargo_flags+=(--release)
say "cargo build ${cargo_flags[*]}"
cargo build "${cargo_flags[@]}"

binary="${CARGO_TARGET_DIR:-$root/target}/$profile/postern-desk"
for built in "$binary" "$(dirname "$binary")/postern-app"; do
    [ -x "$built" ] || die "the build finished but $built is missing"
done
if [ "$run" = 0 ]; then
    say "built $binary and postern-app beside it"
    exit 0
fi
if [ "$demo" = 0 ]; then
    # The resident process in the foreground (its log here; Ctrl-C or the tray's Quit ends
    # the app), showing the status window at start.
    say "starting $binary --show (home: ${POSTERN_HOME:-the platform default})"
    exec "$binary" --show
fi

# The demo: the app on a throwaway home, then `postern demo` against its engine. The demo's
# agent waits for you to approve its calls in the app's approval window.
cli_flags=(-p postern-cli --bin postern)
[ "$profile" = release ] && cli_flags+=(--release)
say "cargo build ${cli_flags[*]}"
cargo build "${cli_flags[@]}"
cli="${CARGO_TARGET_DIR:-$root/target}/$profile/postern"
home="$(mktemp -d "${TMPDIR:-/tmp}/postern-demo.XXXXXX")"
say "starting $binary on the throwaway home $home"
POSTERN_HOME="$home" "$binary" --show &
app=$!
cleanup() {
    kill "$app" 2>/dev/null || true
    wait "$app" 2>/dev/null || true
    # The throwaway home's audit key and anchor live in the user's keychain: delete them too.
    "$cli" --home "$home" forget-keychain --yes >/dev/null || true
    rm -rf "$home"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 600); do
    [ -S "$home/run/engine.sock" ] && break
    kill -0 "$app" 2>/dev/null || die "the app exited before its engine listened"
    sleep 0.1
done
[ -S "$home/run/engine.sock" ] || die "the app's engine did not listen within 60 s"
say "the engine listens; playing the demo (approve its calls in the approval window)"
"$cli" --home "$home" demo || say "the demo stopped early (exit $?); the app keeps running"
say "the demo is done: look at the Timeline and Activity tabs. Quit the app (tray: Quit, or Ctrl-C here) to remove $home"
wait "$app" || true
