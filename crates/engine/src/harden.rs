//! Keeps other processes of the user out of the engine's memory (issue 13). While the vault is
//! unlocked, its key and released credential values are in this process; every other process
//! of the same user could otherwise read them with a debugger or from a core dump.
//!
//! - Linux: `prctl(PR_SET_DUMPABLE, 0)`. The kernel then refuses ptrace attach from processes
//!   without `CAP_SYS_PTRACE` (whatever the Yama setting), makes `/proc/<pid>/mem`, `environ`
//!   and the like owned by root, and writes no core dump. Children are unaffected: `execve`
//!   makes a new program dumpable again, so MCP servers behave as before.
//! - macOS: `ptrace(PT_DENY_ATTACH)`, and a core-file limit of zero. Once denied, the kernel
//!   refuses every later ptrace attach to this process (and signals the tracer): LLDB's
//!   debugserver attaches that way, and dtrace stops seeing the process too. Memory can
//!   otherwise only be read through the process's Mach task port (`task_for_pid`), which macOS
//!   gives another unprivileged process only with an administrator's authorization (taskgated)
//!   or Developer Tools access the user turned on, and never for an app signed with the
//!   hardened runtime and without the `get-task-allow` entitlement; the hardened runtime also
//!   makes dyld ignore `DYLD_INSERT_LIBRARIES` for it. A process of the user can send the engine
//!   `SIGSEGV`; with no core-file limit (a shell's `ulimit -c unlimited`) the kernel would
//!   write the engine's memory to `/cores`, so both limits are set to zero (children inherit
//!   it: MCP servers launched by the engine write no core files either). When a debugger is
//!   already attached at start (a developer's LLDB), `PT_DENY_ATTACH` would end the process;
//!   it is left attached and a warning logged, as Linux leaves an existing tracer. Not run on
//!   a Mac yet (docs/app.md says so).
//!
//! The one `unsafe` call (`ptrace`, which no safe binding offers for `PT_DENY_ATTACH`) is in
//! [`macos`].

/// Makes this process undumpable and untraceable by other processes of the user, where the
/// platform allows it. Call early in the engine's process (`postern daemon`, the app) and in
/// the CLI before it reads a passphrase.
pub fn protect_process() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("could not make the process undumpable: {e}");
    }
    #[cfg(target_os = "macos")]
    macos::protect();
}

/// Whether this process is protected (Linux: not dumpable; macOS: attaching denied).
pub fn is_protected() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::get_dumpable().is_ok_and(|dumpable| !dumpable)
    }
    #[cfg(target_os = "macos")]
    {
        macos::DENIED.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        false
    }
}

#[cfg(target_os = "macos")]
#[allow(
    unsafe_code,
    reason = "ptrace(PT_DENY_ATTACH) has no safe binding (nix's ptrace Request lacks it)"
)]
mod macos {
    use std::sync::atomic::{AtomicBool, Ordering};

    use nix::errno::Errno;
    use nix::sys::resource::{Resource, setrlimit};

    /// Set once `PT_DENY_ATTACH` succeeded (the kernel offers no way to read it back).
    pub(super) static DENIED: AtomicBool = AtomicBool::new(false);

    pub(super) fn protect() {
        if let Err(e) = setrlimit(Resource::RLIMIT_CORE, 0, 0) {
            tracing::warn!("could not turn off core files: {e}");
        }
        match postern_supervisor::debugger_attached() {
            Some(false) => match deny_attach() {
                Ok(()) => DENIED.store(true, Ordering::Relaxed),
                Err(e) => tracing::warn!("could not refuse debuggers: {e}"),
            },
            Some(true) => tracing::warn!(
                "a debugger is attached to this process; it stays attached (refusing it would end the process)"
            ),
            None => tracing::warn!("cannot tell whether a debugger is attached; none refused"),
        }
    }

    /// `ptrace(PT_DENY_ATTACH)`: no later ptrace attach to this process succeeds.
    fn deny_attach() -> Result<(), Errno> {
        // SAFETY: PT_DENY_ATTACH reads neither the address nor the data argument; it only sets
        // a flag on the calling process (pid 0). This process is not traced (checked just
        // before), so the kernel does not end it.
        let done = unsafe { libc::ptrace(libc::PT_DENY_ATTACH, 0, std::ptr::null_mut(), 0) };
        Errno::result(done).map(drop)
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "macos")))]
mod tests {
    use super::*;

    #[test]
    fn the_process_is_protected_once_asked() {
        protect_process();
        assert!(is_protected());
        #[cfg(target_os = "macos")]
        assert_eq!(
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_CORE),
            Ok((0, 0)),
            "no core files"
        );
    }
}
