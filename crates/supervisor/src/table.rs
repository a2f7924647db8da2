//! The process table, as the rest of the crate reads it: a process's name, parent and start
//! time, its executable, command line and working directory, and a process's children.
//!
//! Two backends answer the same questions. On Linux, [`procfs`] reads `/proc` directly (the
//! start time in clock ticks since boot, exact enough to tell a reused pid apart). Elsewhere
//! (macOS), [`portable`] asks the `sysinfo` crate (the start time in seconds since the epoch).
//! A start time is only ever compared with another from the same backend on the same machine.
//! Both are tested on Linux against the same real processes.

#[cfg(any(test, not(target_os = "linux")))]
mod portable;
#[cfg(target_os = "linux")]
mod procfs;
#[cfg(all(test, target_os = "linux"))]
mod tests;

#[cfg(not(target_os = "linux"))]
pub(crate) use portable::{children, cmdline, cwd, exe, read};
#[cfg(target_os = "linux")]
pub(crate) use procfs::{children, cmdline, cwd, exe, read};

/// What one entry of the process table says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proc {
    /// Its command name (the kernel's short name: at most 15 bytes on Linux).
    pub name: String,
    /// Its parent's process id (0 when it has none).
    pub ppid: u32,
    /// When it started, in the backend's unit; with the pid, the process's identity.
    pub start_time: u64,
}

/// A live (not zombie) child of a process: its pid, start time and command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Child {
    /// Its process id.
    pub pid: u32,
    /// Its start time, in the backend's unit.
    pub start_time: u64,
    /// Its command name.
    pub name: String,
}
