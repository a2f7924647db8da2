//! The engine this app hosts. One engine per home: if another process got there first, the
//! app still opens and says so. Every change the engine reports reaches the window
//! (`status-changed`); a change of its gate (approvals, the vault lock, settings) also
//! reaches the approval window, the notifications and the tray ([`approvals::sync`]).

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use postern_engine::{Authority, Engine, EngineError, Home, HomeError};
use postern_vault::{Keychain, SecretStore};
use tokio::sync::watch;

use crate::view::EngineView;
use crate::{Desk, approvals};

/// The event the UI listens to; its payload is an [`EngineView`].
pub const STATUS_CHANGED: &str = "status-changed";

/// The engine, or why there is none.
#[derive(Debug)]
pub struct Shell {
    slot: Mutex<Slot>,
}

#[derive(Debug)]
enum Slot {
    NotStarted,
    Starting { home: String },
    Running(Hosted),
    Unavailable(EngineView),
    Stopped { home: String },
}

/// An engine this app started, and the keychain it was started with (the engine keeps only
/// the audit log's public key: opening a record for a clicked mark, or verifying the log,
/// reads the keychain again).
#[derive(Debug)]
pub struct Hosted {
    /// The engine.
    pub engine: Engine,
    /// The secret store the engine was started with.
    pub secrets: Arc<dyn SecretStore>,
}

impl Default for Shell {
    fn default() -> Self {
        Self {
            slot: Mutex::new(Slot::NotStarted),
        }
    }
}

impl Shell {
    /// What the window shows now.
    pub fn view(&self) -> EngineView {
        match &*self.lock() {
            Slot::NotStarted => EngineView::Starting {
                home: String::new(),
            },
            Slot::Starting { home } => EngineView::Starting { home: home.clone() },
            Slot::Running(Hosted { engine, .. }) => {
                EngineView::running(&display(engine.home()), engine.status())
            }
            Slot::Unavailable(view) => view.clone(),
            Slot::Stopped { home } => EngineView::Stopped { home: home.clone() },
        }
    }

    /// The running engine's gate: approvals, the vault lock, settings. `None` while no
    /// engine runs here.
    pub fn authority(&self) -> Option<Authority> {
        self.with_engine(|engine| engine.authority().clone())
    }

    /// The running engine's home. `None` while no engine runs here.
    pub fn home(&self) -> Option<Home> {
        self.with_engine(|engine| engine.home().clone())
    }

    /// The keychain the running engine was started with.
    pub fn secrets(&self) -> Option<Arc<dyn SecretStore>> {
        match &*self.lock() {
            Slot::Running(hosted) => Some(Arc::clone(&hosted.secrets)),
            _ => None,
        }
    }

    /// Runs `f` on the running engine, holding the shell's lock: keep it short (no waiting on
    /// a peer; a read of a few rows is fine). `None` while no engine runs here.
    pub fn with_engine<T>(&self, f: impl FnOnce(&Engine) -> T) -> Option<T> {
        match &*self.lock() {
            Slot::Running(hosted) => Some(f(&hosted.engine)),
            _ => None,
        }
    }

    /// Stops the engine, if this app runs one. Safe to call more than once.
    pub async fn shutdown(&self) {
        let engine = {
            let mut slot = self.lock();
            match std::mem::replace(&mut *slot, Slot::NotStarted) {
                Slot::Running(Hosted { engine, .. }) => {
                    *slot = Slot::Stopped {
                        home: display(engine.home()),
                    };
                    Some(engine)
                }
                Slot::Starting { home } => {
                    *slot = Slot::Stopped { home };
                    None
                }
                other => {
                    *slot = other;
                    None
                }
            }
        };
        if let Some(engine) = engine {
            tracing::info!("stopping the engine");
            engine.shutdown().await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs a freshly started engine, unless the app began quitting meanwhile: then the
    /// engine is handed back, to be shut down.
    #[must_use = "an engine handed back must be shut down"]
    fn install(&self, hosted: Hosted) -> Option<Engine> {
        let mut slot = self.lock();
        if matches!(*slot, Slot::Stopped { .. }) {
            return Some(hosted.engine);
        }
        *slot = Slot::Running(hosted);
        None
    }
}

impl Desk {
    /// Starts the engine for `home` on the desk's runtime, then keeps the windows told about
    /// every change the engine reports. Its secrets live in the OS keychain.
    pub fn start(self: &Arc<Self>, home: Result<Home, HomeError>) {
        self.start_with(home, |home| async move {
            // The keychain's entries are named after the home's canonical path: make it exist
            // first, as `Engine::start` does.
            home.prepare()?;
            let secrets: Arc<dyn SecretStore> = Arc::new(Keychain::for_home(home.path()));
            let engine = Engine::start_with_secrets(home, Arc::clone(&secrets)).await?;
            Ok(Hosted { engine, secrets })
        });
    }

    /// [`Desk::start`] with another way to start the engine (tests keep secrets in memory).
    pub fn start_with<F, Fut>(self: &Arc<Self>, home: Result<Home, HomeError>, start: F)
    where
        F: FnOnce(Home) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Hosted, EngineError>> + Send,
    {
        let home = match home {
            Ok(home) => home,
            Err(err) => {
                tracing::error!("{err}");
                self.set(Slot::Unavailable(EngineView::no_home(&err)));
                return;
            }
        };
        let shown = display(&home);
        self.set(Slot::Starting {
            home: shown.clone(),
        });
        let desk = Arc::clone(self);
        self.runtime.spawn(async move {
            match start(home).await {
                Ok(hosted) => {
                    tracing::info!(home = %shown, "engine started");
                    let sessions = hosted.engine.changes();
                    let gate = hosted.engine.authority().changes();
                    if let Some(engine) = desk.shell.install(hosted) {
                        engine.shutdown().await;
                        return;
                    }
                    desk.notify();
                    approvals::sync(&desk);
                    desk.forward_changes(sessions, gate).await;
                    approvals::sync(&desk);
                }
                Err(err) => {
                    tracing::warn!(home = %shown, "engine not started: {err}");
                    desk.set(Slot::Unavailable(EngineView::start_failed(
                        Some(shown),
                        &err,
                    )));
                }
            }
        });
    }

    /// Emits [`STATUS_CHANGED`] with the current view to every window.
    pub fn notify(&self) {
        self.surface.emit(
            STATUS_CHANGED,
            None,
            crate::desk::to_json(&self.shell.view()),
        );
    }

    /// Tells the windows and the tray about every change, until the engine stops (and drops
    /// its senders).
    async fn forward_changes(
        &self,
        mut sessions: watch::Receiver<u64>,
        mut gate: watch::Receiver<u64>,
    ) {
        loop {
            tokio::select! {
                changed = sessions.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.notify();
                }
                changed = gate.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.notify();
                    approvals::sync(self);
                }
            }
        }
    }

    fn set(&self, slot: Slot) {
        *self.shell.lock() = slot;
        self.notify();
    }
}

fn display(home: &Home) -> String {
    home.path().display().to_string()
}

/// An engine on `home` whose secrets stay in memory: tests never touch the OS keychain.
#[cfg(test)]
pub(crate) async fn test_engine(home: Home) -> Result<Engine, EngineError> {
    Ok(test_hosted(home).await?.engine)
}

/// [`test_engine`] with its in-memory keychain, as [`start_with`] takes it.
#[cfg(test)]
pub(crate) async fn test_hosted(home: Home) -> Result<Hosted, EngineError> {
    let secrets: Arc<dyn SecretStore> = Arc::new(postern_vault::MemoryStore::new());
    let engine = Engine::start_with_secrets(home, Arc::clone(&secrets)).await?;
    Ok(Hosted { engine, secrets })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Unavailable;

    #[test]
    fn a_new_shell_is_starting() {
        assert!(matches!(
            Shell::default().view(),
            EngineView::Starting { .. }
        ));
    }

    #[tokio::test]
    async fn shutdown_stops_a_running_engine_once() {
        let dir = tempfile::tempdir().unwrap();
        let hosted = test_hosted(Home::at(dir.path())).await.unwrap();
        let shell = Shell::default();
        assert!(shell.install(hosted).is_none());
        assert!(matches!(shell.view(), EngineView::Running { .. }));

        shell.shutdown().await;
        assert_eq!(
            shell.view(),
            EngineView::Stopped {
                home: dir.path().display().to_string()
            }
        );
        shell.shutdown().await;
        assert!(matches!(shell.view(), EngineView::Stopped { .. }));
    }

    #[tokio::test]
    async fn an_engine_that_starts_after_quit_is_handed_back() {
        let dir = tempfile::tempdir().unwrap();
        let shell = Shell::default();
        *shell.lock() = Slot::Starting { home: "h".into() };
        shell.shutdown().await;
        let hosted = test_hosted(Home::at(dir.path())).await.unwrap();
        let engine = shell
            .install(hosted)
            .expect("handed back: the desk is quitting");
        engine.shutdown().await;
        assert!(matches!(shell.view(), EngineView::Stopped { .. }));
    }

    #[test]
    fn unavailable_is_shown_as_is() {
        let view = EngineView::Unavailable {
            home: Some("/h".into()),
            reason: Unavailable::AlreadyRunning,
            message: "taken".into(),
        };
        let shell = Shell {
            slot: Mutex::new(Slot::Unavailable(view.clone())),
        };
        assert_eq!(shell.view(), view);
    }
}
