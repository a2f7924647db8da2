#!/usr/bin/env bash
# Installs the third-party MCP servers the end-to-end tests (tests/) run against:
#   - @modelcontextprotocol/server-everything (npm) into tests/.deps/node, from the committed
#     tests/deps/node/package.json + package-lock.json (`npm ci`, so the install is reproducible);
#   - mcp-server-time (PyPI) into the venv tests/.deps/venv, from the pinned
#     tests/deps/python/requirements.txt;
#   - the real agents the tests drive headless, Claude Code (@anthropic-ai/claude-code) and
#     Codex (@openai/codex), into tests/.deps/agents from tests/deps/agents (`npm ci`; Claude
#     Code's install.cjs is run by hand, since npm skips that postinstall).
# Idempotent: a stamp (the hash of the lock file) makes a warm run a no-op that takes well under a
# second. tests/.deps is gitignored; delete it to force a clean reinstall.
#
# Needs node >= 20 with npm, and python3 with the venv module. When one is missing and we may
# use apt-get (root, or passwordless sudo), it is installed; otherwise this script says what to
# install and fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/tests/.deps"
spec="$root/tests/deps"

say() { printf '[setup-test-deps] %s\n' "$*"; }
die() {
    printf '[setup-test-deps] error: %s\n' "$*" >&2
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

apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    say "installing with apt-get: $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# `npm ci` in a folder, tried three times: a registry that drops one connection should not fail a
# whole CI run. The last failure prints npm's own error lines and the tail of its debug log.
npm_ci_in() {
    local dir="$1" attempt out
    for attempt in 1 2 3; do
        if out="$(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error 2>&1)"; then
            return 0
        fi
        if [ "$attempt" -lt 3 ]; then
            say "npm ci in ${dir#"$root"/} failed (attempt $attempt of 3); trying again in $((attempt * 10)) s"
            printf '%s\n' "$out" | grep -v '^npm error A complete log' | tail -n 5 >&2
            sleep $((attempt * 10))
        fi
    done
    printf '%s\n' "$out" >&2
    local log
    log="$(ls -t "${npm_config_cache:-$HOME/.npm}"/_logs/*-debug-*.log 2>/dev/null | head -n 1)"
    [ -n "$log" ] && { echo "--- last lines of $log ---"; tail -n 30 "$log"; } >&2
    die "npm ci in ${dir#"$root"/} failed three times"
}

hash_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        cat "$@" | sha256sum | cut -d' ' -f1
    else
        cat "$@" | shasum -a 256 | cut -d' ' -f1
    fi
}

# --- toolchains -------------------------------------------------------------------------------

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm ||
        die "node and npm are needed (Node.js >= 20): install them (Debian/Ubuntu: NodeSource or \`apt-get install nodejs npm\`; macOS: \`brew install node\`) and run again"
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
    say "warning: node $(node --version) is older than the 20 server-everything is tested with"
fi

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3 python3-venv ||
        die "python3 with the venv module is needed: install it (Debian/Ubuntu: \`apt-get install python3-venv\`; macOS: \`brew install python\`) and run again"
fi

# --- server-everything (npm) ------------------------------------------------------------------

node_dir="$deps/node"
node_stamp="$node_dir/.postern-stamp"
node_want="$(hash_of "$spec/node/package.json" "$spec/node/package-lock.json")"
everything_js="$node_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ -f "$everything_js" ] && [ "$(cat "$node_stamp" 2>/dev/null)" = "$node_want" ]; then
    say "server-everything: up to date"
else
    say "server-everything: installing into ${node_dir#"$root"/}"
    mkdir -p "$node_dir"
    cp "$spec/node/package.json" "$spec/node/package-lock.json" "$node_dir/"
    npm_ci_in "$node_dir"
    [ -f "$everything_js" ] || die "npm ci finished but $everything_js is missing"
    printf '%s\n' "$node_want" >"$node_stamp"
fi

# --- real agents: Claude Code and Codex (npm) -------------------------------------------------
agents_dir="$deps/agents"
agents_stamp="$agents_dir/.postern-stamp"
agents_want="$(hash_of "$spec/agents/package.json" "$spec/agents/package-lock.json")"
if [ -x "$agents_dir/node_modules/.bin/claude" ] && [ -x "$agents_dir/node_modules/.bin/codex" ] &&
    [ "$(cat "$agents_stamp" 2>/dev/null)" = "$agents_want" ]; then
    say "claude-code, codex: up to date"
else
    say "claude-code, codex: installing into ${agents_dir#"$root"/}"
    mkdir -p "$agents_dir"
    cp "$spec/agents/package.json" "$spec/agents/package-lock.json" "$agents_dir/"
    npm_ci_in "$agents_dir"
    # npm does not run Claude Code's postinstall: it puts the platform's native binary in place.
    (cd "$agents_dir/node_modules/@anthropic-ai/claude-code" && node install.cjs >/dev/null)
    "$agents_dir/node_modules/.bin/claude" --version >/dev/null ||
        die "claude-code installed but \`claude --version\` fails"
    "$agents_dir/node_modules/.bin/codex" --version >/dev/null ||
        die "codex installed but \`codex --version\` fails"
    printf '%s\n' "$agents_want" >"$agents_stamp"
fi

# --- mcp-server-time (PyPI, in a venv) --------------------------------------------------------

venv="$deps/venv"
venv_stamp="$venv/.postern-stamp"
venv_want="$(hash_of "$spec/python/requirements.txt")"
if [ -x "$venv/bin/mcp-server-time" ] && [ "$(cat "$venv_stamp" 2>/dev/null)" = "$venv_want" ]; then
    say "mcp-server-time: up to date"
else
    say "mcp-server-time: installing into ${venv#"$root"/}"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$spec/python/requirements.txt"
    [ -x "$venv/bin/mcp-server-time" ] || die "pip finished but $venv/bin/mcp-server-time is missing"
    printf '%s\n' "$venv_want" >"$venv_stamp"
fi
