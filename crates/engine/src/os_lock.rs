//! Locks the vault when the OS reports that the user stepped away (issue 5 item 7): the
//! machine is about to sleep, or the screen locked.
//!
//! - Linux: D-Bus signals: logind's `PrepareForSleep(true)` and a session's `Lock` on the
//!   system bus, and the screensaver's `ActiveChanged(true)` on the session bus. Where a bus
//!   is missing (a container, an SSH session) nothing is reported.
//! - macOS: notifications (`MACOS`): the distributed `com.apple.screenIsLocked`, and
//!   NSWorkspace's will-sleep, screens-did-sleep and session-did-resign-active (fast user
//!   switching). Both centers deliver on the main thread's run loop, so the process must run
//!   one: the app's AppKit loop does, and `postern daemon` runs its engine beside the main
//!   thread's loop ([`with_main_run_loop`]). Compile-checked only: not run on a Mac yet.
//!
//! The idle lock applies everywhere, and on every platform the gate also sees a sleep on its
//! clocks afterwards (`Authority::stepped_away`: locked before the first call after waking is
//! decided).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Authority;

/// Why the vault locked, as the audit log and status say it.
const SLEEP: &str = "the system is going to sleep";
const SCREEN_LOCKED: &str = "the screen was locked";

/// Which macOS notification center posts a notification.
#[cfg(any(test, target_os = "macos"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Center {
    /// `NSDistributedNotificationCenter.defaultCenter`: posted by other processes (loginwindow).
    Distributed,
    /// `NSWorkspace.sharedWorkspace.notificationCenter`: AppKit's system events.
    Workspace,
}

/// The macOS notifications that mean the user stepped away: center, name, lock reason.
/// Their opposites (unlocked, woke, session became active) unlock nothing and are not watched.
#[cfg(any(test, target_os = "macos"))]
pub(crate) const MACOS: [(Center, &str, &str); 4] = [
    (
        Center::Distributed,
        "com.apple.screenIsLocked",
        SCREEN_LOCKED,
    ),
    (Center::Workspace, "NSWorkspaceWillSleepNotification", SLEEP),
    (
        Center::Workspace,
        "NSWorkspaceScreensDidSleepNotification",
        "the displays went to sleep",
    ),
    (
        Center::Workspace,
        "NSWorkspaceSessionDidResignActiveNotification",
        "the user switched to another session",
    ),
];

/// The lock reason for the notification `name` posted on `center`, or `None` when it is not
/// a step away.
#[cfg(any(test, target_os = "macos"))]
pub(crate) fn step_away(center: Center, name: &str) -> Option<&'static str> {
    MACOS
        .iter()
        .find(|(c, n, _)| *c == center && *n == name)
        .map(|(_, _, reason)| *reason)
}

/// Stops the watchers when dropped.
#[derive(Debug, Default)]
pub(crate) struct OsLock {
    stop: Arc<AtomicBool>,
    /// What the macOS observers lock: emptied on drop, since the notification centers keep
    /// the observers (and what they hold) for the life of the process.
    #[cfg(target_os = "macos")]
    observed: Arc<std::sync::Mutex<Option<Authority>>>,
}

impl Drop for OsLock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        #[cfg(target_os = "macos")]
        if let Ok(mut observed) = self.observed.lock() {
            observed.take();
        }
    }
}

/// Runs `work` (the engine) while the OS can deliver step-away notifications to it. On macOS,
/// called on the main thread, `work` runs on a thread of its own and the main thread runs its
/// run loop until `work` returns (a notification center delivers there and nowhere else);
/// the app needs none of this (AppKit runs the loop). Elsewhere, or off the main thread,
/// `work` just runs here.
pub fn with_main_run_loop<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    #[cfg(target_os = "macos")]
    {
        macos::with_main_run_loop(work)
    }
    #[cfg(not(target_os = "macos"))]
    {
        work()
    }
}

/// Starts watching: on Linux the system and session buses, each on its own thread; on macOS
/// the notification centers.
pub(crate) fn watch(authority: &Authority) -> OsLock {
    let lock = OsLock::default();
    #[cfg(target_os = "macos")]
    {
        if let Ok(mut observed) = lock.observed.lock() {
            *observed = Some(authority.clone());
        }
        macos::observe(&lock.observed);
    }
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
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
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
                    a.lock(super::SLEEP);
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
                        a.lock(super::SCREEN_LOCKED);
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

/// The notification centers. Registering observers and running the run loop go through
/// objc2's bindings, which mark them `unsafe` for the thread-safety of the block they take.
#[cfg(target_os = "macos")]
#[allow(
    unsafe_code,
    reason = "NSNotificationCenter's addObserverForName:object:queue:usingBlock: is unsafe in objc2 (the block must be sendable, ours is)"
)]
mod macos {
    use std::ptr::NonNull;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use block2::RcBlock;
    use objc2::MainThreadMarker;
    use objc2_app_kit::NSWorkspace;
    use objc2_foundation::{
        NSDate, NSDistributedNotificationCenter, NSNotification, NSNotificationCenter, NSRunLoop,
        NSString,
    };

    use super::{Center, MACOS, step_away};
    use crate::Authority;

    /// How long the main thread's run loop runs between looks at the engine thread.
    const TICK: Duration = Duration::from_millis(250);

    /// Registers one observer per step-away notification. Each runs on the posting thread
    /// (the main thread) and locks whatever `observed` holds then (nothing once the engine
    /// dropped its [`super::OsLock`]).
    pub(super) fn observe(observed: &Arc<Mutex<Option<Authority>>>) {
        let distributed = NSDistributedNotificationCenter::defaultCenter();
        let workspace = NSWorkspace::sharedWorkspace().notificationCenter();
        for (center, name, _) in MACOS {
            let on: &NSNotificationCenter = match center {
                Center::Distributed => &distributed,
                Center::Workspace => &workspace,
            };
            let observed = Arc::clone(observed);
            let block = RcBlock::new(move |note: NonNull<NSNotification>| {
                // SAFETY: the center passes a live notification for the block's duration.
                let name = unsafe { note.as_ref() }.name().to_string();
                let Some(reason) = step_away(center, &name) else {
                    return;
                };
                let authority = observed.lock().ok().and_then(|a| a.clone());
                if let Some(authority) = authority {
                    authority.lock(reason);
                }
            });
            // SAFETY: no object filter and no queue (the block runs on the posting thread);
            // the block only holds an `Arc<Mutex<..>>` of a `Send + Sync` value and a `Copy`
            // center, so it may be called from any thread. The returned observer token is
            // dropped: the center keeps the registration for the life of the process.
            let _token = unsafe {
                on.addObserverForName_object_queue_usingBlock(
                    Some(&NSString::from_str(name)),
                    None,
                    None,
                    &block,
                )
            };
        }
    }

    /// See [`super::with_main_run_loop`].
    pub(super) fn with_main_run_loop<T: Send>(work: impl FnOnce() -> T + Send) -> T {
        if MainThreadMarker::new().is_none() {
            tracing::info!("not on the main thread: no screen-lock or sleep notifications");
            return work();
        }
        std::thread::scope(|scope| {
            let worker = scope.spawn(work);
            let run_loop = NSRunLoop::mainRunLoop();
            while !worker.is_finished() {
                let started = Instant::now();
                run_loop.runUntilDate(&NSDate::dateWithTimeIntervalSinceNow(TICK.as_secs_f64()));
                // With no source attached yet the loop returns at once: wait out the tick.
                if let Some(rest) = TICK.checked_sub(started.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macos_step_away_notifications_lock_and_their_opposites_do_not() {
        assert_eq!(
            step_away(Center::Distributed, "com.apple.screenIsLocked"),
            Some("the screen was locked")
        );
        assert_eq!(
            step_away(Center::Workspace, "NSWorkspaceWillSleepNotification"),
            Some("the system is going to sleep")
        );
        assert_eq!(
            step_away(Center::Workspace, "NSWorkspaceScreensDidSleepNotification"),
            Some("the displays went to sleep")
        );
        assert_eq!(
            step_away(
                Center::Workspace,
                "NSWorkspaceSessionDidResignActiveNotification"
            ),
            Some("the user switched to another session")
        );
        for back in [
            (Center::Distributed, "com.apple.screenIsUnlocked"),
            (Center::Workspace, "NSWorkspaceDidWakeNotification"),
            (Center::Workspace, "NSWorkspaceScreensDidWakeNotification"),
            (
                Center::Workspace,
                "NSWorkspaceSessionDidBecomeActiveNotification",
            ),
            // A name is only taken from the center that posts it: another process can post
            // any distributed name, never a workspace one.
            (Center::Distributed, "NSWorkspaceWillSleepNotification"),
            (Center::Workspace, "com.apple.screenIsLocked"),
        ] {
            assert_eq!(step_away(back.0, back.1), None, "{back:?}");
        }
    }

    /// The names written in [`MACOS`] are AppKit's own (this runs on a Mac only).
    #[cfg(target_os = "macos")]
    #[test]
    #[allow(
        unsafe_code,
        reason = "reading AppKit's extern notification-name statics"
    )]
    fn the_workspace_names_are_appkits() {
        use objc2_app_kit::{
            NSWorkspaceScreensDidSleepNotification, NSWorkspaceSessionDidResignActiveNotification,
            NSWorkspaceWillSleepNotification,
        };
        // SAFETY: AppKit's statics are initialised NSStrings once the framework is linked.
        let appkit = unsafe {
            [
                NSWorkspaceWillSleepNotification,
                NSWorkspaceScreensDidSleepNotification,
                NSWorkspaceSessionDidResignActiveNotification,
            ]
        }
        .map(|n| n.to_string());
        let ours: Vec<_> = MACOS
            .iter()
            .filter(|(c, _, _)| *c == Center::Workspace)
            .map(|(_, n, _)| (*n).to_owned())
            .collect();
        assert_eq!(ours, appkit);
    }
}
