//! A running Postern: a private temporary home, its configured servers, and `postern daemon`.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::binaries;
use crate::keychain::PrivateKeychain;
use crate::run_as::RunAs;
use crate::servers::ServerCommand;
use crate::tty;

/// How long the daemon may take to open its socket.
const DAEMON_READY: Duration = Duration::from_secs(30);
/// How long one [`Gate::scenario`] may take.
const SCENARIO_LIMIT: Duration = Duration::from_secs(120);

/// A Postern engine running in a fresh temporary home. Stopped (SIGTERM, then SIGKILL) and
/// its home deleted on drop. Its logs reach a failing test's output through
/// [`Gate::scenario`] (or, on a panic, from drop).
#[derive(Debug)]
pub struct Gate {
    daemon: Option<Child>,
    bin: PathBuf,
    home: PathBuf,
    logs: PathBuf,
    shims: AtomicUsize,
    /// Extra environment for the daemon (and so for the servers it launches).
    daemon_env: Vec<(OsString, OsString)>,
    /// The user every process of the gate runs as (the test's own when `None`), and its copy
    /// of `with_tty`.
    user: Option<(RunAs, PathBuf)>,
    // Dropped in this order, after the daemon has stopped: the keychain, then the directory.
    keychain: Option<PrivateKeychain>,
    _dir: TempDir,
}

impl Gate {
    /// Creates a home, configures `servers` (label, command) with `postern server add`, starts
    /// `postern daemon`, waits until its socket accepts connections, and sets session
    /// approval to `observe`: calls are admitted and journaled without a human. The data
    /// path's tests use this; `tests/authorization.rs` starts with [`Gate::start_prompting`].
    pub async fn start(servers: &[(&str, &ServerCommand)]) -> Result<Gate> {
        let gate = Self::start_prompting(servers).await?;
        gate.cli(["settings", "--session-mode", "observe"])?;
        Ok(gate)
    }

    /// [`Gate::start`] with the engine's defaults: every new agent run and call needs a
    /// human's approval (`postern approve`).
    pub async fn start_prompting(servers: &[(&str, &ServerCommand)]) -> Result<Gate> {
        Self::start_prompting_with_env(servers, &[]).await
    }

    /// [`Gate::start_prompting`] with extra environment variables for the daemon, which the
    /// servers it launches inherit (e.g. `SSL_CERT_FILE` naming a test CA).
    pub async fn start_prompting_with_env(
        servers: &[(&str, &ServerCommand)],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Result<Gate> {
        Self::start_prompting_as(servers, env, None).await
    }

    /// [`Gate::start_prompting_with_env`] with every process (the keychain, the daemon, the
    /// CLI, the agents' shims, the servers) run as `user`: the gate's directory is given to
    /// them and the binaries under test (`postern`, `with_tty`, the servers' programs) are
    /// copied into it.
    pub async fn start_prompting_as(
        servers: &[(&str, &ServerCommand)],
        env: &[(&str, &std::ffi::OsStr)],
        user: Option<RunAs>,
    ) -> Result<Gate> {
        let dir = tempfile::Builder::new()
            .prefix("postern-e2e-")
            .tempdir()
            .context("creating a temporary Postern home")?;
        let home = dir.path().join("home");
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs)?;
        let mut bin = binaries::postern()?;
        let mut servers: Vec<(&str, ServerCommand)> =
            servers.iter().map(|(l, s)| (*l, (*s).clone())).collect();
        let user = match user {
            None => None,
            Some(mut user) => {
                let bin_dir = dir.path().join("bin");
                bin = user.install(&bin, &bin_dir)?;
                let with_tty = user.install(&tty::with_tty()?, &bin_dir)?;
                for (_, server) in &mut servers {
                    server.program = user.install(&server.program, &bin_dir)?;
                }
                user.settle(dir.path())?;
                Some((user, with_tty))
            }
        };
        // Linux: a private Secret Service for this engine (see `keychain`); macOS: the
        // login keychain.
        let keychain = if cfg!(target_os = "linux") {
            let dir = dir.path().join("keychain");
            Some(PrivateKeychain::start_as(
                &dir,
                user.as_ref().map(|u| &u.0),
            )?)
        } else {
            None
        };
        let mut gate = Gate {
            daemon: None,
            bin,
            home,
            logs,
            shims: AtomicUsize::new(0),
            daemon_env: env
                .iter()
                .map(|(k, v)| (OsString::from(k), v.to_os_string()))
                .collect(),
            user,
            keychain,
            _dir: dir,
        };
        for (label, server) in &servers {
            gate.add_server(label, server)?;
        }
        gate.start_daemon().await?;
        // An engine starts locked; on a fresh home the person chooses a passphrase, which
        // unlocks it (`postern passphrase`, typed at the terminal).
        gate.cli(["passphrase"])?;
        Ok(gate)
    }

    /// The Postern home (`--home`).
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The engine's socket, which shims connect to.
    pub fn socket(&self) -> PathBuf {
        self.home.join("run/engine.sock")
    }

    /// The engine's status as JSON (crates/engine/src/api.rs `Status`), read from the
    /// socket as the CLI reads it: the `status` answer, `{"answer": {"status": {...}}}`.
    pub async fn status(&self) -> Result<serde_json::Value> {
        use postern_gateway::hello::ControlCommand;
        let line =
            postern_gateway::control::request(&self.socket(), ControlCommand::Status).await?;
        match line.get("answer").and_then(|a| a.get("status")) {
            Some(status) => Ok(status.clone()),
            None => bail!("the engine did not answer status: {line}"),
        }
    }

    /// The sandbox the running launch of `label` was made in, as its execution record names it
    /// (`null`: unconfined).
    pub async fn sandbox_of(&self, label: &str) -> Result<serde_json::Value> {
        let status = self.status().await?;
        status["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["server"] == label && s["serverPid"].is_u64())
            .map(|s| s["execution"]["sandbox"].clone())
            .with_context(|| format!("no running session of {label}: {status}"))
    }

    /// The `postern` executable under test.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Runs `postern --home H <args>` to completion, as the person at a terminal of their own
    /// (outside every agent's process tree), typing the passphrase where it is asked for;
    /// fails unless it exits 0. Returns stdout.
    pub fn cli<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let out = self.at_terminal(&args, None, tty::PASSPHRASE)?.output;
        self.stdout_of(&show(&args), out)
    }

    /// [`Gate::cli`] with `input` on stdin (a credential's value).
    pub fn cli_with_stdin(&self, args: &[&str], input: &str) -> Result<String> {
        let out = self.cli_output(args, input)?;
        self.stdout_of(&args.join(" "), out)
    }

    /// Runs `postern --home H <args>` with `input` on stdin and returns what it did, whether
    /// it succeeded or not (for the refusals and warnings a person would see).
    pub fn cli_output(&self, args: &[&str], input: &str) -> Result<std::process::Output> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        Ok(self
            .at_terminal(&args, Some(input), tty::PASSPHRASE)?
            .output)
    }

    /// `postern --home H <args>` at a terminal where `passphrase` is typed at every prompt:
    /// what it printed, and what the terminal showed.
    pub fn at_terminal(
        &self,
        args: &[OsString],
        input: Option<&str>,
        passphrase: &str,
    ) -> Result<tty::AtTerminal> {
        self.typing(args, input, tty::Typing::passphrase(passphrase))
    }

    /// `postern --home H <args>` at a terminal where the person types as `typing` says (the
    /// login password at polkit's prompt, say).
    pub fn typing(
        &self,
        args: &[OsString],
        input: Option<&str>,
        typing: tty::Typing,
    ) -> Result<tty::AtTerminal> {
        let mut cmd = self.postern();
        cmd.arg("--home").arg(&self.home).args(args);
        let user = self
            .user
            .as_ref()
            .map(|(user, with_tty)| (user, with_tty.as_path()));
        tty::run_typing(&mut cmd, typing, input, user)
            .with_context(|| format!("running {}", self.bin.display()))
    }

    /// `postern --home H <args>` with no terminal at all (in a session of its own, stdin
    /// empty), as the gate's user: what it printed.
    pub fn detached(&self, args: &[&str]) -> Result<std::process::Output> {
        let mut cmd = Command::new("setsid");
        cmd.arg("-w")
            .arg(&self.bin)
            .arg("--home")
            .arg(&self.home)
            .args(args);
        if let Some(keychain) = &self.keychain {
            cmd.envs(keychain.env().iter().map(|(k, v)| (k, v)));
        }
        if let Some((user, _)) = &self.user {
            user.apply(&mut cmd);
        }
        Ok(cmd.stdin(Stdio::null()).output()?)
    }

    /// `postern server add <label> -- <command...>`.
    pub fn add_server(&self, label: &str, server: &ServerCommand) -> Result<()> {
        let mut args: Vec<OsString> = vec!["server".into(), "add".into(), label.into()];
        args.push("--".into());
        args.extend(server.argv());
        self.cli(args).map(drop)
    }

    /// The command an agent's MCP configuration would run: `postern --home H mcp <label>`,
    /// with its stderr going to a log file that is printed if the test fails.
    pub fn mcp_command(&self, label: &str) -> Result<(tokio::process::Command, PathBuf)> {
        let n = self.shims.fetch_add(1, Ordering::Relaxed);
        let log = self.logs.join(format!("shim-{n}-{label}.log"));
        let mut cmd = tokio::process::Command::from(self.postern());
        cmd.arg("--home").arg(&self.home).arg("mcp").arg(label);
        Ok((cmd, log))
    }

    /// [`Gate::mcp_command`] run by a separate agent process (`sh`, a child of the test),
    /// so that the test process itself is outside the agent's process tree and may answer
    /// approvals with the CLI, as a human at another terminal would.
    pub fn agent_command(&self, label: &str) -> Result<(tokio::process::Command, PathBuf)> {
        let (shim, log) = self.mcp_command(label)?;
        let shim = shim.as_std();
        let mut cmd = tokio::process::Command::new("sh");
        // Not `exec`: the shell stays, as the agent process the shim reports to the engine.
        cmd.arg("-c").arg("\"$@\"; exit $?").arg("agent");
        cmd.arg(shim.get_program()).args(shim.get_args());
        cmd.envs(shim.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
        if let Some((user, _)) = &self.user {
            user.apply_tokio(&mut cmd);
        }
        Ok((cmd, log))
    }

    /// Runs a test scenario against this gate with an overall deadline (so a request left
    /// hanging fails instead of hanging CI). If it fails, the error carries the daemon's and
    /// the shims' logs: a returned error, unlike a panic, leaves no other trace of them.
    pub async fn scenario<T>(&self, scenario: impl Future<Output = Result<T>>) -> Result<T> {
        let outcome = match tokio::time::timeout(SCENARIO_LIMIT, scenario).await {
            Ok(outcome) => outcome,
            Err(_) => Err(anyhow::anyhow!(
                "the scenario did not finish within {SCENARIO_LIMIT:?}"
            )),
        };
        outcome.map_err(|e| anyhow::anyhow!("{e:?}\n{}", self.logs_report()))
    }

    /// The tails of the daemon's and every shim's log, for failure messages.
    pub fn logs_report(&self) -> String {
        let mut out = format!(
            "----- postern daemon log ({}) -----\n{}",
            self.home.display(),
            tail(&self.daemon_log(), 120)
        );
        if let Ok(entries) = std::fs::read_dir(&self.logs) {
            let mut shims: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            shims.sort();
            for path in shims.iter().filter(|p| !p.ends_with("daemon.log")) {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                out.push_str(&format!(
                    "\n----- {} -----\n{}",
                    path.display(),
                    tail(&text, 60)
                ));
            }
        }
        out
    }

    /// The process id of `postern daemon`, while it runs.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(Child::id)
    }

    /// Everything the daemon has logged so far.
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.logs.join("daemon.log")).unwrap_or_default()
    }

    async fn start_daemon(&mut self) -> Result<()> {
        let log = File::create(self.logs.join("daemon.log"))?;
        let child = self
            .postern()
            .arg("--home")
            .arg(&self.home)
            .arg("daemon")
            .env(
                "POSTERN_LOG",
                std::env::var_os("POSTERN_LOG").unwrap_or_else(|| "debug".into()),
            )
            .envs(self.daemon_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} daemon", self.bin.display()))?;
        self.daemon = Some(child);
        let socket = self.socket();
        let deadline = Instant::now() + DAEMON_READY;
        loop {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Ok(());
            }
            if let Some(status) = self
                .daemon
                .as_mut()
                .and_then(|d| d.try_wait().ok().flatten())
            {
                bail!(
                    "`postern daemon` exited ({status}) before its socket {} accepted a \
                     connection; its log:\n{}",
                    socket.display(),
                    self.daemon_log()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "`postern daemon` did not accept connections on {} within {DAEMON_READY:?}; \
                     its log:\n{}",
                    socket.display(),
                    self.daemon_log()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `postern` with this gate's environment (its private keychain, if any).
    fn postern(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        if let Some(keychain) = &self.keychain {
            cmd.envs(keychain.env().iter().map(|(k, v)| (k, v)));
        }
        if let Some((user, _)) = &self.user {
            user.apply(&mut cmd);
        }
        cmd
    }

    /// What `postern <shown>` printed, if it exited 0; else a failure with its output (and,
    /// when it blames the keychain, what this gate's bus and keyring logged).
    fn stdout_of(&self, shown: &str, out: std::process::Output) -> Result<String> {
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let logs = match &self.keychain {
            Some(keychain) if stderr.contains("keychain") => format!("\n{}", keychain.logs()),
            _ => String::new(),
        };
        bail!(
            "`postern {shown}` failed ({}):\nstdout: {}\nstderr: {stderr}{logs}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
        )
    }

    /// Stops this gate's gnome-keyring and starts it again, unlocked, on the same bus and files
    /// (Linux; see [`PrivateKeychain::restart_keyring`]).
    pub fn restart_keychain(&mut self) -> Result<()> {
        self.keychain
            .as_mut()
            .context("this gate has no private keychain (Linux only)")?
            .restart_keyring()
    }

    /// Leaves this gate's gnome-keyring unable to answer for `pause` (Linux; see
    /// [`PrivateKeychain::stall_keyring`]).
    pub fn stall_keychain(&self, pause: Duration) -> Result<()> {
        self.keychain
            .as_ref()
            .context("this gate has no private keychain (Linux only)")?
            .stall_keyring(pause)
    }

    /// The environment a process needs to reach this gate's keychain.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        self.keychain
            .as_ref()
            .map(|k| k.env().to_vec())
            .unwrap_or_default()
    }

    /// What the keychain holds for this home's entry `name`, read by another process as any
    /// process of the user can (lossy text; empty when there is none).
    pub fn keychain_item(&self, name: &str) -> Result<String> {
        static CELL: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
        let peek = binaries::cached(&CELL, "KEYCHAIN_PEEK_BIN", "postern-e2e", "keychain_peek")?;
        let out = Command::new(peek)
            .arg(&self.home)
            .arg(name)
            .envs(self.env())
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "keychain_peek: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Starts `postern daemon` again after [`Gate::stop_daemon`]; it starts locked.
    pub async fn restart_daemon(&mut self) -> Result<()> {
        self.start_daemon().await
    }

    /// Stops `postern daemon` (SIGTERM, SIGKILL after 5 s); the home and keychain stay.
    pub fn stop_daemon(&mut self) {
        let Some(mut child) = self.daemon.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("postern daemon ignored SIGTERM for 5 s; killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop_daemon();
        if std::thread::panicking() {
            eprintln!("{}", self.logs_report());
        }
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn show(args: &[OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
