//! Keeps other processes of the user out of the engine's memory (issue 13). While the vault is
//! unlocked, its key and released credential values are in this process; every other process
//! of the same user could otherwise read them with ptrace, `/proc/<pid>/mem` or a core dump.
//!
//! - Linux: `prctl(PR_SET_DUMPABLE, 0)`. The kernel then refuses ptrace attach from processes
//!   without `CAP_SYS_PTRACE` (whatever the Yama setting), makes `/proc/<pid>/mem`, `environ`
//!   and the like owned by root, and writes no core dump. Children are unaffected: `execve`
//!   makes a new program dumpable again, so MCP servers behave as before.
//! - macOS: not done yet. The equivalent is `ptrace(PT_DENY_ATTACH)` plus the hardened
//!   runtime's refusal of `task_for_pid` for a signed app; it needs a signed build and is
//!   recorded as untested in docs/app.md.

/// Makes this process undumpable and untraceable by other processes of the user, where the
/// platform allows it. Call early in the engine's process (`postern daemon`, the app) and in
/// the CLI before it reads a passphrase.
pub fn protect_process() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("could not make the process undumpable: {e}");
    }
}

/// Whether this process is protected (Linux: not dumpable).
pub fn is_protected() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::get_dumpable().is_ok_and(|dumpable| !dumpable)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_process_is_undumpable_once_protected() {
        protect_process();
        assert!(is_protected());
    }
}
