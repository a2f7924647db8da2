//! The process table from Linux's procfs.

use std::path::{Path, PathBuf};

use super::{Child, Proc};

/// The `/proc/<pid>/stat` entry of `pid`, or `None` when it has none (gone, or no procfs).
pub(crate) fn read(pid: u32) -> Option<Proc> {
    stat(pid).map(|(proc, _)| proc)
}

/// The executable `pid` runs, when readable.
pub(crate) fn exe(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(Path::new("/proc").join(pid.to_string()).join("exe")).ok()
}

/// The command line of `pid` (empty when unreadable).
pub(crate) fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The working directory of `pid`, when readable.
pub(crate) fn cwd(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// Every live child of `parent`: the pids its threads' `children` files list (the kernel's own
/// list, a few reads however many processes run), each checked against its stat line; where
/// the kernel has no such files, every process's stat line.
pub(crate) fn children(parent: u32) -> Vec<Child> {
    let candidates: Vec<u32> = match listed_children(parent) {
        Some(pids) => pids,
        None => {
            let Ok(entries) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .collect()
        }
    };
    candidates
        .into_iter()
        .filter_map(|pid| {
            let (proc, state) = stat(pid)?;
            (proc.ppid == parent && state != 'Z').then_some(Child {
                pid,
                start_time: proc.start_time,
                name: proc.name,
            })
        })
        .collect()
}

/// The pids in `/proc/<parent>/task/*/children`; `None` when the kernel does not offer them
/// (built without `CONFIG_PROC_CHILDREN`) or `parent` is gone.
fn listed_children(parent: u32) -> Option<Vec<u32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{parent}/task"))
        .ok()?
        .flatten()
    {
        let listed = std::fs::read_to_string(task.path().join("children")).ok()?;
        pids.extend(
            listed
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    pids.sort_unstable();
    pids.dedup();
    Some(pids)
}

/// The stat line of `pid`, and its state letter.
fn stat(pid: u32) -> Option<(Proc, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may itself hold ") ": split at the last one.
    let (head, rest) = stat.rsplit_once(") ")?;
    let name = head.split_once(" (")?.1.to_owned();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... starttime(19)
    let state = fields.first()?.chars().next()?;
    let proc = Proc {
        name,
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    };
    Some((proc, state))
}
