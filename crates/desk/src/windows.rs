//! The window process, as the resident process sees it: told every event and order over its
//! bridge ([`crate::bridge`]), its windows' calls carried out by the desk, released when its
//! last window closed, told to quit with the app. At most one runs at a time.
//!
//! One waits **on standby** while no window is open: started at the resident's start and again
//! when a window process that drew a window ends, it has loaded its libraries (the dynamic
//! linking of WebKit's ~170 libraries is most of a window process's time before `main`) and
//! waits for its first show order before it starts anything of GTK or WebKit. A window then
//! opens that much sooner. One that ends before it ever took a show order is not replaced (a
//! window process that cannot start is not started again and again); the next window starts
//! one as it is needed. One that ends after its first show order without a word (it died as the
//! order came, or found on waking that its libraries were replaced since it started) has that
//! order given once to a new process. A process on standby says nothing: one that speaks is not
//! behaving as the app's window process, and its bridge is closed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Set once the app quits: no window process is started after that.
    quitting: AtomicBool,
}

/// The bridge to the running window process.
#[derive(Debug)]
struct Link {
    tx: mpsc::UnboundedSender<ToWindows>,
    /// Show orders sent on this bridge; none while the process is on standby.
    shows: u64,
    /// The first show order, until the process speaks after it.
    unheard: Option<Show>,
    /// Whether the process was started to take an unheard order again (it gets no third try).
    retry: bool,
}

/// What follows a window process's end.
enum Ended {
    /// It drew windows: a new one goes on standby.
    Standby,
    /// It ended without a word after its first show order: a new one takes that order.
    Unheard(Show),
    /// Nothing (it never took a show order, or already had its second try).
    Nothing,
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
            quitting: AtomicBool::new(false),
        })
    }

    /// The desk whose commands the windows call (made after its surface, which holds this).
    pub fn bind(&self, desk: &Arc<Desk>) {
        let _ = self.desk.set(Arc::downgrade(desk));
    }

    /// Sends `order` to the window process. A window to show starts one when none runs (or
    /// the one there is has gone); any other order, with no window process or one on standby,
    /// has no window to tell. The link stays locked from the check to the start: two windows
    /// asked for at once start one process.
    pub fn order(self: &Arc<Self>, order: ToWindows) {
        let mut link = self.lock();
        if matches!(order, ToWindows::Quit) {
            self.quitting();
        }
        let order = match link.as_mut() {
            Some(current) => {
                if current.shows == 0 && !matches!(order, ToWindows::Show { .. } | ToWindows::Quit)
                {
                    return;
                }
                let order = match order {
                    ToWindows::Show { window, .. } => {
                        current.shows += 1;
                        if current.shows == 1 {
                            current.unheard = Some(window);
                        }
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
        if let ToWindows::Show { window, .. } = order {
            self.open(&mut link, window, false);
        }
    }

    /// The app is quitting: no window process is started from now on.
    pub fn quitting(&self) {
        self.quitting.store(true, Ordering::Relaxed);
    }

    /// Starts a window process for `window` (a second try at an unheard order when `retry`).
    fn open(self: &Arc<Self>, link: &mut Option<Link>, window: Show, retry: bool) {
        if self.quitting.load(Ordering::Relaxed) {
            return;
        }
        match self.start(link) {
            Ok(current) => {
                current.shows = 1;
                current.unheard = Some(window);
                current.retry = retry;
                let _ = current.tx.send(ToWindows::Show { seq: 1, window });
            }
            Err(err) => {
                tracing::warn!(exe = %self.exe.display(), "cannot start the window process: {err}");
            }
        }
    }

    /// Starts a window process on standby, unless one runs or the app quits.
    pub fn standby(self: &Arc<Self>) {
        let mut link = self.lock();
        if link.is_some() || self.quitting.load(Ordering::Relaxed) {
            return;
        }
        if let Err(err) = self.start(&mut link) {
            tracing::warn!(exe = %self.exe.display(), "cannot start the window process: {err}");
        }
    }

    /// Asks the window to show `window`.
    pub fn show(self: &Arc<Self>, window: Show) {
        self.order(ToWindows::Show { seq: 0, window });
    }

    /// Whether a window process runs with windows to draw (it took a show order).
    pub fn drawing(&self) -> bool {
        self.lock().as_ref().is_some_and(|link| link.shows > 0)
    }

    /// Whether a window process waits on standby.
    pub fn on_standby(&self) -> bool {
        self.lock().as_ref().is_some_and(|link| link.shows == 0)
    }

    /// Starts a window process on a new bridge and makes it the link, on standby.
    fn start<'l>(self: &Arc<Self>, link: &'l mut Option<Link>) -> std::io::Result<&'l mut Link> {
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
        self.runtime
            .spawn(Arc::clone(self).serve(stream, tx.clone(), rx));
        Ok(link.insert(Link {
            tx,
            shows: 0,
            unheard: None,
            retry: false,
        }))
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
            let message = bridge::read::<ToDesk>(&mut reader, &mut line).await;
            if let Ok(Some(_)) = &message
                && !self.heard(&tx)
            {
                tracing::warn!("a window process on standby spoke: its bridge is closed");
                break;
            }
            match message {
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
        let ended = self.forget(&tx);
        drop(tx);
        let _ = writer.await;
        match ended {
            Ended::Standby => self.standby(),
            Ended::Unheard(window) => {
                tracing::info!(
                    "the window process ended before it took its window: another takes it"
                );
                let mut link = self.lock();
                match link.as_ref() {
                    // One started meanwhile (for a later window) takes it as any order.
                    Some(_) => {
                        drop(link);
                        self.show(window);
                    }
                    None => self.open(&mut link, window, true),
                }
            }
            Ended::Nothing => {}
        }
    }

    /// Notes that the process on the bridge `tx` spoke. Returns false when it is on standby
    /// (it has no window to speak for).
    fn heard(&self, tx: &mpsc::UnboundedSender<ToWindows>) -> bool {
        let mut link = self.lock();
        match link.as_mut() {
            Some(current) if current.tx.same_channel(tx) => {
                current.unheard = None;
                current.shows > 0
            }
            // Released, or replaced: its last words are taken as they come.
            _ => true,
        }
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

    /// Forgets the bridge `tx` belongs to, if it is still the current one, and says what
    /// follows its process's end.
    fn forget(&self, tx: &mpsc::UnboundedSender<ToWindows>) -> Ended {
        let mut link = self.lock();
        match link.take() {
            Some(current) if current.tx.same_channel(tx) => match current.unheard {
                Some(window) if !current.retry => Ended::Unheard(window),
                Some(_) => Ended::Nothing,
                None if current.shows > 0 => Ended::Standby,
                None => Ended::Nothing,
            },
            // Released, or replaced after it was gone.
            other => {
                *link = other;
                Ended::Standby
            }
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

    /// A stand-in window process: it writes what it is told to a file of its own (`$OUT-<pid>`),
    /// one message a line; on a show order it calls `status` from the status window, and once
    /// answered says it is idle; it exits when released or told to quit. Started with nothing
    /// to read, it waits, as a window process on standby does.
    const STAND_IN: &str = r#"#!/bin/sh
set -e
out="$OUT-$$"
: > "$out"
while read -r message; do
  printf '%s\n' "$message" >> "$out"
  case "$message" in
    *'"kind":"show"'*) printf '{"kind":"call","id":7,"window":"main","command":"status","args":{}}\n' >&0 ;;
    *'"kind":"reply"'*) printf '{"kind":"idle","seen":1}\n' >&0 ;;
    *'"kind":"release"'*|*'"kind":"quit"'*) exit 0 ;;
  esac
done
"#;

    /// A stand-in window process `program` in a new directory, writing to `$OUT-<pid>` there.
    fn stand_in(program: &str) -> (tempfile::TempDir, Arc<Windows>, Arc<Desk>) {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("window");
        std::fs::write(&exe, program).unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = dir.path().join("out");
        let restore = vec![("OUT".to_owned(), Some(out.into_os_string()))];
        let windows = Windows::new(exe, restore, RUNTIME.handle().clone());
        let (desk, _surface) = desk();
        windows.bind(&desk);
        (dir, windows, desk)
    }

    /// What each stand-in process started in `dir` was told, in the order they were last told
    /// something.
    fn told(dir: &std::path::Path) -> Vec<Vec<ToWindows>> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("out-")
            })
            .collect();
        files.sort_by_key(|path| std::fs::metadata(path).unwrap().modified().unwrap());
        files
            .iter()
            .map(|path| {
                std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .map(|line| serde_json::from_str(line).unwrap())
                    .collect()
            })
            .collect()
    }

    /// Waits until the stand-ins in `dir` were told `lines` messages in all.
    fn wait_for_lines(dir: &std::path::Path, lines: usize) {
        for _ in 0..250 {
            if told(dir).iter().map(Vec::len).sum::<usize>() >= lines {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the stand-ins were told {:?}", told(dir));
    }

    #[test]
    fn a_window_goes_to_the_process_on_standby_and_the_next_waits_when_it_is_released() {
        let (dir, windows, _desk) = stand_in(STAND_IN);

        // No process yet: the window starts one, which answers its call and is released.
        windows.show(Show::Main);
        assert!(windows.drawing());
        // Emits with a process running reach it too, in order; none of them holds the release.
        windows.order(ToWindows::CloseApprovals);
        wait_for(|| windows.on_standby());
        wait_for_lines(dir.path(), 4);

        // Released, it made way for one on standby, told nothing while no window is asked for.
        windows.order(ToWindows::CloseApprovals);
        windows.show(Show::Approvals { focus: false });
        wait_for_lines(dir.path(), 7);
        wait_for(|| windows.on_standby());
        windows.order(ToWindows::Quit);
        wait_for_lines(dir.path(), 8);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!windows.drawing() && !windows.on_standby());

        let told = told(dir.path());
        let reply = |told: &[ToWindows]| match told {
            [
                _,
                ..,
                ToWindows::Reply {
                    id: 7,
                    result: Ok(status),
                },
                _,
            ] => status["state"].clone(),
            _ => panic!("the call's reply: {told:?}"),
        };
        let show = |seq, window| ToWindows::Show { seq, window };
        assert_eq!(told.len(), 3, "three processes: {told:?}");
        assert_eq!(told[0].len(), 4, "{:?}", told[0]);
        assert_eq!(told[0][0], show(1, Show::Main));
        assert_eq!(told[0][1], ToWindows::CloseApprovals);
        assert_eq!(reply(&told[0]), "starting");
        assert_eq!(told[0][3], ToWindows::Release);
        // The second was on standby: the close order before its window never reached it.
        assert_eq!(told[1].len(), 3, "{:?}", told[1]);
        assert_eq!(told[1][0], show(1, Show::Approvals { focus: false }));
        assert_eq!(reply(&told[1]), "starting");
        assert_eq!(told[1][2], ToWindows::Release);
        // The third waited on standby until the app quit, and none came after it.
        assert_eq!(told[2], [ToWindows::Quit]);
    }

    #[test]
    fn a_process_on_standby_that_ends_is_not_started_again_until_a_window_is_asked_for() {
        // It ends at once, as one that cannot start (no display) would.
        let (dir, windows, _desk) = stand_in("#!/bin/sh\n: > \"$OUT-$$\"\n");
        windows.standby();
        wait_for(|| !windows.on_standby());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!windows.on_standby() && !windows.drawing());
        assert_eq!(told(dir.path()).len(), 1, "started once");
    }

    #[test]
    fn a_process_on_standby_that_speaks_is_closed_and_not_replaced() {
        let (dir, windows, _desk) = stand_in(
            "#!/bin/sh\n: > \"$OUT-$$\"\nprintf '{\"kind\":\"idle\",\"seen\":0}\\n' >&0\nwhile read -r m; do printf '%s\\n' \"$m\" >> \"$OUT-$$\"; done\n",
        );
        windows.standby();
        wait_for(|| !windows.on_standby());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!windows.on_standby() && !windows.drawing());
        assert_eq!(
            told(dir.path()),
            [Vec::<ToWindows>::new()],
            "not released, not replaced"
        );
    }

    #[test]
    fn a_window_whose_process_ends_without_a_word_goes_once_to_a_new_one() {
        // It takes its first order and ends, as one killed as the order came would, or one
        // that found its libraries replaced.
        let (dir, windows, _desk) = stand_in(
            "#!/bin/sh\n: > \"$OUT-$$\"\nread -r m\nprintf '%s\\n' \"$m\" >> \"$OUT-$$\"\n",
        );
        windows.standby();
        assert!(windows.on_standby());
        windows.show(Show::Main);
        wait_for_lines(dir.path(), 2);
        wait_for(|| !windows.drawing() && !windows.on_standby());
        std::thread::sleep(Duration::from_millis(300));
        let main = ToWindows::Show {
            seq: 1,
            window: Show::Main,
        };
        assert_eq!(
            told(dir.path()),
            [vec![main.clone()], vec![main]],
            "the order given once more, to a second process, and no third"
        );
    }

    #[test]
    fn an_order_in_flight_holds_the_release() {
        let windows = Windows::new("unused".into(), Vec::new(), RUNTIME.handle().clone());
        let (tx, mut rx) = mpsc::unbounded_channel();
        *windows.lock() = Some(Link {
            tx: tx.clone(),
            shows: 0,
            unheard: None,
            retry: false,
        });
        windows.show(Show::Approvals { focus: false });
        // The process went idle before it took that order: it is not released.
        assert!(!windows.release(&tx, 0));
        assert!(windows.drawing());
        assert!(windows.release(&tx, 1));
        assert!(!windows.drawing());
        let first = rx.try_recv().unwrap();
        assert!(matches!(first, ToWindows::Show { seq: 1, .. }), "{first:?}");
        assert_eq!(rx.try_recv().unwrap(), ToWindows::Release);
    }
}
