//! A private, unlocked OS keychain for one test engine.
//!
//! The engine keeps its audit log's keys in the OS keychain and refuses tool calls when it
//! cannot reach it. On Linux that keychain is the Secret Service on the session D-Bus. Each
//! [`crate::Gate`] gets its own: a private `dbus-daemon` and an unlocked `gnome-keyring-daemon`
//! on it, with their files in the gate's temporary directory. So the tests use a real keychain
//! backend, pass the same under `scripts/test.sh` and a plain `cargo test`, and never touch the
//! keyring of the person running them. On macOS the engine uses the login keychain as it is.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::run_as::RunAs;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const READY: Duration = Duration::from_secs(15);

/// A session bus with an unlocked Secret Service on it. Both stop on drop.
#[derive(Debug)]
pub struct PrivateKeychain {
    env: Vec<(OsString, OsString)>,
    /// Where its state and its processes' logs are.
    dir: std::path::PathBuf,
    // The keyring first, then the bus it lives on.
    children: Vec<Child>,
    /// The user the bus and keyring run as (the test's own when `None`).
    user: Option<RunAs>,
}

impl PrivateKeychain {
    /// Starts the bus and the keyring, with their state under `dir`; waits until the Secret
    /// Service answers on the bus.
    pub fn start(dir: &Path) -> Result<PrivateKeychain> {
        Self::start_as(dir, None)
    }

    /// [`PrivateKeychain::start`] with the bus and the keyring run as `user` (who owns `dir`).
    pub fn start_as(dir: &Path, user: Option<&RunAs>) -> Result<PrivateKeychain> {
        for tool in ["dbus-daemon", "dbus-send", "gnome-keyring-daemon"] {
            crate::servers::find_on_path(tool).with_context(|| {
                format!(
                    "the end-to-end tests give each engine a private keychain and need `{tool}`: \
                     install the Debian packages dbus and gnome-keyring \
                     (`scripts/test.sh` installs them)"
                )
            })?;
        }
        let runtime = dir.join("runtime");
        let data = dir.join("data");
        std::fs::create_dir_all(&runtime)?;
        std::fs::create_dir_all(&data)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))?;
        let socket = dir.join("bus");
        let address: OsString = format!("unix:path={}", socket.display()).into();
        let env = vec![
            ("DBUS_SESSION_BUS_ADDRESS".into(), address.clone()),
            ("XDG_RUNTIME_DIR".into(), runtime.into_os_string()),
            ("XDG_DATA_HOME".into(), data.into_os_string()),
        ];
        let mut keychain = PrivateKeychain {
            env,
            dir: dir.to_owned(),
            children: Vec::new(),
            user: user.cloned(),
        };
        if let Some(user) = user {
            user.give(dir)?;
        }

        let log = std::fs::File::create(dir.join("dbus.log"))?;
        let bus = keychain
            .command("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile"])
            .arg(format!("--address={}", address.to_string_lossy()))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting a private dbus-daemon")?;
        keychain.children.push(bus);
        keychain.wait_until("the private D-Bus socket", || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        })?;

        keychain.start_keyring()?;
        Ok(keychain)
    }

    /// Starts gnome-keyring with the login keyring's password on its stdin (it creates the
    /// keyring, or unlocks the one in its directory), and waits until it answers on the bus.
    fn start_keyring(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("gnome-keyring.log"))?;
        let mut keyring = self
            .command("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting gnome-keyring-daemon")?;
        // The password of the login keyring; closing stdin ends it.
        if let Some(mut stdin) = keyring.stdin.take() {
            stdin.write_all(b"postern-e2e")?;
        }
        self.children.insert(0, keyring);
        let (env, user) = (self.env.clone(), self.user.clone());
        self.wait_until("gnome-keyring's Secret Service on the private bus", || {
            secret_service_is_up(&env, user.as_ref())
        })
    }

    /// Stops gnome-keyring and starts it again on the same bus and files, unlocked (as after
    /// it crashed, or the person logged in again): every client's session is gone.
    pub fn restart_keyring(&mut self) -> Result<()> {
        let mut keyring = self.children.remove(0);
        if let Ok(pid) = i32::try_from(keyring.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        keyring
            .wait()
            .context("waiting for gnome-keyring to stop")?;
        let (env, user) = (self.env.clone(), self.user.clone());
        self.wait_until("gnome-keyring to leave the bus", || {
            !secret_service_is_up(&env, user.as_ref())
        })?;
        self.start_keyring()
    }

    /// Stops gnome-keyring (SIGSTOP) for `pause`, then lets it go on: a keyring too busy to
    /// answer. Returns at once; the keyring is resumed from another thread.
    pub fn stall_keyring(&self, pause: Duration) -> Result<()> {
        let pid = Pid::from_raw(i32::try_from(self.children[0].id())?);
        kill(pid, Signal::SIGSTOP).context("stopping gnome-keyring")?;
        std::thread::spawn(move || {
            std::thread::sleep(pause);
            let _ = kill(pid, Signal::SIGCONT);
        });
        Ok(())
    }

    /// `program`, as the keychain's user when it has one.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        if let Some(user) = &self.user {
            user.apply(&mut cmd);
        }
        cmd
    }

    /// What the bus and the keyring logged so far (for a failure's message).
    pub fn logs(&self) -> String {
        ["gnome-keyring.log", "dbus.log"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
                format!("--- {name} ---\n{}", text.trim_end())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The environment a process needs to use this keychain.
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    fn wait_until(&mut self, what: &str, ready: impl Fn() -> bool) -> Result<()> {
        let deadline = Instant::now() + READY;
        loop {
            if ready() {
                return Ok(());
            }
            for child in &mut self.children {
                if let Ok(Some(status)) = child.try_wait() {
                    bail!("waiting for {what}: a keychain process exited ({status})");
                }
            }
            if Instant::now() >= deadline {
                bail!("{what} was not up within {READY:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PrivateKeychain {
    fn drop(&mut self) {
        for child in &mut self.children {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        for child in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn secret_service_is_up(env: &[(OsString, OsString)], user: Option<&RunAs>) -> bool {
    let mut probe = Command::new("dbus-send");
    if let Some(user) = user {
        user.apply(&mut probe);
    }
    probe
        .args([
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.NameHasOwner",
            "string:org.freedesktop.secrets",
        ])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("boolean true"))
}
