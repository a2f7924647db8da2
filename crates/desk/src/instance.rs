//! One resident process per home. Started again (the app's icon clicked after its window
//! closed), the app asks the resident already running to show its status window, and ends
//! there: no second tray icon, no second engine told the home is taken. Which process is the
//! resident is decided by a lock ([`claim`]), so two started at the same instant cannot both
//! go on. The request goes over
//! a Unix socket in the home's run directory (the home is the user's alone, mode 0700) and
//! carries nothing but "show", so any process of the user may send it: at worst a window
//! opens. It is not the bridge: no call goes this way.

use std::fs::{DirBuilder, File, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

/// The socket's file name in the home's run directory.
pub const SOCKET: &str = "desk.sock";

const SHOW: &[u8; 5] = b"show\n";

/// The file whose lock the resident holds, in the home's run directory.
pub const LOCK: &str = "desk.lock";

/// Takes the home's resident lock: `Some` (held while the file lives) when this process is to
/// be the resident, `None` when another process holds it.
pub fn claim(run_dir: &Path) -> io::Result<Option<File>> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(run_dir)?;
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(run_dir.join(LOCK))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(err)) => Err(err),
    }
}

/// [`ask_to_show`], waiting up to `limit` for a resident that holds the lock but may not
/// listen yet (it started an instant before). `Ok(false)`: none answered.
pub fn ask_to_show_within(path: &Path, limit: Duration) -> io::Result<bool> {
    let deadline = Instant::now() + limit;
    loop {
        if ask_to_show(path)? {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks the resident listening at `path` to show its status window. `Ok(false)`: none listens
/// (no socket, or one left by a resident that is gone).
pub fn ask_to_show(path: &Path) -> io::Result<bool> {
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(mut stream) => {
            stream.write_all(SHOW)?;
            Ok(true)
        }
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Ok(false)
        }
        Err(err) => Err(err),
    }
}

/// Listens at `path` (where [`ask_to_show`] found no resident: a socket file left there is
/// replaced; the directory is made 0700, the socket 0600, as the engine's) and calls `show`
/// for each request, on `runtime`.
pub fn listen(
    path: &Path,
    runtime: &tokio::runtime::Handle,
    show: impl Fn() + Send + 'static,
) -> io::Result<()> {
    let listener = {
        let _entered = runtime.enter();
        postern_gateway::bind(path)?
    };
    runtime.spawn(async move {
        loop {
            let mut stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!("the show-window socket failed: {err}");
                    return;
                }
            };
            let mut request = [0; SHOW.len()];
            let read =
                tokio::time::timeout(Duration::from_secs(1), stream.read_exact(&mut request));
            if matches!(read.await, Ok(Ok(_))) && &request == SHOW {
                show();
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::testing::{RUNTIME, wait_for};

    #[test]
    fn one_process_per_home_holds_the_resident_lock() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let first = claim(&run).unwrap().expect("the first claim holds it");
        assert!(claim(&run).unwrap().is_none(), "a second is refused");
        // One that starts listening a moment after its claim is still found.
        let path = run.join(SOCKET);
        let shown = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&shown);
        let late = std::thread::spawn({
            let path = path.clone();
            move || {
                std::thread::sleep(Duration::from_millis(300));
                listen(&path, RUNTIME.handle(), move || {
                    counter.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
        });
        assert!(ask_to_show_within(&path, Duration::from_secs(10)).unwrap());
        late.join().unwrap();
        wait_for(|| shown.load(Ordering::Relaxed) == 1);
        // The lock goes with its holder.
        drop(first);
        assert!(claim(&run).unwrap().is_some());
    }

    #[test]
    fn a_second_start_asks_the_first_to_show_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SOCKET);
        assert!(!ask_to_show(&path).unwrap(), "nobody listens yet");

        // A socket file left by a resident that died is nobody, and is replaced.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(!ask_to_show(&path).unwrap(), "a stale socket");

        let shown = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&shown);
        listen(&path, RUNTIME.handle(), move || {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert!(ask_to_show(&path).unwrap());
        wait_for(|| shown.load(Ordering::Relaxed) == 1);

        // Anything else is no request.
        let mut other = std::os::unix::net::UnixStream::connect(&path).unwrap();
        other.write_all(b"call\n").unwrap();
        drop(other);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(shown.load(Ordering::Relaxed), 1);
        assert!(ask_to_show(&path).unwrap());
        wait_for(|| shown.load(Ordering::Relaxed) == 2);
    }
}
