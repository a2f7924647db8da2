//! Locks the vault when the OS reports that the user stepped away (issue 5 item 7): the
//! machine is about to sleep, or the screen locked. On Linux these are D-Bus signals: logind's
//! `PrepareForSleep(true)` and a session's `Lock` on the system bus, and the screensaver's
//! `ActiveChanged(true)` on the session bus. Where a bus is missing (a container, an SSH
//! session) nothing is reported and the idle lock still applies. Other platforms report no
//! signals yet; on every platform the gate also sees a sleep on its clocks afterwards
//! (`Authority::stepped_away`: locked before the first call after waking is decided).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Authority;

/// Stops the watchers when dropped.
#[derive(Debug, Default)]
pub(crate) struct OsLock {
    stop: Arc<AtomicBool>,
}

impl Drop for OsLock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts watching the system and session buses, each on its own thread.
pub(crate) fn watch(authority: &Authority) -> OsLock {
    let lock = OsLock::default();
    #[cfg(target_os = "linux")]
    for (bus, connect) in [
        ("system", linux::system as fn() -> _),
        ("session", linux::session as fn() -> _),
    ] {
        let (authority, stop) = (authority.clone(), Arc::clone(&lock.stop));
        let spawned = std::thread::Builder::new()
            .name(format!("os-lock-{bus}"))
            .spawn(move || match connect() {
                Ok(conn) => {
                    if let Err(e) = linux::listen(&conn, &authority, &stop) {
                        tracing::info!("not watching the {bus} bus for lock and sleep: {e}");
                    }
                }
                Err(e) => tracing::info!("no {bus} bus, so no lock or sleep events from it: {e}"),
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot watch the {bus} bus: {e}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = authority;
    lock
}

#[cfg(target_os = "linux")]
pub(crate) mod linux {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use dbus::blocking::Connection;
    use dbus::message::MatchRule;

    use crate::Authority;

    pub fn system() -> Result<Connection, dbus::Error> {
        Connection::new_system()
    }

    pub fn session() -> Result<Connection, dbus::Error> {
        Connection::new_session()
    }

    /// Locks `authority` on every step-away signal `conn` delivers, until `stop`.
    pub fn listen(
        conn: &Connection,
        authority: &Authority,
        stop: &AtomicBool,
    ) -> Result<(), dbus::Error> {
        let a = authority.clone();
        conn.add_match(
            MatchRule::new_signal("org.freedesktop.login1.Manager", "PrepareForSleep"),
            move |(starting,): (bool,), _, _| {
                if starting {
                    a.lock("the system is going to sleep");
                }
                true
            },
        )?;
        let a = authority.clone();
        conn.add_match(
            MatchRule::new_signal("org.freedesktop.login1.Session", "Lock"),
            move |(): (), _, _| {
                a.lock("the session was locked");
                true
            },
        )?;
        for screensaver in ["org.freedesktop.ScreenSaver", "org.gnome.ScreenSaver"] {
            let a = authority.clone();
            conn.add_match(
                MatchRule::new_signal(screensaver, "ActiveChanged"),
                move |(active,): (bool,), _, _| {
                    if active {
                        a.lock("the screen was locked");
                    }
                    true
                },
            )?;
        }
        while !stop.load(Ordering::Relaxed) {
            conn.process(Duration::from_millis(500))?;
        }
        Ok(())
    }
}
