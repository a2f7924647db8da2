//! The window process, as the resident process sees it: started when a window is to open and
//! none runs, told every event and order over its bridge ([`crate::bridge`]), its windows'
//! calls carried out by the desk, released when its last window closed, told to quit with the
//! app. At most one runs at a time.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::io::BufReader;
use tokio::sync::mpsc;

use crate::Desk;
use crate::bridge::{self, BRIDGE_ARG, Show, ToDesk, ToWindows};

/// The resident's window process: how to start one, and the one running.
#[derive(Debug)]
pub struct Windows {
    exe: PathBuf,
    /// Variables the resident set for itself only, put back as they were for the windows.
    restore: Vec<(String, Option<OsString>)>,
    runtime: tokio::runtime::Handle,
    desk: OnceLock<Weak<Desk>>,
    link: Mutex<Option<Link>>,
}

/// The bridge to the running window process.
#[derive(Debug)]
struct Link {
    tx: mpsc::UnboundedSender<ToWindows>,
    /// Show orders sent on this bridge.
    shows: u64,
}

impl Windows {
    /// Windows drawn by the program `exe` (the app's window process), started with the
    /// variables in `restore` set back as they were before this process changed them;
    /// the bridges' tasks run on `runtime`.
    pub fn new(
        exe: PathBuf,
        restore: Vec<(String, Option<OsString>)>,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Self> {
        Arc::new(Self {
            exe,
            restore,
            runtime,
            desk: OnceLock::new(),
            link: Mutex::new(None),
        })
    }

    /// The desk whose commands the windows call (made after its surface, which holds this).
    pub fn bind(&self, desk: &Arc<Desk>) {
        let _ = self.desk.set(Arc::downgrade(desk));
    }

    /// Sends `order` to the window process. A window to show starts one when none runs (or
    /// the one there is has gone); any other order, with no window process, has nobody to tell.
    /// The link stays locked from the check to the start: two windows asked for at once start
    /// one process.
    pub fn order(self: &Arc<Self>, order: ToWindows) {
        let mut link = self.lock();
        let order = match link.as_mut() {
            Some(current) => {
                let order = match order {
                    ToWindows::Show { window, .. } => {
                        current.shows += 1;
                        ToWindows::Show {
                            seq: current.shows,
                            window,
                        }
                    }
                    other => other,
                };
                match current.tx.send(order) {
                    Ok(()) => return,
                    // Its process has gone: a window to show starts a new one.
                    Err(mpsc::error::SendError(order)) => {
                        *link = None;
                        order
                    }
                }
            }
            None => order,
        };
        if let ToWindows::Show { window, .. } = order
            && let Err(err) = self.start(&mut link, window)
        {
            tracing::warn!(exe = %self.exe.display(), "cannot start the window process: {err}");
        }
    }

    /// Asks the window to show `window`.
    pub fn show(self: &Arc<Self>, window: Show) {
        self.order(ToWindows::Show { seq: 0, window });
    }

    /// Whether a window process runs.
    pub fn running(&self) -> bool {
        self.lock().is_some()
    }

    /// Starts a window process on a new bridge, its first order `first`, and makes it the link.
    fn start(self: &Arc<Self>, link: &mut Option<Link>, first: Show) -> std::io::Result<()> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .arg(BRIDGE_ARG)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .kill_on_drop(false);
        for (name, value) in &self.restore {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        ours.set_nonblocking(true)?;
        let _entered = self.runtime.enter();
        let stream = tokio::net::UnixStream::from_std(ours)?;
        let mut child = command.spawn()?;
        tracing::info!(pid = child.id(), "window process started");
        // Reaped when it exits, whatever its bridge does meanwhile.
        self.runtime.spawn(async move {
            match child.wait().await {
                Ok(status) => tracing::info!(%status, "window process ended"),
                Err(err) => tracing::warn!("cannot wait for the window process: {err}"),
            }
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(ToWindows::Show {
            seq: 1,
            window: first,
        });
        *link = Some(Link {
            tx: tx.clone(),
            shows: 1,
        });
        self.runtime.spawn(Arc::clone(self).serve(stream, tx, rx));
        Ok(())
    }

    /// Carries the window process's calls to the desk and the desk's messages to it, until
    /// either end goes.
    async fn serve(
        self: Arc<Self>,
        stream: tokio::net::UnixStream,
        tx: mpsc::UnboundedSender<ToWindows>,
        mut rx: mpsc::UnboundedReceiver<ToWindows>,
    ) {
        let (read, mut write) = stream.into_split();
        let writer = tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                let last = matches!(message, ToWindows::Release | ToWindows::Quit);
                if let Err(err) = bridge::write(&mut write, &message).await {
                    tracing::debug!("the window process's bridge closed: {err}");
                    return;
                }
                if last {
                    return;
                }
            }
        });
        let mut reader = BufReader::new(read);
        let mut line = Vec::new();
        loop {
            match bridge::read::<ToDesk>(&mut reader, &mut line).await {
                Ok(Some(ToDesk::Call {
                    id,
                    window,
                    command,
                    args,
                })) => {
                    let Some(desk) = self.desk.get().and_then(Weak::upgrade) else {
                        break;
                    };
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let result = desk.call(&window, &command, args).await;
                        let _ = tx.send(ToWindows::Reply { id, result });
                    });
                }
                Ok(Some(ToDesk::Idle { seen })) => {
                    if self.release(&tx, seen) {
                        break;
                    }
                }
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!("the window process sent what is not a message: {err}");
                    break;
                }
            }
        }
        self.forget(&tx);
        drop(tx);
        let _ = writer.await;
    }

    /// Releases the window process if it took every show order sent: it exits, and the next
    /// window starts a new one. Returns whether it was released.
    fn release(&self, tx: &mpsc::UnboundedSender<ToWindows>, seen: u64) -> bool {
        let mut link = self.lock();
        match link.as_ref() {
            Some(current) if current.tx.same_channel(tx) && current.shows == seen => {
                let _ = tx.send(ToWindows::Release);
                *link = None;
                true
            }
            _ => false,
        }
    }

    /// Forgets the bridge `tx` belongs to, if it is still the current one.
    fn forget(&self, tx: &mpsc::UnboundedSender<ToWindows>) {
        let mut link = self.lock();
        if link
            .as_ref()
            .is_some_and(|current| current.tx.same_channel(tx))
        {
            *link = None;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Link>> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::{RUNTIME, desk, wait_for};

    /// A stand-in window process: it takes its first order, calls `status` from the status
    /// window, says it is idle, and writes what it was told to `$OUT`, one message a line.
    const STAND_IN: &str = r#"#!/bin/sh
set -e
read -r order
printf '%s\n' "$order" >> "$OUT"
printf '{"kind":"call","id":7,"window":"main","command":"status","args":{}}\n' >&0
while read -r message; do
  printf '%s\n' "$message" >> "$OUT"
  case "$message" in
    *'"reply"'*) printf '{"kind":"idle","seen":1}\n' >&0 ;;
    *'"release"'*) exit 0 ;;
  esac
done
"#;

    #[test]
    fn a_window_starts_a_window_process_on_the_bridge_that_answers_its_calls_and_releases_it() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("window");
        std::fs::write(&exe, STAND_IN).unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = dir.path().join("out");
        let restore = vec![("OUT".to_owned(), Some(out.clone().into_os_string()))];
        let windows = Windows::new(exe, restore, RUNTIME.handle().clone());
        let (desk, _surface) = desk();
        windows.bind(&desk);

        windows.show(Show::Main);
        assert!(windows.running());
        // Emits with a process running reach it too, in order; none of them holds the release.
        windows.order(ToWindows::CloseApprovals);

        wait_for(|| !windows.running());
        let read = || std::fs::read_to_string(&out).unwrap_or_default();
        for _ in 0..100 {
            if read().contains("release") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let told: Vec<ToWindows> = read()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(
            told[0],
            ToWindows::Show {
                seq: 1,
                window: Show::Main
            }
        );
        assert!(told.contains(&ToWindows::CloseApprovals), "{told:?}");
        let status = told
            .iter()
            .find_map(|m| match m {
                ToWindows::Reply {
                    id: 7,
                    result: Ok(status),
                } => Some(status),
                _ => None,
            })
            .unwrap_or_else(|| panic!("the call's reply: {told:?}"));
        assert_eq!(status["state"], "starting", "{status}");
        assert_eq!(told.last(), Some(&ToWindows::Release));
        assert_eq!(told.len(), 4, "{told:?}");
    }

    #[test]
    fn an_order_in_flight_holds_the_release() {
        let windows = Windows::new("unused".into(), Vec::new(), RUNTIME.handle().clone());
        let (tx, mut rx) = mpsc::unbounded_channel();
        *windows.lock() = Some(Link {
            tx: tx.clone(),
            shows: 0,
        });
        windows.show(Show::Approvals { focus: false });
        // The process went idle before it took that order: it is not released.
        assert!(!windows.release(&tx, 0));
        assert!(windows.running());
        assert!(windows.release(&tx, 1));
        assert!(!windows.running());
        let first = rx.try_recv().unwrap();
        assert!(matches!(first, ToWindows::Show { seq: 1, .. }), "{first:?}");
        assert_eq!(rx.try_recv().unwrap(), ToWindows::Release);
    }
}
