//! One resident process per home. Started again (the app's icon clicked after its window
//! closed), the app asks the resident already running to show its status window, and ends
//! there: no second tray icon, no second engine told the home is taken. The request goes over
//! a Unix socket in the home's run directory (the home is the user's alone, mode 0700) and
//! carries nothing but "show", so any process of the user may send it: at worst a window
//! opens. It is not the bridge: no call goes this way.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// The socket's file name in the home's run directory.
pub const SOCKET: &str = "desk.sock";

const SHOW: &[u8; 5] = b"show\n";

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
