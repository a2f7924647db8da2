//! One server process: spawn, stderr capture, graceful stop, exit reporting.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use postern_domain::ServerConfig;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

/// How long a server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Environment values shorter than this are not treated as secrets in stderr (`TZ=UTC`).
const MIN_REDACTED: usize = 6;
/// How many stderr lines are kept for error messages.
const STDERR_TAIL: usize = 20;

/// A freshly launched server: its pipes and the handle that supervises it.
#[derive(Debug)]
pub struct Spawned {
    /// The server's stdin: MCP messages to it.
    pub stdin: ChildStdin,
    /// The server's stdout: MCP messages from it.
    pub stdout: ChildStdout,
    /// The supervising handle.
    pub handle: ProcessHandle,
}

/// Supervises one running server process. Dropping the handle stops the process.
#[derive(Debug)]
pub struct ProcessHandle {
    pid: u32,
    exit: watch::Receiver<Option<ExitReport>>,
    stop: Option<oneshot::Sender<()>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// Waits for one process's exit; see [`ProcessHandle::waiter`].
#[derive(Debug)]
pub struct ExitWaiter(watch::Receiver<Option<ExitReport>>);

impl ExitWaiter {
    /// Resolves when the process has exited.
    pub async fn wait(mut self) -> ExitReport {
        match self.0.wait_for(Option::is_some).await {
            Ok(report) => report.unwrap_or(ExitReport::Unknown),
            Err(_) => ExitReport::Unknown,
        }
    }
}

/// How a server process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReport {
    /// It exited with this status code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// Waiting on it failed; it is gone either way.
    Unknown,
}

/// A server that could not be launched.
#[derive(Debug, thiserror::Error)]
#[error("cannot start `{program}`: {source}")]
pub struct SpawnError {
    /// The program that was to run.
    pub program: String,
    /// Why the operating system refused.
    #[source]
    pub source: std::io::Error,
}

/// Launches `config`'s command in a new process group with piped stdio.
pub fn spawn(config: &ServerConfig) -> Result<Spawned, SpawnError> {
    spawn_program(
        Path::new(config.program()),
        config.args(),
        config,
        Environment::Engine { released: &[] },
    )
}

/// The environment a launched process starts with.
#[derive(Debug, Clone, Copy)]
pub enum Environment<'a> {
    /// The engine's, with the server's configured variables and `released` on top.
    Engine {
        /// What is released to this launch (later ones win).
        released: &'a [(&'a str, &'a str)],
    },
    /// A confined launch's: exactly bubblewrap's, which sets the rest inside
    /// ([`crate::sandbox::ConfinedEnv`]) and holds what is `released`.
    Confined {
        /// bubblewrap's whole environment.
        bubblewrap: &'a [(std::ffi::OsString, std::ffi::OsString)],
        /// What of it is released to this launch.
        released: &'a [(&'a str, &'a str)],
    },
}

impl Environment<'_> {
    /// What is released to the launch: kept out of its stderr's log.
    fn released(&self) -> &[(&str, &str)] {
        match self {
            Self::Engine { released } | Self::Confined { released, .. } => released,
        }
    }
}

/// Like [`spawn`], with the program already resolved (so what runs is what was hashed), its
/// arguments (the server's own, or a sandbox's followed by the server's command) and its
/// environment.
pub fn spawn_program<A: AsRef<std::ffi::OsStr>>(
    program: &Path,
    args: &[A],
    config: &ServerConfig,
    environment: Environment<'_>,
) -> Result<Spawned, SpawnError> {
    let mut command = Command::new(program);
    match environment {
        Environment::Engine { released } => {
            command
                .envs(
                    config
                        .env
                        .iter()
                        .map(|v| (v.name.as_str(), v.value.as_str())),
                )
                .envs(released.iter().copied());
        }
        Environment::Confined { bubblewrap, .. } => {
            command.env_clear().envs(bubblewrap.iter().cloned());
        }
    }
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &config.cwd {
        command.current_dir(dir);
    }
    let spawn_error = |source| SpawnError {
        program: config.program().to_owned(),
        source,
    };
    let mut child = command.spawn().map_err(spawn_error)?;
    let pid = child
        .id()
        .ok_or_else(|| spawn_error(std::io::Error::other("exited at once")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(spawn_error(std::io::Error::other("stdio pipes missing")));
    };

    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
    // Values handed to the server (--env) never reach a log through its stderr.
    let secrets: Vec<String> = config
        .env
        .iter()
        .map(|v| v.value.as_str())
        .chain(environment.released().iter().map(|(_, value)| *value))
        .filter(|v| v.len() >= MIN_REDACTED)
        .map(str::to_owned)
        .collect();
    tokio::spawn(capture_stderr(
        config.label.to_string(),
        stderr,
        secrets,
        Arc::clone(&tail),
    ));

    let (exit_tx, exit) = watch::channel(None);
    let (stop_tx, stop_rx) = oneshot::channel();
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            _ = stop_rx => {
                signal_group(pid, Signal::SIGTERM);
                match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        signal_group(pid, Signal::SIGKILL);
                        child.wait().await
                    }
                }
            }
        };
        // Whatever the server left behind in its group goes with it.
        signal_group(pid, Signal::SIGKILL);
        let _ = exit_tx.send(Some(ExitReport::from_status(status.ok())));
    });

    tracing::info!(server = %config.label, pid, "server started");
    Ok(Spawned {
        stdin,
        stdout,
        handle: ProcessHandle {
            pid,
            exit,
            stop: Some(stop_tx),
            stderr: tail,
        },
    })
}

impl ProcessHandle {
    /// The process id of the server (for display: pids are reused, never an identity).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the process has exited, and says how.
    pub async fn exited(&self) -> ExitReport {
        self.waiter().wait().await
    }

    /// A waiter for the exit that does not borrow the handle.
    pub fn waiter(&self) -> ExitWaiter {
        ExitWaiter(self.exit.clone())
    }

    /// Asks the process to stop: SIGTERM to its group, SIGKILL after a grace period.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// The last lines the server wrote to stderr, oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for ProcessHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

impl ExitReport {
    fn from_status(status: Option<ExitStatus>) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Self::Code(code),
                (None, Some(sig)) => Self::Signal(sig),
                (None, None) => Self::Unknown,
            },
            None => Self::Unknown,
        }
    }
}

impl fmt::Display for ExitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(code) => write!(f, "exit status {code}"),
            Self::Signal(sig) => match Signal::try_from(*sig) {
                Ok(s) => write!(f, "killed by {s}"),
                Err(_) => write!(f, "killed by signal {sig}"),
            },
            Self::Unknown => f.write_str("unknown exit status"),
        }
    }
}

fn signal_group(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        // ESRCH (already gone) is the common, harmless case.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

async fn capture_stderr(
    label: String,
    stderr: tokio::process::ChildStderr,
    secrets: Vec<String>,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = BufReader::new(stderr).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                let line = redact(line, &secrets);
                tracing::debug!(target: "postern::server_stderr", server = %label, "{line}");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
            Ok(None) => break,
            // Not UTF-8: skip the line rather than lose the rest.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => continue,
            Err(_) => break,
        }
    }
}

/// Replaces every occurrence of a secret value with `<redacted>`.
fn redact(mut line: String, secrets: &[String]) -> String {
    for secret in secrets {
        if line.contains(secret.as_str()) {
            line = line.replace(secret.as_str(), "<redacted>");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn environment_values_are_redacted_from_captured_stderr() {
        let mut config = sh("echo \"token is $API_TOKEN, zone $TZ\" >&2");
        config
            .env
            .push("API_TOKEN=hunter2-canary".parse().expect("env"));
        config.env.push("TZ=UTC".parse().expect("env"));
        let Spawned { handle, .. } = spawn(&config).expect("spawn");
        handle.exited().await;
        for _ in 0..50 {
            if !handle.stderr_tail().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Values too short to be secrets (a zone name) stay readable.
        assert_eq!(handle.stderr_tail(), ["token is <redacted>, zone UTC"]);
    }

    fn sh(script: &str) -> ServerConfig {
        ServerConfig::new(
            "t".parse().expect("label"),
            vec!["sh".into(), "-c".into(), script.into()],
            None,
            vec!["GREETING=hello".parse().expect("env")],
        )
        .expect("config")
    }

    #[tokio::test]
    async fn pipes_env_and_exit_status_reach_the_supervisor() {
        let Spawned {
            mut stdin,
            mut stdout,
            handle,
        } = spawn(&sh(
            "read line; echo \"$GREETING $line\"; echo oops >&2; exit 3",
        ))
        .expect("spawn");
        stdin.write_all(b"world\n").await.expect("write");
        let mut out = String::new();
        stdout.read_to_string(&mut out).await.expect("read");
        assert_eq!(out, "hello world\n");
        assert_eq!(handle.exited().await, ExitReport::Code(3));
        // stderr capture runs concurrently; give it a moment to drain.
        for _ in 0..50 {
            if !handle.stderr_tail().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(handle.stderr_tail(), ["oops"]);
    }

    #[tokio::test]
    async fn stop_ends_the_whole_process_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("grandchild.pid");
        let script = format!("sleep 60 & echo $! > {}; wait", marker.display());
        let Spawned { mut handle, .. } = spawn(&sh(&script)).expect("spawn");
        let grandchild = loop {
            if let Ok(pid) = std::fs::read_to_string(&marker)
                && let Ok(pid) = pid.trim().parse::<i32>()
            {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        handle.stop();
        assert_eq!(handle.exited().await, ExitReport::Signal(15));
        // The grandchild (the "real server" behind a wrapper) is gone too (signals are
        // delivered asynchronously: allow it a moment to die).
        let is_gone = || {
            nix::sys::signal::kill(Pid::from_raw(grandchild), None).is_err()
                || std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        };
        let mut gone = is_gone();
        for _ in 0..100 {
            if gone {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            gone = is_gone();
        }
        assert!(gone, "grandchild {grandchild} survived the stop");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_clear_error() {
        let config = ServerConfig::new(
            "t".parse().expect("label"),
            vec!["/nonexistent/server".into()],
            None,
            vec![],
        )
        .expect("config");
        let err = spawn(&config).expect_err("must fail");
        assert!(
            err.to_string()
                .starts_with("cannot start `/nonexistent/server`: "),
            "{err}"
        );
    }
}
