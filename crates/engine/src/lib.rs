//! Postern's composition root: the one API every shell uses (the desktop app, the
//! `postern` CLI, the end-to-end tests). It owns a Postern home: the single-owner lock,
//! the SQLite store, and the local socket agents' shims connect to.

pub mod answer;
pub mod api;
pub mod audit;
pub mod authority;
mod control;
pub mod harden;
mod home;
pub mod import;
pub mod journal;
mod launches;
pub mod os_auth;
mod os_lock;
pub mod permissions;
pub mod rewire;
pub mod servers;

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postern_domain::{ServerConfig, ServerLabel};
use postern_gateway::audit::AuditSink;
use postern_gateway::{Command, Gateway, ServerDirectory, Sessions};
use postern_store::{Store, StoreError};
use postern_vault::{Keychain, SecretStore};
use tokio::sync::{broadcast, watch};

pub use api::{
    AgentView, ArtifactView, CatalogView, CredentialsView, ExecutionView, GateStatus, LeakNotice,
    PinningView, SandboxView, ServerStatus, SessionState, SessionStatus, SocketProof, Status,
    typescript_bindings,
};
pub use audit::{AuditLog, AuditState, AuditStatus};

/// The environment variable naming a CA file (PEM) the egress broker trusts for upstream TLS
/// beside the platform's roots.
pub const EGRESS_CA_FILE: &str = "POSTERN_EGRESS_CA_FILE";
pub use authority::{Authority, Clock, ManualClock, Settings, SettingsUpdate, SystemClock};
pub use control::{Control, Origin, Refusal, inside_agent_tree};
pub use home::{Home, HomeError};
pub use os_lock::with_main_run_loop;

/// A running engine. Dropping it without [`Engine::shutdown`] stops it too, less politely.
#[derive(Debug)]
pub struct Engine {
    home: Home,
    store: Arc<Mutex<Store>>,
    sessions: Sessions,
    audit: Arc<AuditLog>,
    authority: Authority,
    control: Control,
    _os_lock: os_lock::OsLock,
    shutdown: watch::Sender<bool>,
    serving: tokio::task::JoinHandle<()>,
    /// Held for the engine's life: the home's single-owner lock.
    _lock: Claim,
}

/// Why the engine could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Another engine (the app or `postern daemon`) already owns this home.
    #[error(
        "another Postern engine is already running for {home} (the app or `postern daemon`); use it, or stop it first"
    )]
    AlreadyRunning { home: PathBuf },
    /// The home could not be prepared.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// The database could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The OS keychain refused.
    #[error(transparent)]
    Keychain(#[from] postern_vault::VaultError),
    /// A filesystem or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl Engine {
    /// Starts the engine for `home`: takes the single-owner lock, opens the store and the
    /// audit log (keys and anchor in the OS keychain), binds the socket and starts accepting
    /// agents. Must run inside a tokio runtime.
    pub async fn start(home: Home) -> Result<Self, EngineError> {
        home.prepare()?;
        let secrets = Arc::new(Keychain::for_home(home.path()));
        Self::start_with_secrets(home, secrets).await
    }

    /// [`Engine::start`] with another secret store (unit tests use an in-memory one).
    pub async fn start_with_secrets(
        home: Home,
        secrets: Arc<dyn SecretStore>,
    ) -> Result<Self, EngineError> {
        Self::start_with(home, secrets, Arc::new(SystemClock)).await
    }

    /// [`Engine::start_with_secrets`] with a clock for the gate's decisions (tests move it
    /// to expire grants).
    pub async fn start_with(
        home: Home,
        secrets: Arc<dyn SecretStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        home.prepare()?;
        let lock = claim(&home)?;
        let store = Arc::new(Mutex::new(Store::open(home.path())?));
        // Never fails: an unusable log starts unavailable or quarantined, and refuses calls.
        let audit_home = home.path().to_owned();
        let audit_secrets = Arc::clone(&secrets);
        let audit = tokio::task::spawn_blocking(move || AuditLog::open(&audit_home, audit_secrets))
            .await
            .map(Arc::new)
            .map_err(|e| EngineError::Io {
                what: "opening the audit log".into(),
                source: std::io::Error::other(e),
            })?;
        record_config_changes(&store, &audit);
        let listener =
            postern_gateway::bind(&home.socket_path()).map_err(|source| EngineError::Io {
                what: format!("cannot listen on {}", home.socket_path().display()),
                source,
            })?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut gateway = Gateway::new(Arc::new(StoreDirectory(Arc::clone(&store))));
        let authority = Authority::new(
            Arc::clone(&audit),
            Arc::clone(&store),
            clock,
            secrets,
            gateway.commands.clone(),
        );
        // The way out for launches that hold credential placeholders (issue 15). Upstream TLS
        // also trusts the CA file POSTERN_EGRESS_CA_FILE names (a corporate proxy's).
        let extra_ca = std::env::var_os(EGRESS_CA_FILE).map(PathBuf::from);
        if let Err(e) = authority.start_egress(&home.path().join("egress"), extra_ca.as_deref()) {
            tracing::error!(
                "the egress broker did not start ({e}); credentials bound to hosts are withheld from launches"
            );
        }
        // Confined launches (issue 16): the Postern home and the user's credential paths
        // hidden, the broker's trust store and preload shown, `postern sandbox-run` relaying the
        // broker inside.
        let mut sandbox = postern_supervisor::SandboxHost::new(home.path(), postern_program().ok());
        sandbox.exposed = authority.egress_files();
        gateway.cache = Arc::new(postern_supervisor::DigestCache::with_sandbox(sandbox));
        gateway.directory = Arc::new(Vouched {
            store: StoreDirectory(Arc::clone(&store)),
            authority: authority.clone(),
        });
        gateway.audit = Arc::clone(&audit) as Arc<dyn AuditSink>;
        gateway.authorizer = Arc::new(authority.clone());
        let control = Control {
            home: home.clone(),
            store: Arc::clone(&store),
            sessions: gateway.sessions.clone(),
            commands: gateway.commands.clone(),
            audit: Arc::clone(&audit),
            authority: authority.clone(),
        };
        gateway.control = Some(Arc::new(control.clone()));
        let sessions = gateway.sessions.clone();
        let serving = tokio::spawn(postern_gateway::serve(listener, gateway, shutdown_rx));
        tracing::info!(home = %home.path().display(), socket = %home.socket_path().display(), "engine listening");
        Ok(Self {
            home,
            store,
            sessions,
            audit,
            _os_lock: os_lock::watch(&authority),
            authority,
            control,
            shutdown,
            serving,
            _lock: lock,
        })
    }

    /// The home this engine owns.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// A snapshot of configured servers and connected agent sessions.
    pub fn status(&self) -> Result<Status, EngineError> {
        status(
            &self.home,
            &self.store,
            &self.sessions,
            &self.audit,
            &self.authority,
        )
    }

    /// How many servers are configured and how many agent runs are connected: the tray's
    /// status line, read on every change of the gate. Cheaper than [`Engine::status`] (no
    /// journal reads, no status of each session).
    pub fn census(&self) -> Result<permissions::Census, EngineError> {
        let servers = self.store.lock().map_err(|_| poisoned())?.servers()?.len();
        Ok(permissions::Census {
            servers,
            agent_runs: permissions::agent_runs(&self.sessions.snapshot()),
        })
    }

    /// The audit log's state: ready, unavailable or quarantined (calls are refused in the
    /// last two), its head and its anchor.
    pub fn audit(&self) -> AuditStatus {
        self.audit.status()
    }

    /// The gate's live state: the vault lock, approvals, grants, settings, for reading. Every
    /// change goes through [`Engine::control`].
    pub fn authority(&self) -> &Authority {
        &self.authority
    }

    /// The management API: every request that changes the gate (approve, unlock, settings,
    /// credentials, ...) as one [`answer::ControlCommand`], the same the CLI sends over the
    /// socket, with the app as its [`Origin`].
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// A receiver whose value changes whenever a session connects, disconnects, or its
    /// server starts or stops. Configuration edited through the CLI does not pass
    /// through the engine: status readers also refresh on a timer.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.sessions.changes()
    }

    /// Every live grant by agent run, and the every-use settings: the Permissions page.
    pub fn permissions(&self) -> permissions::Permissions {
        let grants = self.authority.grants();
        let launches = launches::numbered(
            &self.store,
            &self.audit.status().state,
            grants.iter().map(|g| (&g.server_label, g.execution_epoch)),
        );
        permissions::permissions(
            &grants,
            &self.sessions.snapshot(),
            &self.authority.every_use(),
            &launches,
        )
    }

    /// Records in the audit log the configuration changes queued in the store (servers added
    /// through the store, by the app's form or `postern server add`). Returns how many.
    pub fn config_changed(&self) -> usize {
        record_config_changes(&self.store, &self.audit)
    }

    /// The Sessions timeline over a window: lanes, epoch bands, marks, and buckets when the
    /// marks do not fit ([`journal::timeline`]). Each journal read uses its own read-only
    /// connection (never the engine's shared one); they block: call them from a blocking
    /// context in async code.
    pub fn timeline(
        &self,
        query: &journal::TimelineQuery,
    ) -> Result<journal::Timeline, EngineError> {
        journal::timeline(&self.home, query)
    }

    /// A page of the Activity journal, newest first.
    pub fn activity(
        &self,
        filter: &journal::ActivityFilter,
    ) -> Result<Vec<journal::ActivityRow>, EngineError> {
        journal::activity(&self.home, filter)
    }

    /// A page of the Sessions journal, newest first.
    pub fn sessions_journal(
        &self,
        filter: &journal::SessionFilter,
    ) -> Result<Vec<journal::SessionRow>, EngineError> {
        journal::sessions(&self.home, filter)
    }

    /// Audit record `seq` (a clicked mark's): its header fields and, while the vault is
    /// unlocked, its body opened with the opening key from `secrets` (the keychain this
    /// engine was started with, the key sealed under the vault key; the engine itself keeps
    /// only the public key), tool-call arguments shown by their shape. `None` when there is
    /// no such record.
    pub fn audit_entry(
        &self,
        seq: u64,
        secrets: Option<&dyn SecretStore>,
    ) -> Result<Option<journal::AuditEntry>, EngineError> {
        use postern_domain::decision::VaultState;
        let key = match (secrets, self.authority.vault()) {
            (None, _) => Err("no keychain was given to open it".to_owned()),
            (Some(secrets), VaultState::Ready) => {
                audit::read_key(secrets, self.authority.vault_key().as_ref())
                    .map_err(|e| e.to_string())
                    .and_then(|key| key.ok_or_else(|| audit::AuditError::KeyMissing.to_string()))
            }
            (Some(_), VaultState::Locked | VaultState::Unlocking) => {
                Err("the vault is locked: bodies open only while it is unlocked".to_owned())
            }
            (Some(_), VaultState::Quarantined) => {
                Err("the audit log is quarantined: verify it first".to_owned())
            }
        };
        journal::audit_entry(&self.home, seq, key)
    }

    /// Verifies this home's audit log ([`audit::verify`]); with `open_bodies`, every body
    /// too while the vault is unlocked (its opening key is sealed under the vault key).
    pub fn verify_audit(
        &self,
        secrets: &dyn SecretStore,
        open_bodies: bool,
    ) -> Result<audit::VerifyReport, audit::AuditError> {
        let vault = self.authority.vault_key();
        audit::verify(&self.home, secrets, vault.as_ref(), open_bodies)
    }

    /// Stops accepting agents, ends every session and its server, releases the home.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.serving.await;
        let mut changes = self.sessions.changes();
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while !self.sessions.is_empty() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        });
        if drained.await.is_err() {
            tracing::warn!(
                left = self.sessions.len(),
                "sessions still closing at shutdown"
            );
        }
        // Commits what is queued, records engine_stopped and anchors the final head.
        let audit = Arc::clone(&self.audit);
        let _ = tokio::task::spawn_blocking(move || audit.close("shutdown")).await;
        let _ = std::fs::remove_file(self.home.socket_path());
        tracing::info!("engine stopped");
    }
}

/// The home's single-owner lock, held while it lives: on `engine.lock`, which an offline
/// repair takes too, and on the home directory itself, which a CLI asks the kernel about
/// before it sends anything over the socket (`postern_gateway::control`): only the process
/// holding it is this home's engine. A relay put at the socket's path cannot hold it while
/// the engine does; to hold one it would have to replace the whole home.
#[derive(Debug)]
struct Claim {
    _file: File,
    _home: File,
}

/// Takes the home's single-owner lock, or says another engine holds it.
fn claim(home: &Home) -> Result<Claim, EngineError> {
    let take = |path: &Path, file: std::io::Result<File>| {
        let io = |what: &str, source| EngineError::Io {
            what: format!("cannot {what} {}", path.display()),
            source,
        };
        let file = file.map_err(|e| io("open", e))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(TryLockError::WouldBlock) => Err(EngineError::AlreadyRunning {
                home: home.path().to_owned(),
            }),
            Err(TryLockError::Error(source)) => Err(io("lock", source)),
        }
    };
    let lock = home.lock_path();
    let file = take(
        &lock,
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock),
    )?;
    let dir = take(home.path(), File::open(home.path()))?;
    Ok(Claim {
        _file: file,
        _home: dir,
    })
}

/// Deletes the home's entries from `secrets` (the OS keychain): the audit log's opening key
/// and anchor and every credential's value. For a home about to be deleted (a throwaway demo
/// home, an uninstall): without its key the audit log can never be opened again. Refused
/// while an engine owns the home. Returns the names of the entries that existed.
pub fn forget_secrets(home: &Home, secrets: &dyn SecretStore) -> Result<Vec<String>, EngineError> {
    home.prepare()?;
    let _lock = claim(home)?;
    let credentials = Store::open(home.path())?.credentials()?;
    let names = [
        audit::OPENING_KEY.to_owned(),
        audit::ANCHOR.to_owned(),
        authority::VAULT_KEY_ITEM.to_owned(),
    ]
    .into_iter()
    .chain(credentials.iter().map(|c| c.keychain_item()));
    let mut forgotten = Vec::new();
    for name in names {
        if secrets.delete(&name)? {
            forgotten.push(name);
        }
    }
    Ok(forgotten)
}

pub(crate) fn status(
    home: &Home,
    store: &Mutex<Store>,
    sessions: &Sessions,
    audit: &AuditLog,
    authority: &Authority,
) -> Result<Status, EngineError> {
    let configs = store.lock().map_err(|_| poisoned())?.servers()?;
    let grants = authority.grants();
    let sessions = sessions.snapshot();
    let audit = audit.status();
    let launches = launches::numbered(
        store,
        &audit.state,
        sessions
            .iter()
            .filter_map(|s| Some((&s.server, s.record.as_ref()?.epoch))),
    );
    let numbers = api::Numbers {
        sessions: launches::journal_ids(store, &audit.state),
        launches,
    };
    let mut status = api::status(
        home,
        &configs,
        &sessions,
        audit,
        authority.gate_status(),
        &grants,
        &numbers,
    );
    status.system_auth = os_auth::available().ok().map(str::to_owned);
    Ok(status)
}

/// Moves the configuration changes the CLI queued into the audit log (the engine is its
/// only writer). Left queued while the log cannot take them. Returns how many moved.
pub(crate) fn record_config_changes(store: &Mutex<Store>, audit: &AuditLog) -> usize {
    if !matches!(audit.status().state, AuditState::Ready) {
        return 0;
    }
    let changes = match store
        .lock()
        .map_err(|_| poisoned())
        .and_then(|s| Ok(s.take_config_changes()?))
    {
        Ok(changes) => changes,
        Err(e) => {
            tracing::warn!("cannot read queued configuration changes: {e}");
            return 0;
        }
    };
    let n = changes.len();
    for change in changes {
        audit.record(postern_domain::AuditEvent::ConfigChanged {
            what: change.what,
            server: change.server.and_then(|s| s.parse::<ServerLabel>().ok()),
            narrowing: change.narrowing,
        });
    }
    n
}

pub(crate) fn restart(
    sessions: &Sessions,
    commands: &broadcast::Sender<Command>,
    label: &ServerLabel,
) -> usize {
    let running = sessions
        .snapshot()
        .iter()
        .filter(|s| &s.server == label && s.phase != postern_gateway::Phase::Stopped)
        .count();
    // Nothing to restart is nothing to send: a flood of restarts for servers that do not
    // run would only push other commands out of the sessions' channel.
    if running > 0 {
        let _ = commands.send(Command::Restart(label.clone()));
    }
    running
}

/// Server configurations from the store, and the built-in server (`postern mcp postern`).
struct StoreDirectory(Arc<Mutex<Store>>);

impl ServerDirectory for StoreDirectory {
    fn lookup(&self, label: &ServerLabel) -> Result<Option<ServerConfig>, String> {
        let store = self.0.lock().map_err(|_| poisoned().to_string())?;
        if label.as_str() == postern_domain::BUILTIN_LABEL {
            let mut config = builtin_config(&postern_program()?)?;
            config.credentials = store.bindings(label).map_err(|e| e.to_string())?;
            return Ok(Some(config));
        }
        store.server(label).map_err(|e| e.to_string())
    }
}

/// [`StoreDirectory`] with the credential bindings the vault's seal vouches for only
/// ([`Authority::vouched`]): what a launch is given and a card names is what a person bound.
struct Vouched {
    store: StoreDirectory,
    authority: Authority,
}

impl ServerDirectory for Vouched {
    fn lookup(&self, label: &ServerLabel) -> Result<Option<ServerConfig>, String> {
        // The store's lock is let go before the authority's is taken (it takes the store's
        // after its own).
        let config = self.store.lookup(label)?;
        Ok(config.map(|mut config| {
            let bound = std::mem::take(&mut config.credentials);
            config.credentials = self.authority.vouched(&config.label, bound);
            config
        }))
    }
}

/// The built-in server: the `postern` CLI's hidden `builtin http` subcommand, launched,
/// identified (the `postern` executable is its identity), supervised, audited and gated
/// like any configured server. Its bound credentials are filled in by the caller.
fn builtin_config(program: &Path) -> Result<ServerConfig, String> {
    let program = program
        .to_str()
        .ok_or_else(|| format!("the path {} is not UTF-8", program.display()))?;
    let label = postern_domain::BUILTIN_LABEL
        .parse()
        .map_err(|e| format!("{e}"))?;
    ServerConfig::new(
        label,
        vec![program.to_owned(), "builtin".into(), "http".into()],
        None,
        Vec::new(),
    )
    .map_err(|e| e.to_string())
}

/// The `postern` CLI: this very executable when it is the CLI (`postern daemon`, `postern
/// import`), else a `postern` beside it (the desktop app ships one; a checkout's
/// `target/debug`), else the first on PATH. It runs the built-in server, and agents' MCP
/// configurations (the snippet, rewiring) name it.
pub fn postern_program() -> Result<PathBuf, String> {
    let name = if cfg!(windows) {
        "postern.exe"
    } else {
        "postern"
    };
    let exe = std::env::current_exe().ok();
    if let Some(exe) = &exe {
        if exe.file_name() == Some(std::ffi::OsStr::new(name)) && exe.is_file() {
            return Ok(exe.clone());
        }
        if let Some(beside) = exe.parent().map(|dir| dir.join(name))
            && beside.is_file()
        {
            return Ok(beside);
        }
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "the built-in server '{}' needs the `postern` command, which is neither beside {} nor on PATH: install the Postern CLI",
                postern_domain::BUILTIN_LABEL,
                exe.as_deref().map_or_else(|| "this program".into(), |e| e.display().to_string())
            )
        })
}

pub(crate) fn poisoned() -> EngineError {
    EngineError::Io {
        what: "engine state".into(),
        source: std::io::Error::other("a thread panicked holding the store"),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    fn memory() -> Arc<dyn SecretStore> {
        Arc::new(postern_vault::MemoryStore::new())
    }

    #[tokio::test]
    async fn one_engine_per_home_with_a_private_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path().join("home"));
        let secrets = memory();
        let engine = Engine::start_with_secrets(home.clone(), Arc::clone(&secrets))
            .await
            .expect("first engine");
        assert_eq!(mode(&home.run_dir()), 0o700);
        assert_eq!(mode(&home.socket_path()), 0o600);
        assert_eq!(mode(home.path()), 0o700);

        let second = Engine::start_with_secrets(home.clone(), Arc::clone(&secrets))
            .await
            .expect_err("second engine must be refused");
        assert!(
            matches!(second, EngineError::AlreadyRunning { .. }),
            "{second}"
        );
        assert!(
            second
                .to_string()
                .contains("another Postern engine is already running")
        );
        // The refused engine did not disturb the first one's socket.
        assert!(std::os::unix::net::UnixStream::connect(home.socket_path()).is_ok());

        engine.shutdown().await;
        assert!(!home.socket_path().exists(), "shutdown removes the socket");
        // The home is free again.
        let again = Engine::start_with_secrets(home, secrets)
            .await
            .expect("engine after shutdown");
        assert_eq!(again.audit().state, AuditState::Ready);
        again.shutdown().await;
    }

    /// Every request that widens authority or destroys is refused without a proof, from the
    /// app's window as from the socket, and nothing else asks for one: the table is the
    /// requests' own `need()`, the one exception the window's click on the leak notices.
    #[tokio::test]
    async fn every_request_that_needs_a_proof_is_refused_without_one_and_no_other_is() {
        use postern_domain::decision::{
            EveryUse, EveryUseSetting, GrantChoice, Reply, SessionMode, SettingTarget,
            SettingsUpdate,
        };
        use postern_domain::{AgentRun, ApprovalId, GrantId, Injection};
        use postern_gateway::hello::{ControlCommand, SecretText};

        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::start_with_secrets(Home::at(dir.path()), memory())
            .await
            .expect("engine");
        engine
            .authority()
            .set_passphrase(&postern_vault::Secret::new("a passphrase".into()), None)
            .expect("passphrase");
        let control = engine.control();
        let server = || "fixture".to_owned();
        let every_use = |level| ControlCommand::EveryUse {
            set: Some(EveryUseSetting {
                target: SettingTarget::Server {
                    server: server().parse().expect("label"),
                },
                level,
            }),
        };
        let settings = |change| ControlCommand::Settings { change };
        let approval = ApprovalId::new(1_700_000_000_000, 7).to_string();
        let commands = [
            ControlCommand::Status,
            ControlCommand::Restart { server: server() },
            ControlCommand::ConfigChanged,
            ControlCommand::Journals,
            ControlCommand::Approvals,
            ControlCommand::Answer {
                approval: approval.clone(),
                reply: Reply::Approve {
                    choice: Some(GrantChoice::ThisCall),
                },
            },
            ControlCommand::Answer {
                approval,
                reply: Reply::Deny,
            },
            ControlCommand::Grants,
            ControlCommand::Revoke {
                grant: GrantId::new(1_700_000_000_000, 1).to_string(),
            },
            ControlCommand::RevokeRun {
                run: AgentRun {
                    pid: 1,
                    start_time: 1,
                },
            },
            ControlCommand::Lock,
            ControlCommand::Unlock,
            settings(SettingsUpdate::default()),
            settings(SettingsUpdate {
                session_mode: Some(SessionMode::Observe),
                ..SettingsUpdate::default()
            }),
            settings(SettingsUpdate {
                approval_timeout_ms: Some(30_000),
                ..SettingsUpdate::default()
            }),
            ControlCommand::CredentialAdd {
                name: "api".into(),
                injection: Injection::Bearer,
                hosts: vec!["api.example.com".into()],
                every_use: false,
                value: SecretText("value".into()),
            },
            ControlCommand::CredentialRotate {
                name: "api".into(),
                value: SecretText("value".into()),
            },
            ControlCommand::CredentialRemove { name: "api".into() },
            ControlCommand::Bind {
                server: server(),
                credential: "api".into(),
            },
            ControlCommand::MoveToKeychain {
                server: server(),
                var: "TOKEN".into(),
            },
            ControlCommand::Unbind {
                server: server(),
                credential: "api".into(),
            },
            ControlCommand::Prove {
                what: "remove server 'fixture'".into(),
            },
            ControlCommand::SetPassphrase {
                passphrase: SecretText("another passphrase".into()),
            },
            ControlCommand::DismissLeaks,
            ControlCommand::EveryUse { set: None },
            every_use(EveryUse::Confirm),
            every_use(EveryUse::Off),
        ];
        // Each kind of request is in the table (a new one is a compile error here until it is).
        let kinds: std::collections::BTreeSet<&str> = commands
            .iter()
            .map(|command| match command {
                ControlCommand::Status
                | ControlCommand::Restart { .. }
                | ControlCommand::ConfigChanged
                | ControlCommand::Journals
                | ControlCommand::Approvals
                | ControlCommand::Answer { .. }
                | ControlCommand::Grants
                | ControlCommand::Revoke { .. }
                | ControlCommand::RevokeRun { .. }
                | ControlCommand::Lock
                | ControlCommand::Unlock
                | ControlCommand::Settings { .. }
                | ControlCommand::CredentialAdd { .. }
                | ControlCommand::CredentialRotate { .. }
                | ControlCommand::CredentialRemove { .. }
                | ControlCommand::Bind { .. }
                | ControlCommand::MoveToKeychain { .. }
                | ControlCommand::Unbind { .. }
                | ControlCommand::Prove { .. }
                | ControlCommand::SetPassphrase { .. }
                | ControlCommand::DismissLeaks
                | ControlCommand::EveryUse { .. } => command.name(),
            })
            .collect();
        assert_eq!(kinds.len(), 22, "{kinds:?}");

        let window = Origin::App(postern_domain::AnswerChannel::Window);
        let socket = Origin::Socket {
            peer: Some(std::process::id()),
        };
        for command in commands {
            let needs = command.need().needs_proof();
            for origin in [window, socket] {
                let clicked = origin == window && command == ControlCommand::DismissLeaks;
                let result = control.request(command.clone(), None, origin);
                let asked = matches!(result, Err(Refusal::Presence(_)));
                assert_eq!(
                    asked,
                    needs && !clicked,
                    "{} from {origin:?}: {result:?}",
                    command.act()
                );
            }
        }
        assert_eq!(
            engine.authority().vault(),
            postern_domain::decision::VaultState::Locked,
            "the lock in the table took effect, the unlock without a proof did not"
        );
        engine.shutdown().await;
    }

    /// The leak notices are the person's live warning: the app's own window clears them with
    /// a click, any process on the socket only with the person's proof.
    #[tokio::test]
    async fn only_the_apps_window_dismisses_the_leak_notices_without_a_proof() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::start_with_secrets(Home::at(dir.path()), memory())
            .await
            .expect("engine");
        let control = engine.control();
        use postern_gateway::hello::ControlCommand;
        let refused = control
            .request(
                ControlCommand::DismissLeaks,
                None,
                Origin::Socket {
                    peer: Some(std::process::id()),
                },
            )
            .expect_err("no proof from the socket");
        assert!(
            matches!(
                refused,
                Refusal::Presence(authority::PresenceError::Required { .. })
            ),
            "{refused:?}"
        );
        let dismissed = control
            .request(
                ControlCommand::DismissLeaks,
                None,
                Origin::App(postern_domain::AnswerChannel::Window),
            )
            .expect("the window's click");
        assert!(
            matches!(
                dismissed,
                answer::ControlAnswer::DismissLeaks { dismissed: 0 }
            ),
            "{dismissed:?}"
        );
        engine.shutdown().await;
    }

    #[tokio::test]
    async fn forgetting_a_home_deletes_its_keychain_entries_once_no_engine_owns_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let secrets = memory();
        let engine = Engine::start_with_secrets(home.clone(), Arc::clone(&secrets))
            .await
            .expect("engine");
        let name: postern_domain::credential::CredentialName = "api".parse().expect("name");
        engine
            .authority()
            .set_passphrase(&postern_vault::Secret::new("a passphrase".into()), None)
            .expect("passphrase");
        let proven = engine
            .authority()
            .prove(
                Some(&authority::Proof::passphrase("a passphrase".into())),
                "test",
            )
            .expect("proof");
        engine
            .authority()
            .add_credential(
                &proven,
                &name,
                postern_domain::CredentialSpec::new(
                    postern_domain::credential::Injection::Bearer,
                    &["api.example.com".into()],
                )
                .expect("spec"),
                false,
                postern_vault::Secret::new("a-value".into()),
            )
            .expect("credential");
        let refused = forget_secrets(&home, &*secrets).expect_err("an engine owns the home");
        assert!(
            matches!(refused, EngineError::AlreadyRunning { .. }),
            "{refused}"
        );
        assert!(secrets.get(audit::OPENING_KEY).expect("get").is_some());

        engine.shutdown().await;
        let forgotten = forget_secrets(&home, &*secrets).expect("forget");
        assert_eq!(
            forgotten,
            [
                audit::OPENING_KEY,
                audit::ANCHOR,
                authority::VAULT_KEY_ITEM,
                "credential.api.v1"
            ]
        );
        for name in &forgotten {
            assert!(secrets.get(name).expect("get").is_none(), "{name} is gone");
        }
        assert!(forget_secrets(&home, &*secrets).expect("again").is_empty());
    }

    #[tokio::test]
    async fn status_lists_configured_servers_from_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let engine = Engine::start_with_secrets(home.clone(), memory())
            .await
            .expect("engine");
        let config = ServerConfig::new(
            "time".parse().expect("label"),
            vec!["mcp-server-time".into()],
            None,
            vec!["TOKEN=secret-value".parse().expect("env")],
        )
        .expect("config");
        // Configuration written by another process (the CLI) shows up at once.
        Store::open(home.path())
            .expect("store")
            .add_server(&config)
            .expect("add");
        let status = engine.status().expect("status");
        assert_eq!(status.servers.len(), 1);
        assert_eq!(status.servers[0].label, "time");
        assert_eq!(status.servers[0].running, 0);
        assert!(status.sessions.is_empty());
        let json = serde_json::to_string(&status).expect("json");
        assert!(
            !json.contains("secret-value"),
            "env values never reach status payloads: {json}"
        );
        engine.shutdown().await;
    }
}
