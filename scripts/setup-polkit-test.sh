#!/usr/bin/env bash
# Prepares this machine, as root, for the polkit end-to-end test (tests/tests/os_auth.rs):
#
#   scripts/setup-polkit-test.sh
#
# - installs Postern's polkit actions (packaging/linux/dev.postern.policy);
# - makes the test user `postern-polkit-test` with the test's known password (polkit treats
#   root as always authorized, so the test runs the engine and the CLI as this user);
# - where no system bus or polkitd runs (a container, a CI machine without systemd), starts a
#   system dbus-daemon at the standard address and polkitd on it. The standard address, not a
#   private one: the setuid polkit-agent-helper-1 clears its environment and reports a checked
#   password to polkitd on the default system bus only.
#
# Idempotent: what is there already is kept. scripts/test.sh runs it (Linux, as root).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
user=postern-polkit-test
password=postern-polkit-e2e-password
socket=/run/dbus/system_bus_socket

[ "$(id -u)" -eq 0 ] || { echo "setup-polkit-test.sh: run as root" >&2; exit 1; }
for tool in dbus-daemon dbus-send pkaction pkttyagent /usr/lib/polkit-1/polkitd; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "setup-polkit-test.sh: $tool is missing (Debian packages dbus and polkitd)" >&2
        exit 1
    }
done

install -D -m 0644 "$root/packaging/linux/dev.postern.policy" \
    /usr/share/polkit-1/actions/dev.postern.policy

if ! id "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/sh "$user"
fi
echo "$user:$password" | chpasswd

bus_up() {
    dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.ListNames >/dev/null 2>&1
}
polkit_up() {
    dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.PolicyKit1 2>/dev/null |
        grep -q 'boolean true'
}
wait_for() {
    for _ in $(seq 100); do "$1" && return 0; sleep 0.1; done
    echo "setup-polkit-test.sh: $2 did not come up" >&2
    exit 1
}

if ! bus_up; then
    if [ -d /run/systemd/system ]; then
        systemctl start dbus
    else
        mkdir -p /run/dbus
        # A pid file left by a bus that is gone keeps a new one from starting.
        if [ -f /run/dbus/pid ] && ! kill -0 "$(cat /run/dbus/pid)" 2>/dev/null; then
            rm -f /run/dbus/pid
        fi
        rm -f "$socket"
        dbus-daemon --system --fork
    fi
    wait_for bus_up "the system bus"
fi
if ! polkit_up; then
    if [ -d /run/systemd/system ]; then
        systemctl start polkit
    else
        nohup /usr/lib/polkit-1/polkitd --no-debug >/var/log/postern-polkitd.log 2>&1 &
    fi
    wait_for polkit_up "polkitd"
fi
# polkitd reads the actions directory when it changes; wait until it knows ours.
for _ in $(seq 50); do
    pkaction --action-id dev.postern.approve >/dev/null 2>&1 && break
    sleep 0.1
done
pkaction --action-id dev.postern.approve >/dev/null ||
    { echo "setup-polkit-test.sh: polkitd does not know dev.postern.approve" >&2; exit 1; }
echo "polkit test setup: system bus, polkitd, Postern's actions and user $user are ready"
