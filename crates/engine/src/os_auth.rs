//! OS authentication behind the proof of presence (issue 13): the operating system asks the
//! person (their login password, Touch ID) and says yes or no. On Linux that is polkit: a
//! `dev.postern.*` action (packaging/linux/dev.postern.policy, `auth_self`, never kept)
//! checked with `CheckAuthorization` and user interaction on the system bus, for the process
//! that asked; the desktop's polkit agent (or `pkttyagent` on a terminal) asks the person, and
//! polkitd alone decides. On macOS it is LocalAuthentication, from the app (`local_auth`).
//!
//! The OS holds no secret Postern can use: a yes stands in for the passphrase only while the
//! vault key is in the engine's memory (`Authority::prove` says so when it is not).

/// The process the OS asks the person about: whoever sent the request, as the engine saw it
/// (the socket's peer credentials, or the engine's own process for the app), never as a
/// request says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "only polkit asks about a process")
)]
pub struct Asker {
    pid: u32,
    /// The process's start time (clock ticks since boot, `/proc/PID/stat`): with the pid, it
    /// names one process, so a recycled pid is another subject to polkit.
    start_time: u64,
    uid: u32,
}

impl Asker {
    /// This process: the app, whose engine runs in-process.
    pub fn this_process() -> Option<Asker> {
        Asker::peer(std::process::id())
    }

    /// Whether it is this process (the app asking for itself).
    pub(crate) fn is_this_process(&self) -> bool {
        self.pid == std::process::id()
    }

    /// The process at the other end of a socket connection, by the pid its peer credentials
    /// gave. Its user is the engine's: the socket admits no other (`check_peer`).
    pub(crate) fn peer(pid: u32) -> Option<Asker> {
        Some(Asker {
            pid,
            start_time: postern_supervisor::process_start_time(pid)?,
            uid: current_uid(),
        })
    }
}

/// What the OS answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The person authenticated.
    Allowed,
    /// The authentication failed (a wrong password).
    Denied,
    /// The person closed the dialog.
    Dismissed,
    /// No authentication agent could ask the person.
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "only polkit has agents")
    )]
    NoAgent,
    /// The OS could not be asked; the sentence says why.
    Unavailable(String),
}

// `ask(asker, act) -> Verdict` asks the OS to authenticate the person at `asker` for `act` (an
// act in words) and blocks until they answer (at most [`ANSWER_WITHIN`]). `available()` names
// the OS authentication this machine offers ("polkit", "LocalAuthentication"), or says why
// there is none, without showing a dialog (polkit's answer is kept for a few seconds: status
// asks often).
#[cfg(target_os = "macos")]
pub(crate) use local_auth::ask;
#[cfg(target_os = "macos")]
pub use local_auth::available;
#[cfg(target_os = "linux")]
pub(crate) use polkit::ask;
#[cfg(target_os = "linux")]
pub use polkit::available;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) use unsupported::ask;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub use unsupported::available;

/// How long the person has to answer the OS's dialog.
pub(crate) const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

/// The engine's user (the only one its socket admits).
fn current_uid() -> u32 {
    #[cfg(target_os = "linux")]
    return nix::unistd::getuid().as_raw();
    // LocalAuthentication asks for no process: the uid is not used there.
    #[cfg(not(target_os = "linux"))]
    0
}

#[cfg(target_os = "linux")]
mod polkit;

#[cfg(target_os = "macos")]
mod local_auth;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod unsupported {
    use super::{Asker, Verdict};

    const NONE: &str = "this platform has no OS authentication Postern can use";

    pub(crate) fn ask(_: &Asker, _: &str) -> Verdict {
        Verdict::Unavailable(NONE.into())
    }

    pub fn available() -> Result<&'static str, String> {
        Err(NONE.into())
    }
}
