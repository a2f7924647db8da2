//! Identifying the agent behind a shim, and a process's ancestry, from the process table
//! ([`crate::table`]: procfs on Linux, libproc and `sysinfo` on macOS, `sysinfo` elsewhere).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use postern_domain::AgentIdentity;

use crate::DigestCache;
use crate::table::{self, cmdline, exe};

/// How many ancestors are walked looking for the agent.
const MAX_DEPTH: usize = 16;

/// The agent that launched the shim with process id `shim_pid`: the first ancestor whose
/// executable is not the shim's. `None` when the process table cannot say (the shim
/// already exited, or its entry is not readable).
pub fn identify_agent(shim_pid: u32, cache: &DigestCache) -> Option<AgentIdentity> {
    let shim = table::read(shim_pid)?;
    let shim_exe = exe(shim_pid);
    let mut current = shim.ppid;
    let mut chain = vec![shim.name.clone()];
    for _ in 0..MAX_DEPTH {
        if current <= 1 {
            return None;
        }
        let proc = table::read(current)?;
        let this_exe = exe(current);
        if this_exe.is_some() && this_exe == shim_exe && cmdline(current).iter().any(|a| a == "mcp")
        {
            // A shim launched by a shim: keep walking. (The same executable running anything
            // else, `postern demo` for one, is an agent like any other.)
            chain.insert(0, proc.name.clone());
            current = proc.ppid;
            continue;
        }
        chain.insert(0, proc.name.clone());
        if proc.ppid > 1
            && let Some(parent) = table::read(proc.ppid)
        {
            chain.insert(0, parent.name);
        }
        let executable = this_exe.and_then(|path| cache.artifact(&path).ok());
        let cwd = table::cwd(current);
        return Some(AgentIdentity {
            pid: current,
            start_time: proc.start_time,
            executable,
            chain,
            cwd,
        });
    }
    None
}

/// One process of an ancestry: who it is and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ancestor {
    /// Its process id.
    pub pid: u32,
    /// Its start time (with the pid, the process's identity).
    pub start_time: u64,
    /// Its executable, when readable.
    pub exe: Option<PathBuf>,
    /// Its command line.
    pub args: Vec<String>,
}

impl Ancestor {
    /// Whether it is a `postern mcp` shim: `postern`'s subcommand (after `--home DIR`, the
    /// one global option) is `mcp`. `postern server add mcp ...` is not one.
    pub fn is_shim(&self) -> bool {
        let postern = |s: &str| {
            Path::new(s)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("postern"))
        };
        let named = self.args.first().is_some_and(|a| postern(a))
            || self
                .exe
                .as_ref()
                .and_then(|e| e.to_str())
                .is_some_and(postern);
        let mut args = self.args.iter().skip(1);
        let subcommand = loop {
            match args.next().map(String::as_str) {
                Some("--home") => {
                    args.next();
                }
                Some(a) if a.starts_with("--home=") => {}
                other => break other,
            }
        };
        named && subcommand == Some("mcp")
    }
}

/// `pid` and its ancestors up to (not including) init, nearest first. Empty when the
/// process table cannot say.
pub fn ancestry(pid: u32) -> Vec<Ancestor> {
    let mut out = Vec::new();
    let mut current = pid;
    for _ in 0..=MAX_DEPTH * 4 {
        if current <= 1 {
            break;
        }
        let Some(proc) = table::read(current) else {
            break;
        };
        out.push(Ancestor {
            pid: current,
            start_time: proc.start_time,
            exe: exe(current),
            args: cmdline(current),
        });
        current = proc.ppid;
    }
    out
}

/// The nearest process of `chain` (a process and its ancestors, from [`ancestry`]) that is an
/// agent's or a `postern mcp` shim. The agents are the `connected` agent runs (pid and start
/// time) an engine knows of its own sessions; with none given (no engine answers), any process
/// that launched a shim. `None` when none is. The human check's first filter, for the engine
/// and the CLI alike: it catches honest mistakes, not an attacker (a process can leave the
/// tree).
pub fn agent_among<'a>(
    chain: &'a [Ancestor],
    connected: Option<&HashSet<(u32, u64)>>,
) -> Option<&'a Ancestor> {
    chain.iter().find(|a| {
        a.is_shim()
            || match connected {
                Some(agents) => agents.contains(&(a.pid, a.start_time)),
                None => launched_a_shim(a.pid),
            }
    })
}

/// Whether a child of `pid` is a `postern mcp` shim.
fn launched_a_shim(pid: u32) -> bool {
    table::children(pid).iter().any(|c| {
        Ancestor {
            pid: c.pid,
            start_time: c.start_time,
            exe: exe(c.pid),
            args: cmdline(c.pid),
        }
        .is_shim()
    })
}

/// The start time of `pid` (in the process table's unit, see [`crate::table`]), to tell a
/// reused pid apart.
pub fn process_start_time(pid: u32) -> Option<u64> {
    table::read(pid).map(|p| p.start_time)
}

/// A process held by its identity (pid and start time), to ask cheaply and often whether it
/// still runs: a session asks before each call it decides. On Linux it is a pidfd, opened once
/// and checked against the start time after opening: each question is one `poll`, never a
/// read of `/proc` (which walks the process's threads), and a reused pid can never answer for
/// it. Elsewhere, or where pidfds are refused, each question reads the process table.
#[derive(Debug)]
pub struct LiveProcess {
    pid: u32,
    start_time: u64,
    how: Held,
}

#[derive(Debug)]
enum Held {
    #[cfg(target_os = "linux")]
    Pidfd(std::os::fd::OwnedFd),
    /// The pid was another process's by the time it was opened.
    #[cfg(target_os = "linux")]
    Gone,
    Table,
}

impl LiveProcess {
    /// Holds the process `pid` that started at `start_time` (in the process table's unit).
    pub fn hold(pid: u32, start_time: u64) -> LiveProcess {
        // The start time is read from /proc, the pidfd opened in this process's pid
        // namespace: they name the same process only when /proc is this namespace's.
        #[cfg(target_os = "linux")]
        let own_proc = std::fs::read_link("/proc/self")
            .is_ok_and(|me| me.as_os_str() == std::process::id().to_string().as_str());
        #[cfg(target_os = "linux")]
        let how = match rustix::process::Pid::from_raw(pid as i32)
            .filter(|_| own_proc)
            .map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()))
        {
            // Opened first, then compared: if the start time still matches, the pidfd is
            // that process's.
            Some(Ok(fd)) if process_start_time(pid) == Some(start_time) => Held::Pidfd(fd),
            Some(Ok(_)) | Some(Err(rustix::io::Errno::SRCH)) => Held::Gone,
            _ => Held::Table,
        };
        #[cfg(not(target_os = "linux"))]
        let how = Held::Table;
        LiveProcess {
            pid,
            start_time,
            how,
        }
    }

    /// Whether the process still runs (a process that exited and awaits its parent does not).
    pub fn runs(&self) -> bool {
        match &self.how {
            #[cfg(target_os = "linux")]
            Held::Pidfd(fd) => {
                use rustix::event::{PollFd, PollFlags, Timespec, poll};
                let mut fds = [PollFd::new(fd, PollFlags::IN)];
                let now = Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // Readable once it has exited.
                match poll(&mut fds, Some(&now)) {
                    Ok(ready) => ready == 0,
                    Err(_) => process_start_time(self.pid) == Some(self.start_time),
                }
            }
            #[cfg(target_os = "linux")]
            Held::Gone => false,
            Held::Table => process_start_time(self.pid) == Some(self.start_time),
        }
    }
}

/// Whether a debugger is attached to this process (libproc's `PROC_FLAG_TRACED`); `None`
/// when the process table cannot say.
#[cfg(target_os = "macos")]
pub fn debugger_attached() -> Option<bool> {
    table::is_traced(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_process_runs_until_it_exits_and_its_pid_answers_for_no_other() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn");
        let start = process_start_time(child.id()).expect("start time");
        let held = LiveProcess::hold(child.id(), start);
        assert!(held.runs());
        child.kill().expect("kill");
        // Exited but not yet reaped: it no longer runs.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!held.runs(), "a process that exited still runs: {held:?}");
        child.wait().expect("reap");
        assert!(!held.runs());
        // A start time that is not the pid's: another process, never this one.
        let me = std::process::id();
        let other = LiveProcess::hold(me, process_start_time(me).expect("own") + 1);
        assert!(!other.runs());
        assert!(LiveProcess::hold(me, process_start_time(me).expect("own")).runs());
    }

    #[test]
    fn the_agent_is_the_first_ancestor_that_is_not_the_shim() {
        // This test process plays the agent; `sleep` plays a shim it launched.
        let mut shim = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn");
        let cache = DigestCache::new();
        let agent = identify_agent(shim.id(), &cache).expect("identified");
        let _ = shim.kill();
        let _ = shim.wait();
        assert_eq!(agent.pid, std::process::id());
        assert_eq!(
            Some(agent.start_time),
            process_start_time(std::process::id())
        );
        let me = std::env::current_exe().expect("exe");
        assert_eq!(
            agent.executable.as_ref().map(|a| a.path.clone()),
            std::fs::canonicalize(me).ok()
        );
        assert_eq!(agent.chain.last().map(String::as_str), Some("sleep"));
        assert!(agent.chain.len() >= 2, "{:?}", agent.chain);
    }

    #[test]
    fn ancestry_runs_from_the_process_up_and_spots_shims() {
        let me = std::process::id();
        let chain = ancestry(me);
        assert_eq!(chain.first().map(|a| a.pid), Some(me));
        assert!(chain.len() >= 2, "{chain:?}");
        assert!(chain.iter().all(|a| !a.is_shim()), "{chain:?}");
        let shim = Ancestor {
            pid: 10,
            start_time: 1,
            exe: Some("/usr/local/bin/postern".into()),
            args: vec![
                "postern".into(),
                "--home".into(),
                "/h".into(),
                "mcp".into(),
                "time".into(),
            ],
        };
        assert!(shim.is_shim());
        let cli = Ancestor {
            args: vec!["postern".into(), "approve".into(), "X".into()],
            ..shim.clone()
        };
        assert!(!cli.is_shim());
        // A server labelled `mcp` is configured by the CLI, not served by a shim.
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let add = Ancestor {
            args: words(&["postern", "server", "add", "mcp", "--", "x"]),
            ..shim.clone()
        };
        assert!(!add.is_shim());
        let equals = Ancestor {
            args: words(&["postern", "--home=/h", "mcp", "time"]),
            ..shim.clone()
        };
        assert!(equals.is_shim());
    }

    #[test]
    fn a_vanished_process_is_unidentified() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        // Reaped: its process table entry is gone.
        assert!(identify_agent(pid, &DigestCache::new()).is_none());
    }
}
