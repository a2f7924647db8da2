//! The process table, as the rest of the crate reads it: a process's name, parent and start
//! time, its executable, command line and working directory, and a process's children.
//!
//! On Linux, [`procfs`] reads `/proc` directly (the start time in clock ticks since boot, exact
//! enough to tell a reused pid apart). On macOS, [`libproc`] reads each entry with
//! `proc_pidinfo` (the start time in microseconds since the epoch) and [`portable`] (the
//! `sysinfo` crate) lists children and reads executables, command lines and working
//! directories. Elsewhere [`portable`] answers everything (the start time in whole seconds).
//! A start time is only ever compared with another from the same backend on the same machine.
//! procfs and portable are tested on Linux against the same real processes; libproc's
//! conversions are tested everywhere, its call into the kernel only on a Mac.

#[cfg(any(test, target_os = "macos"))]
mod libproc;
#[cfg(any(test, not(target_os = "linux")))]
mod portable;
#[cfg(target_os = "linux")]
mod procfs;
#[cfg(all(test, target_os = "linux"))]
mod tests;

#[cfg(target_os = "macos")]
pub(crate) use libproc::{children, is_traced, read};
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) use portable::{children, read};
#[cfg(not(target_os = "linux"))]
pub(crate) use portable::{cmdline, cwd, exe};
#[cfg(target_os = "linux")]
pub(crate) use procfs::{children, cmdline, cwd, exe, read};

/// What one entry of the process table says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proc {
    /// Its command name (the kernel's short name: at most 15 bytes on Linux, 32 on macOS).
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
