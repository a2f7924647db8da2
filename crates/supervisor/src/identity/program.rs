//! Finding what runs: the program as `execvp` resolves it, the `#!` line of a script, the
//! entry file among the arguments, the runtime's kind and version, a Python virtual
//! environment.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{INTERPRETERS, IdentityError, PACKAGE_RUNNERS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Interpreter,
    PackageRunner,
    Shell,
    Binary,
}

/// The virtual environment a Python interpreter at `interpreter` (as launched, before
/// symlinks are followed: a venv's `bin/python` links to the system's) belongs to: the
/// directory above its `bin/` holding a `pyvenv.cfg`.
pub(super) fn python_environment(interpreter: &Path) -> Option<PathBuf> {
    let name = interpreter.file_name()?.to_str()?;
    if !name.starts_with("python") {
        return None;
    }
    let bin = interpreter.parent()?;
    let root = bin.parent()?;
    (bin.file_name()? == "bin" && root.join("pyvenv.cfg").is_file()).then(|| root.to_owned())
}

pub(super) fn program_kind(path: &Path) -> Kind {
    let name = path.file_name().and_then(OsStr::to_str).unwrap_or_default();
    // python3.11 -> python, node20 -> node; python3.7m, python3.13t (free-threaded) and
    // python3.13d (debug) carry their build's flags after the version.
    let flagless = name.trim_end_matches(['m', 't', 'd']);
    let name = match flagless.ends_with(|c: char| c.is_ascii_digit()) {
        true => flagless,
        false => name,
    };
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if INTERPRETERS.contains(&base) {
        Kind::Interpreter
    } else if PACKAGE_RUNNERS.contains(&base) {
        Kind::PackageRunner
    } else if matches!(base, "sh" | "bash" | "dash" | "zsh" | "fish") {
        Kind::Shell
    } else {
        Kind::Binary
    }
}

/// Resolves a program name as `execvp` would: a path (relative to the working
/// directory) when it contains a slash, else the first executable on PATH.
pub(super) fn resolve_program(
    program: &str,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, IdentityError> {
    if program.contains('/') {
        let path = cwd.join(program);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(IdentityError::NotFound {
                program: program.to_owned(),
                where_: format!(" (resolved to {})", path.display()),
            })
        };
    }
    path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| {
            if dir.is_absolute() {
                dir.join(program)
            } else {
                cwd.join(dir).join(program)
            }
        })
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| IdentityError::NotFound {
            program: program.to_owned(),
            where_: " on PATH".to_owned(),
        })
}

pub(super) fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A regular file, opened for reading without blocking: a FIFO (which a confined server may
/// make in its own directory, or put in place of a file) would wait in `open` for a writer
/// that never comes, and the capture with it. `None` for anything else.
pub(super) fn open_regular(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// A regular file's first `max` bytes as text ([`open_regular`]); `None` if it cannot be
/// read or is not UTF-8.
pub(super) fn read_text(path: &Path, max: u64) -> Option<String> {
    let mut text = String::new();
    open_regular(path)?
        .take(max)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The interpreter named by a `#!` line (`/usr/bin/env node` gives `node`).
pub(super) fn shebang(path: &Path) -> Option<String> {
    let mut head = [0u8; 256];
    let n = open_regular(path)?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?.trim();
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name() == Some(OsStr::new("env")) {
        words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .map(str::to_owned)
    } else {
        Some(first.to_owned())
    }
}

/// The first argument naming an existing file, skipping options (and `run` for uv).
pub(super) fn entry_argument(args: &[String], cwd: &Path) -> Option<PathBuf> {
    args.iter()
        .filter(|a| !a.starts_with('-') && a.as_str() != "run")
        .map(|a| cwd.join(a))
        .find(|p| p.is_file())
}

/// What a probe may print: a version line is a few dozen bytes.
const PROBE_OUTPUT: u64 = 64 * 1024;
/// How long a probe may take, its output read to its end included.
const PROBE_TIME: Duration = Duration::from_secs(5);
/// How often a probe whose output has not ended is asked whether it exited.
const EXIT_CHECK: Duration = Duration::from_millis(10);

/// The first line `command` (an interpreter asked `--version`, perhaps inside a sandbox)
/// prints, within five seconds: `node v20.1.0` for a bare `v20.1.0`.
pub(super) fn run_version(command: std::process::Command, interpreter: &Path) -> Option<String> {
    let [stdout, stderr] = run_bounded(command)?;
    let text = if stdout.is_empty() { stderr } else { stdout };
    let line = String::from_utf8_lossy(&text)
        .lines()
        .next()?
        .trim()
        .to_owned();
    let name = interpreter
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or_default();
    Some(if line.starts_with('v') {
        format!("{name} {line}")
    } else {
        line
    })
}

/// Runs `command` (standard input closed) in a process group of its own, for at most
/// [`PROBE_TIME`]: its standard output and error (up to [`PROBE_OUTPUT`] each) once both are
/// read to their end, or once the process has exited and what it left in them is read (a
/// child that left its group, `setsid`, and holds them open is not waited for). Then, or at
/// the deadline, whatever still runs in its group is killed, before the process is reaped;
/// `None` when it could not start or its output did not end in time. One thread, no helper:
/// the pipes are polled, and the process is asked whether it exited without being reaped.
fn run_bounded(mut command: std::process::Command) -> Option<[Vec<u8>; 2]> {
    use std::os::fd::OwnedFd;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::time::Instant;

    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .ok()?;
    let pid = Pid::from_child(&child);
    let group = nix::unistd::Pid::from_raw(pid.as_raw_nonzero().get());
    let mut pipes: [Option<OwnedFd>; 2] = [
        child.stdout.take().map(OwnedFd::from),
        child.stderr.take().map(OwnedFd::from),
    ];
    let mut out = [Vec::new(), Vec::new()];
    let deadline = Instant::now() + PROBE_TIME;
    // It exited (still unreaped, so its id names no other group) and its group was ended:
    // what it wrote is in the pipes, and whoever still holds them left the group.
    let mut exited = false;
    let ended = loop {
        let open: Vec<usize> = (0..2).filter(|&i| pipes[i].is_some()).collect();
        if open.is_empty() {
            break true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break false;
        }
        let wait = if exited {
            Duration::ZERO
        } else {
            left.min(EXIT_CHECK)
        };
        let mut fds: Vec<PollFd<'_>> = open
            .iter()
            .filter_map(|&i| pipes[i].as_ref())
            .map(|fd| PollFd::new(fd, PollFlags::IN))
            .collect();
        let Ok(timeout) = Timespec::try_from(wait) else {
            break false;
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) if exited => break true,
            Ok(0) => {
                let done = waitid(
                    WaitId::Pid(pid),
                    WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
                );
                if matches!(done, Ok(Some(_))) {
                    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                    exited = true;
                }
                continue;
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break false,
        }
        let ready: Vec<usize> = open
            .iter()
            .zip(&fds)
            .filter(|(_, fd)| !fd.revents().is_empty())
            .map(|(&i, _)| i)
            .collect();
        drop(fds);
        for i in ready {
            let Some(fd) = &pipes[i] else { continue };
            let room = usize::try_from(PROBE_OUTPUT).unwrap_or(usize::MAX) - out[i].len();
            let mut buf = vec![0; room.min(8192)];
            match rustix::io::read(fd, &mut buf) {
                Ok(n) if n > 0 && n < room => out[i].extend_from_slice(&buf[..n]),
                Ok(n) => {
                    // Its end, or all it may print.
                    out[i].extend_from_slice(&buf[..n]);
                    pipes[i] = None;
                }
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                Err(_) => pipes[i] = None,
            }
        }
    };
    drop(pipes);
    // The group is ended while its leader is not yet reaped, so its id names no other.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    ended.then_some(out)
}
