//! Management over the engine's socket: one request line, one JSON answer line.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::framing::{Line, LineReader};
use crate::hello::{ControlCommand, ControlRequest, SOCKET_PROTOCOL, WireProof};

/// Answers management requests; implemented by the engine.
pub trait ControlHandler: Send + Sync + 'static {
    /// The answer to `command`, with the person's `proof` if the asker sent one, from the
    /// process `peer` (the kernel's word; `None` when it cannot say), as the JSON line the
    /// engine's typed answer serializes to (`postern_engine::answer::ControlOutcome`). May
    /// block (the keychain, argon2): the listener calls it off the async threads.
    fn handle(&self, command: ControlCommand, proof: Option<WireProof>, peer: Option<u32>)
    -> Value;
}

/// Why a management request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No engine listens on the socket.
    #[error("Postern is not running (no engine at {0}): start the app or `postern daemon`")]
    NotRunning(String),
    /// The engine answered something unreadable, or nothing.
    #[error("the engine gave no usable answer: {0}")]
    BadAnswer(String),
    /// The process listening at the socket is not the one holding the home's lock: nothing
    /// was sent to it.
    #[error(
        "the process listening at {socket} ({pid}) is not the Postern engine that owns {home}; \
         nothing was sent to it. Another process has put itself in the engine's place (to read \
         a passphrase, or a credential's value): stop it, and restart Postern"
    )]
    NotTheEngine {
        socket: String,
        home: String,
        /// The listener's pid as the kernel gives it, or why it cannot.
        pid: String,
    },
}

/// Sends one management request to the engine at `socket` and returns its answer line as
/// JSON; `postern_engine::answer::ask` reads it as a typed answer.
pub async fn request(socket: &Path, command: ControlCommand) -> Result<Value, ControlError> {
    request_with(socket, command, None).await
}

/// [`request`] with the person's proof of presence.
pub async fn request_with(
    socket: &Path,
    command: ControlCommand,
    proof: Option<WireProof>,
) -> Result<Value, ControlError> {
    let not_running = || ControlError::NotRunning(socket.display().to_string());
    // The person answers an OS dialog at their own pace (the engine gives them 120 s).
    let within = Duration::from_secs(match proof {
        Some(WireProof::Os) => 150,
        _ => 30,
    });
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|_| not_running())?;
    #[cfg(target_os = "linux")]
    check_listener(&stream, socket)?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(&ControlRequest {
        postern: SOCKET_PROTOCOL,
        control: command,
        proof,
    })
    .map_err(|e| ControlError::BadAnswer(e.to_string()))?;
    line.push(b'\n');
    write.write_all(&line).await.map_err(|_| not_running())?;
    let mut reader = LineReader::new(BufReader::new(read));
    match tokio::time::timeout(within, reader.next()).await {
        Ok(Ok(Some(Line::Frame(answer)))) => {
            serde_json::from_slice(&answer).map_err(|e| ControlError::BadAnswer(e.to_string()))
        }
        Ok(Ok(_)) | Ok(Err(_)) => Err(ControlError::BadAnswer("the connection closed".into())),
        Err(_) => Err(ControlError::BadAnswer(format!(
            "no answer within {}s",
            within.as_secs()
        ))),
    }
}

/// Whether the process listening at `socket` (`HOME/run/engine.sock`) holds the lock the engine
/// takes on `HOME` itself, as the kernel says (`SO_PEERCRED`, `/proc/locks`), before anything
/// is sent: a process put at the socket's path (the engine's socket renamed, a relay bound in
/// its place) cannot hold it while the engine runs, and would read what the person sends (a
/// passphrase, a credential's value) and could change the request.
#[cfg(target_os = "linux")]
fn check_listener(stream: &UnixStream, socket: &Path) -> Result<(), ControlError> {
    use std::os::unix::fs::MetadataExt;
    let home = socket.parent().and_then(Path::parent).unwrap_or(socket);
    let refused = |pid: String| ControlError::NotTheEngine {
        socket: socket.display().to_string(),
        home: home.display().to_string(),
        pid,
    };
    let pid = match stream.peer_cred().map(|cred| cred.pid()) {
        Ok(Some(pid)) => pid,
        Ok(None) => return Err(refused("the kernel names no process".into())),
        Err(e) => return Err(refused(format!("its credentials cannot be read: {e}"))),
    };
    let dir = std::fs::metadata(home).map_err(|e| refused(format!("pid {pid}; {e}")))?;
    let locks = std::fs::read_to_string("/proc/locks")
        .map_err(|e| refused(format!("pid {pid}; /proc/locks cannot be read: {e}")))?;
    let (major, minor) = (rustix::fs::major(dir.dev()), rustix::fs::minor(dir.dev()));
    if holds_flock(&locks, pid, major, minor, dir.ino()) {
        Ok(())
    } else {
        Err(refused(format!("pid {pid}")))
    }
}

/// Whether `locks` (the text of `/proc/locks`) shows `pid` holding a `flock` on the file with
/// inode `ino` on device `major:minor` (`ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF`, the
/// device in hex; a waiter's line has `->` after its id).
#[cfg(any(target_os = "linux", test))]
fn holds_flock(locks: &str, pid: i32, major: u32, minor: u32, ino: u64) -> bool {
    let file = format!("{major:02x}:{minor:02x}:{ino}");
    let pid = pid.to_string();
    locks.lines().any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        fields.next() == Some("FLOCK")
            && fields.next().is_some()
            && fields.next().is_some()
            && fields.next() == Some(pid.as_str())
            && fields.next() == Some(file.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::holds_flock;

    #[test]
    fn a_flock_is_found_by_its_holder_and_file_and_a_waiter_or_another_lock_is_not() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 777 fd:01:1234 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 999 fd:01:5678 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 4242 00:2a:99 0 EOF\n";
        assert!(holds_flock(locks, 4242, 0xfd, 1, 1234));
        assert!(holds_flock(locks, 4242, 0, 0x2a, 99));
        // Another process on the same file, a waiter, a POSIX lock, another file.
        assert!(!holds_flock(locks, 5000, 0xfd, 1, 1234));
        assert!(!holds_flock(locks, 777, 0xfd, 1, 1234));
        assert!(!holds_flock(locks, 999, 0xfd, 1, 5678));
        assert!(!holds_flock(locks, 4242, 0xfd, 1, 5678));
    }
}
