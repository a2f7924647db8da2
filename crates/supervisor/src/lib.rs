//! Launching and supervising stdio MCP server processes, and capturing what they are.
//! Only this crate touches processes.
//!
//! Each launch begins an execution epoch (docs/refresh-contract.md §1): the supervisor
//! observes the executable identity before the process starts, and the epoch is a fresh
//! ULID, never taken from the server. Each server runs in its own process group, so
//! stopping it also stops what it spawned (`npx` starts `node`, `uv run` starts
//! `python`): a wrapper can never leave its real server behind.

mod agent;
mod identity;
mod process;
mod sandbox;
mod table;
mod watch;

use std::time::{SystemTime, UNIX_EPOCH};

use postern_domain::{Digest, ExecutionEpoch, ExecutionRecord, ServerConfig};

#[cfg(target_os = "macos")]
pub use agent::debugger_attached;
pub use agent::{Ancestor, LiveProcess, agent_among, ancestry, identify_agent, process_start_time};
pub use identity::{DigestCache, HOST_ENV, IdentityError, LOCKFILES, Observed};
pub use process::{
    Environment, ExitReport, ExitWaiter, ProcessHandle, SpawnError, Spawned, spawn, spawn_program,
};
pub use sandbox::{CREDENTIAL_PATHS, SandboxHost, WayOut, denied, refused_writable, run_relayed};
pub use watch::{ArtifactWatch, ProcessGroupSample};

/// What a launch is given once its identity is known: environment (credentials, or their
/// placeholders and the proxy variables) and its way out through the egress broker.
#[derive(Debug, Default)]
pub struct Given {
    /// Extra environment for the process.
    pub env: Vec<(String, String)>,
    /// The broker's port and socket, when the launch has a way out.
    pub way_out: Option<WayOut>,
}

/// A launched server: its pipes, its supervising handle, and its execution record.
#[derive(Debug)]
pub struct Launched {
    /// Pipes and handle.
    pub spawned: Spawned,
    /// What was observed at launch, with the new epoch.
    pub record: ExecutionRecord,
    /// A watch on every hashed file, begun before the identity was checked a second time and
    /// the process started: [`ArtifactWatch::touched`] says whether one changed since, so a
    /// file swapped while the process starts is caught before the launch is trusted
    /// (issue 16). `None` where the OS would not watch them.
    pub watch: Option<ArtifactWatch>,
}

/// Why a server was not launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Its identity could not be captured.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The OS refused to start it.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// A hashed file changed between the identity capture and the process start: nothing was
    /// started or released; the next launch captures the new identity.
    #[error(
        "a file of its identity changed while it was being launched ({0}); nothing was started"
    )]
    Changed(String),
}

/// Observes `config`'s identity, launches it, and records the launch as a new epoch.
pub fn launch(config: &ServerConfig, cache: &DigestCache) -> Result<Launched, LaunchError> {
    launch_with(config, cache, |_| Given::default())
}

/// [`launch`], handing the process what `release` returns for the identity just observed (its
/// digest): credentials, which the host releases only to an identity a human approved for
/// them (their values are redacted from the captured stderr), and the way out a confined
/// launch's sandbox is given.
pub fn launch_with<R>(
    config: &ServerConfig,
    cache: &DigestCache,
    release: R,
) -> Result<Launched, LaunchError>
where
    R: FnOnce(&Digest) -> Given,
{
    launch_checked(config, cache, release, || {})
}

/// [`launch_with`], calling `between` after the identity is captured and before it is checked
/// again (tests use it to swap a file there). The check: a watch on every hashed file begins,
/// the identity is captured once more (warm: a `stat` per file) and must equal the first;
/// only then are credentials released and the process started, and the watch goes with the
/// launch so a change from here on is seen too.
pub fn launch_checked<R>(
    config: &ServerConfig,
    cache: &DigestCache,
    release: R,
    between: impl FnOnce(),
) -> Result<Launched, LaunchError>
where
    R: FnOnce(&Digest) -> Given,
{
    let observed = cache.observe(config)?;
    let first = record(config, observed.clone(), 0, 0);
    let identity = first.identity_digest();
    between();
    // The artifacts, and the path the launch executes: often a link (a venv's `bin/python`)
    // to the executable hashed, which re-pointed after the second capture would run
    // something else.
    let watched: Vec<std::path::PathBuf> = first
        .artifacts()
        .map(|a| a.path.clone())
        .filter(|p| !observed.unwatched.contains(p))
        .chain(std::iter::once(observed.program.clone()))
        .collect();
    let watch = ArtifactWatch::with_shallow(&watched, &observed.shallow)
        .map_err(|e| tracing::warn!("the files of its identity cannot be watched: {e}"))
        .ok();
    let second = record(config, cache.observe(config)?, 0, 0);
    if second.identity_digest() != identity {
        let changed: Vec<String> = first
            .changed_artifacts(&second)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        return Err(LaunchError::Changed(if changed.is_empty() {
            "its command, runtime or environment".to_owned()
        } else {
            changed.join(", ")
        }));
    }
    let given = release(&identity);
    let env: Vec<(&str, &str)> = HOST_ENV
        .into_iter()
        .chain(
            observed
                .selected_env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .chain(given.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    let spawned = match &first.sandbox {
        None => spawn_program(
            &observed.program,
            config.args(),
            config,
            Environment::Engine { released: &env },
        )?,
        Some(sandbox) => {
            let configured = config
                .env
                .iter()
                .map(|v| (v.name.as_str(), v.value.as_str()));
            let vars: Vec<(&str, &str)> = configured.chain(env.iter().copied()).collect();
            let released: Vec<&str> = given.env.iter().map(|(k, _)| k.as_str()).collect();
            let confined = sandbox::confined_env(&vars, &released);
            let (program, args) = sandbox::command(
                sandbox,
                &first,
                cache.sandbox_host(),
                given.way_out.as_ref(),
                &observed.program,
                config.args(),
                &confined.inside,
            )
            .map_err(|why| SpawnError {
                program: config.program().to_owned(),
                source: std::io::Error::other(why),
            })?;
            spawn_program(
                &program,
                &args,
                config,
                Environment::Confined {
                    bubblewrap: &confined.outside,
                    released: &env,
                },
            )?
        }
    };
    let started_at_ms = now_ms();
    let record = record(config, observed, spawned.handle.pid(), started_at_ms);
    Ok(Launched {
        spawned,
        record,
        watch,
    })
}

/// A fresh epoch for a launch (or a replacement) happening now.
pub fn new_epoch() -> ExecutionEpoch {
    let ulid = ulid::Ulid::new();
    ExecutionEpoch::new(ulid.timestamp_ms(), ulid.random())
}

/// The record of `observed` for a process started now, with a fresh epoch.
pub fn record(
    config: &ServerConfig,
    observed: Observed,
    pid: u32,
    started_at_ms: i64,
) -> ExecutionRecord {
    ExecutionRecord {
        server_label: config.label.clone(),
        epoch: new_epoch(),
        launch_command: observed.launch_command,
        executable: observed.executable,
        wrappers: observed.wrappers,
        entry: observed.entry,
        lockfiles: observed.lockfiles,
        extra_paths: observed.extra_paths,
        runtime: observed.runtime,
        working_directory: observed.working_directory,
        env_names: observed.env_names,
        loader_env: observed.loader_env,
        sandbox: observed.sandbox,
        pinning: observed.pinning,
        pid,
        started_at_ms,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
