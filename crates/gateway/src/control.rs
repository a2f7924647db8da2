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
/// passphrase, a credential's value) and could change the request. Exactly one process may
/// hold a lock on the home (a second one on a file of the same number is refused too: inode
/// numbers repeat across a btrfs filesystem's subvolumes).
#[cfg(target_os = "linux")]
fn check_listener(stream: &UnixStream, socket: &Path) -> Result<(), ControlError> {
    let home = socket.parent().and_then(Path::parent).unwrap_or(socket);
    let refused = |pid: String| ControlError::NotTheEngine {
        socket: socket.display().to_string(),
        home: home.display().to_string(),
        pid,
    };
    let pid = match stream.peer_cred().map(|cred| cred.pid()) {
        Ok(Some(pid)) if pid > 0 => pid,
        Ok(_) => {
            return Err(refused(
                "no process this postern can see: is it running in another PID namespace, a \
                 container or a sandbox?"
                    .into(),
            ));
        }
        Err(e) => return Err(refused(format!("its credentials cannot be read: {e}"))),
    };
    let file = lock_file(home).map_err(|e| refused(format!("pid {pid}; {e}")))?;
    // `/proc/locks` is read in pages while other processes take and drop locks (SQLite's, by
    // the hundred under load), which can skip a line or show one twice: a few reads, and the
    // holders as a set.
    for _ in 0..5 {
        let locks = std::fs::read_to_string("/proc/locks")
            .map_err(|e| refused(format!("pid {pid}; /proc/locks cannot be read: {e}")))?;
        let mut holders = flock_holders(&locks, &file);
        holders.sort_unstable();
        holders.dedup();
        if holders == [pid] {
            return Ok(());
        }
    }
    Err(refused(format!("pid {pid}")))
}

/// The home directory as `/proc/locks` names the file a lock is on: `MAJOR:MINOR:INODE`, the
/// device being the filesystem's (`/proc/self/mountinfo`, by the mount `statx` names: on btrfs a
/// subvolume's `st_dev` is not its filesystem's), in hex as `/proc/locks` prints it.
#[cfg(target_os = "linux")]
fn lock_file(home: &Path) -> std::io::Result<String> {
    use rustix::fs::{AtFlags, CWD, StatxFlags, statx};
    let stx = statx(
        CWD,
        home,
        AtFlags::empty(),
        StatxFlags::INO | StatxFlags::MNT_ID,
    )?;
    let mut dev = (stx.stx_dev_major, stx.stx_dev_minor);
    if stx.stx_mask & StatxFlags::MNT_ID.bits() != 0 {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        if let Some(found) = mount_device(&mountinfo, stx.stx_mnt_id) {
            dev = found;
        }
    }
    Ok(format!("{:02x}:{:02x}:{}", dev.0, dev.1, stx.stx_ino))
}

/// The device (`major:minor`, decimal) of the mount `id` in `/proc/self/mountinfo`'s text.
#[cfg(any(target_os = "linux", test))]
fn mount_device(mountinfo: &str, id: u64) -> Option<(u32, u32)> {
    mountinfo.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()?.parse::<u64>().ok()? != id {
            return None;
        }
        let (major, minor) = fields.nth(1)?.split_once(':')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    })
}

/// The pids holding an exclusive `flock` on `file` (`MAJ:MIN:INODE` as [`lock_file`] gives
/// it) in `locks`, the text of `/proc/locks` (`ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0
/// EOF`; a waiter's line has `->` after its id, and an old kernel's `LOCK_MAND` lock, which
/// conflicts with nothing, reads `FLOCK MSNFS`: neither counts).
#[cfg(any(target_os = "linux", test))]
fn flock_holders(locks: &str, file: &str) -> Vec<i32> {
    locks
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().skip(1).take(5).collect();
            match fields[..] {
                ["FLOCK", "ADVISORY", "WRITE", pid, on] if on == file => pid.parse().ok(),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{flock_holders, mount_device};

    #[test]
    fn the_holders_of_a_flock_are_found_by_file_and_waiters_and_other_locks_are_not() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 777 fd:01:1234 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 999 fd:01:5678 0 EOF\n\
                     3: FLOCK  MSNFS  READ 666 fd:01:1234 0 EOF\n\
                     4: FLOCK  ADVISORY  READ 555 fd:01:1234 0 EOF\n\
                     5: FLOCK  ADVISORY  WRITE 4242 00:2a:99 0 EOF\n";
        assert_eq!(flock_holders(locks, "fd:01:1234"), [4242]);
        assert_eq!(flock_holders(locks, "00:2a:99"), [4242]);
        assert!(
            flock_holders(locks, "fd:01:5678").is_empty(),
            "a POSIX lock"
        );
        // A second holder on a file of the same number (another subvolume) is seen.
        let twice = format!("{locks}6: FLOCK  ADVISORY  WRITE 31337 fd:01:1234 0 EOF\n");
        assert_eq!(flock_holders(&twice, "fd:01:1234"), [4242, 31337]);
    }

    #[test]
    fn a_mount_is_found_by_its_id() {
        let mountinfo = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                         41 22 0:40 / /home rw,relatime shared:20 - btrfs /dev/vdb rw,subvol=/home\n";
        assert_eq!(mount_device(mountinfo, 41), Some((0, 40)));
        assert_eq!(mount_device(mountinfo, 22), Some((254, 0)));
        assert_eq!(mount_device(mountinfo, 7), None);
    }
}
