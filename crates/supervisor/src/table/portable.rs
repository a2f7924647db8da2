//! The process table through the `sysinfo` crate, for systems without procfs. On macOS it
//! lists children and reads executables, command lines and working directories; libproc reads
//! the entries themselves (sysinfo's start time is in whole seconds). Each question refreshes
//! only the process it is about.

use std::path::PathBuf;

use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};

use super::{Child, Proc};

/// The table's entry for `pid`, or `None` when it has none (gone, or not ours to read).
#[cfg_attr(
    target_os = "macos",
    expect(dead_code, reason = "macOS reads entries with libproc")
)]
pub(crate) fn read(pid: u32) -> Option<Proc> {
    with_process(pid, ProcessRefreshKind::nothing(), |p| Proc {
        name: p.name().to_string_lossy().into_owned(),
        ppid: p.parent().map_or(0, Pid::as_u32),
        start_time: p.start_time(),
    })
}

/// The executable `pid` runs, when readable.
pub(crate) fn exe(pid: u32) -> Option<PathBuf> {
    let kind = ProcessRefreshKind::nothing().with_exe(UpdateKind::Always);
    with_process(pid, kind, |p| p.exe().map(PathBuf::from)).flatten()
}

/// The command line of `pid` (empty when unreadable).
pub(crate) fn cmdline(pid: u32) -> Vec<String> {
    let kind = ProcessRefreshKind::nothing().with_cmd(UpdateKind::Always);
    with_process(pid, kind, |p| {
        p.cmd()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    })
    .unwrap_or_default()
}

/// The working directory of `pid`, when readable.
pub(crate) fn cwd(pid: u32) -> Option<PathBuf> {
    let kind = ProcessRefreshKind::nothing().with_cwd(UpdateKind::Always);
    with_process(pid, kind, |p| p.cwd().map(PathBuf::from)).flatten()
}

/// Every live child of `parent` (this one reads the whole table).
pub(crate) fn children(parent: u32) -> Vec<Child> {
    let mut system = System::new();
    system.refresh_processes_specifics(ProcessesToUpdate::All, true, ProcessRefreshKind::nothing());
    system
        .processes()
        .iter()
        .filter(|(_, p)| {
            p.parent().map(Pid::as_u32) == Some(parent) && p.status() != ProcessStatus::Zombie
        })
        .map(|(pid, p)| Child {
            pid: pid.as_u32(),
            start_time: p.start_time(),
            name: p.name().to_string_lossy().into_owned(),
        })
        .collect()
}

/// `f` of `pid`'s entry, refreshed with `kind`.
fn with_process<T>(
    pid: u32,
    kind: ProcessRefreshKind,
    f: impl FnOnce(&sysinfo::Process) -> T,
) -> Option<T> {
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, kind);
    system.process(pid).map(f)
}
