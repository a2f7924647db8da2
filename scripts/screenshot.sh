#!/usr/bin/env bash
# Regenerates the app's screenshots in docs/screenshots/ (one per view), each window at its own
# default size (the status window 900x640, the approval window 560x720):
#   status.png              two live sessions: a pinned server rebuilt under --restart on-change
#                           (new epoch, catalog changes with an escalation, a stale agent tool
#                           list) and an unpinned one with files newer than the running process
#   execution-record.png    the same window with one execution record opened
#   servers.png             the Servers view of the same home: the rebuilt server's catalog diff
#                           (an escalation flagged), its credential withheld from the new code
#   approval-window.png     the approval window at its default size (560x720): a rebuilt server's
#                           second call (the headline, the arguments with a schema default marked,
#                           the risk strip, the decision), 1 of 2 queued
#   tray-menu.png           the tray's menu with those two requests, the first one's arguments,
#                           risk lines, Review… and Deny showing (the icon held by trayer, see
#                           ui/e2e/tray.mjs)
#   settings.png            the status window's Settings
#   locked.png              the locked status window: only the lock and Unlock
#   first-run-passphrase.png  a new home: choosing the Postern passphrase
#   first-run.png           the guide (add a server, or import the servers of the Claude Code
#                           configuration it found; the snippet; the first call; the demo)
#   first-run-rewire.png    Claude Code's coverage and Rewire's preview after importing
#   timeline.png            after a short story (two agents, approvals, a denial, a rebuild and
#                           the stale call it refuses): the Sessions timeline, a refusal's audit
#                           record opened
#   activity.png            the Activity feed of the same story
#   permissions.png         the Permissions page of the same story: a live grant, every-use rules
#   credentials.png         the Credentials view (an env credential, two header ones)
#   integrity.png           the Integrity view after a full verification
#   engine-unavailable.png  another engine (`postern daemon`) owns the home
#
#   scripts/screenshot.sh [OUT_DIR]
#   POSTERN_SHOTS=journals,first-run scripts/screenshot.sh    only those homes' pictures
#
# Linux only: it runs the real app under Xvfb in a private D-Bus session and takes each picture
# over WebDriver (ui/e2e/screenshots.mjs). Installs and builds what is missing first.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$(mkdir -p "${1:-docs/screenshots}" && cd "${1:-docs/screenshots}" && pwd)"

[ "$(uname -s)" = Linux ] || {
    echo "screenshot.sh: Linux only (WebKitWebDriver drives the app's webview)" >&2
    exit 1
}
bash scripts/run-app.sh --build-only --with-test-deps
cargo build -p postern-cli --bin postern

scratch="$(mktemp -d "${TMPDIR:-/tmp}/postern-shots.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/data" "$scratch/cache" "$scratch/config" "$scratch/runtime"
chmod 700 "$scratch/runtime"
target="${CARGO_TARGET_DIR:-$root/target}"
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
exec xvfb-run -a -s "-screen 0 1280x1100x24" "$@"'

XDG_DATA_HOME="$scratch/data" XDG_CACHE_HOME="$scratch/cache" \
    XDG_CONFIG_HOME="$scratch/config" XDG_RUNTIME_DIR="$scratch/runtime" \
    POSTERN_APP="$target/debug/postern-app" POSTERN_CLI="$target/debug/postern" \
    dbus-run-session -- bash -c "$desktop" desktop \
    node ui/e2e/screenshots.mjs "$out" 2>&1 | drop_session_noise
