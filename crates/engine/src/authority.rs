//! The gate's decisions, live: the vault lock, session admissions, grants, every-use
//! settings and open approval requests, around the pure ladder in
//! `postern_domain::decision` (issue 5). The data path asks through
//! [`Authorizer`]; humans answer through [`Authority::answer`] (the app in-process, the CLI
//! over the socket once the engine checked the caller is not an agent).
//!
//! Grants live in memory: each is bound to one execution epoch, and epochs end with the
//! engine, so a grant could never cover anything after a restart. Their history is in the
//! audit log (`approval_granted`, `grant_ended`) and the Sessions journal. Settings persist
//! in the store.
//!
//! This file holds [`Authority`], its state and the data path's [`Authorizer`]; the rest
//! is split by concern:
//!
//! - `approvals`: open approval requests, a human's answers, timeouts ([`AnswerError`]);
//! - `grants`: a call's decision on the ladder, grant matching (carried across a relaunch,
//!   used up by one call), admissions, expiry and revocation;
//! - `lock`: the vault lock, the sweeper's round (run ends, the idle lock) and the
//!   settings a human controls ([`Settings`], [`SettingsUpdate`], [`SettingsError`]);
//! - `credentials`: credentials in the keychain and their release to approved launches
//!   ([`CredentialError`]);
//! - `clock`: the time the decisions use ([`Clock`]).

mod approvals;
mod clock;
mod credentials;
mod egress;
mod grants;
mod lock;
mod presence;
mod release;
mod retry;
mod seal;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use postern_domain::decision::{ApprovalCard, Ask, Denial, EveryUseSetting};
use postern_domain::{AgentRun, ApprovalId, AuditEvent, CallId, Grant, ServerLabel};
use postern_gateway::Command;
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::{
    Authorizer, CallToAuthorize, Decided, OperationToAuthorize, Release, Verdict, Withdrawal,
    Withdrawn,
};
use postern_store::Store;
use postern_vault::SecretStore;
use tokio::sync::{broadcast, watch};

pub use approvals::AnswerError;
pub use clock::{Clock, ManualClock, SystemClock};
pub use credentials::CredentialError;
use grants::run_alive;
use lock::load_settings;
pub use lock::{
    AUTO_LOCK_MS, MAX_APPROVAL_TIMEOUT_MS, MAX_AUTO_LOCK_MS, MAX_CLICK_WINDOW_MS, Settings,
    SettingsError, UnlockError, mode_name,
};
pub use presence::{
    MIN_PASSPHRASE_CHARS, PresenceError, Proof, Proven, VAULT_KEY_ITEM, check_offline,
    passphrase_known,
};
use release::{Approved, Carry};
pub use retry::RETRY_WINDOW_MS;

pub use postern_domain::decision::{SessionMode, SettingsUpdate, VaultState};

use crate::{AuditLog, AuditState};

/// How often grants are swept and the idle lock is checked.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// The gate's live state; cloning shares it.
#[derive(Clone)]
pub struct Authority {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

struct Inner {
    state: Mutex<State>,
    audit: Arc<AuditLog>,
    store: Arc<Mutex<Store>>,
    clock: Arc<dyn Clock>,
    secrets: Arc<dyn SecretStore>,
    commands: broadcast::Sender<Command>,
    changes: watch::Sender<u64>,
    /// Held while a proof is checked: one at a time (`presence`).
    proving: Mutex<()>,
    /// The egress broker, once started (`Authority::start_egress`).
    egress: std::sync::OnceLock<postern_egress::Broker>,
    /// The placeholders lent to open built-in calls: taken back when the vault locks or a
    /// credential changes (`egress`).
    lent: Mutex<Vec<std::sync::Weak<postern_egress::Admission>>>,
}

struct State {
    vault: VaultState,
    /// The vault key, while unlocked: seals credential values and the settings (`presence`).
    key: Option<postern_vault::VaultKey>,
    /// Whether a passphrase was chosen for this home.
    passphrase_set: bool,
    /// Wrong proofs in a row and the back-off, per channel.
    attempts: presence::Backoffs,
    /// When the last passphrase was proven while unlocked (wall ms): plain clicks in the app
    /// count as a proof of an approval for `click_window_ms` after it. Cleared at lock.
    last_proof_ms: Option<u64>,
    /// Settings found wider in the store than the engine last wrote them, said in status.
    config_warning: Option<String>,
    /// The credential bindings (server, credential) the seal vouches for, while unlocked:
    /// known at unlock (or at the first passphrase), changed only by a person's `bind` and
    /// `unbind`, narrowed to what the store still holds. What the seal is written from, so
    /// a row written into the store behind the engine's back never becomes vouched for.
    bindings: Option<Vec<(String, String)>>,
    /// Each credential's spec (its injection and hosts, `seal::spec_of`) as a person added
    /// it, while unlocked, kept like `bindings`: a spec edited in the store (hosts widened, a
    /// brokered credential made a plain env value) is put back, never used.
    specs: Option<Vec<(String, String)>>,
    /// The approved baselines (server, digest of the stored row) the seal vouches for, kept
    /// like `bindings`: a person's approval changes them; a row edited in the store is not
    /// compared with, and never sealed.
    baselines: Option<Vec<(String, String)>>,
    settings: Settings,
    every_use: Vec<EveryUseSetting>,
    grants: Vec<Grant>,
    /// Agent runs a human (or observe mode) admitted, per server.
    admitted: HashSet<(AgentRun, ServerLabel)>,
    pending: BTreeMap<ApprovalId, Pending>,
    /// The last epoch and catalog of each server a human approved under: what a new card
    /// is compared with (a cache of the store's, filled as cards need it).
    last_approved: BTreeMap<ServerLabel, approvals::Baseline>,
    /// The last call or answer (unix ms), for the idle lock.
    last_activity: u64,
    /// The wall clock minus the monotonic one at the last look (ms): growing by more than
    /// a minute means the machine slept in between.
    clock_offset: i128,
    /// Credential releases humans approved (per run, server, identity).
    releases: HashSet<Approved>,
    /// The head named by the seal the last unlock opened: what the settings in force were
    /// narrowed through when that unlock read no narrowing (the log had no head). A seal
    /// written while the log still has none names it (`seal_config`).
    sealed_head: Option<String>,
    /// Approvals waiting for the relaunch they caused.
    carries: Vec<Carry>,
    /// Decisions given after the agent stopped waiting, for its identical retry.
    later: Vec<retry::Later>,
    /// Requests the egress broker refused because they carried a placeholder toward a host it
    /// may not go to, until a person has seen them (newest last, at most [`MAX_LEAKS`]).
    leaks: Vec<crate::LeakNotice>,
    /// The last proof held that came over the socket (status shows it).
    socket_proof: Option<crate::SocketProof>,
}

/// How many leak notices are kept for a person to see.
const MAX_LEAKS: usize = 16;

struct Pending {
    card: ApprovalCard,
    ask: Ask,
    call: CallToAuthorize,
    done: Decided,
    /// Whether the call still waits; `false` once its agent cancelled it (the card stays
    /// open for the identical retry, `retry`).
    waiting: bool,
}

impl Authority {
    /// The gate's state for an engine: settings from `store`, the vault locked (a person
    /// proves their presence to unlock, after every start), nothing granted. Must run inside
    /// a tokio runtime (it starts the sweeper: grant expiry and the idle lock).
    pub fn new(
        audit: Arc<AuditLog>,
        store: Arc<Mutex<Store>>,
        clock: Arc<dyn Clock>,
        secrets: Arc<dyn SecretStore>,
        commands: broadcast::Sender<Command>,
    ) -> Self {
        let now = clock.now_ms();
        let (settings, every_use, attempts) = match store.lock() {
            Ok(store) => (
                load_settings(&store),
                store.every_use().unwrap_or_else(|e| {
                    tracing::error!("cannot read every-use settings ({e})");
                    Vec::new()
                }),
                presence::load_attempts(&store, now),
            ),
            Err(_) => (
                Settings::default(),
                Vec::new(),
                presence::Backoffs::default(),
            ),
        };
        let passphrase_set = passphrase_known(secrets.as_ref());
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                vault: VaultState::Locked,
                key: None,
                passphrase_set,
                attempts,
                last_proof_ms: None,
                config_warning: None,
                bindings: None,
                specs: None,
                baselines: None,
                settings,
                every_use,
                grants: Vec::new(),
                admitted: HashSet::new(),
                pending: BTreeMap::new(),
                last_approved: BTreeMap::new(),
                last_activity: now,
                clock_offset: i128::from(now) - i128::from(clock.monotonic_ms()),
                releases: HashSet::new(),
                sealed_head: None,
                carries: Vec::new(),
                later: Vec::new(),
                leaks: Vec::new(),
                socket_proof: None,
            }),
            audit,
            store,
            clock,
            secrets,
            commands,
            changes: watch::channel(0).0,
            proving: Mutex::new(()),
            egress: std::sync::OnceLock::new(),
            lent: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(inner) = weak.upgrade() else { return };
                Authority { inner }.sweep();
            }
        });
        Self { inner }
    }

    /// The vault's state (quarantined when the audit log failed verification).
    pub fn vault(&self) -> VaultState {
        let vault = self.state().vault;
        self.effective(vault)
    }

    /// The vault's state now, locking it first if the machine slept or the idle time passed,
    /// as a decision does (the sweeper's next round may be seconds away).
    pub(crate) fn vault_now(&self) -> VaultState {
        let now = self.now();
        let mut state = self.state();
        let locked = self
            .stepped_away(&mut state, now)
            .is_some_and(|reason| self.lock_in(&mut state, &reason));
        let vault = self.effective(state.vault);
        drop(state);
        if locked {
            self.changed();
        }
        vault
    }

    /// The gate at a glance.
    pub fn gate_status(&self) -> crate::GateStatus {
        let state = self.state();
        crate::GateStatus {
            vault: self.effective(state.vault),
            approvals: state.pending.len() as u32,
            grants: state.grants.len() as u32,
            settings: state.settings,
            passphrase_set: state.passphrase_set,
            clicks_until_ms: presence::clicks_until(&state),
            config_warning: state.config_warning.clone(),
            leaks: state.leaks.clone(),
            socket_proof: state.socket_proof.clone(),
        }
    }

    /// The current settings.
    pub fn settings(&self) -> Settings {
        self.state().settings
    }

    /// The every-use settings.
    pub fn every_use(&self) -> Vec<EveryUseSetting> {
        self.state().every_use.clone()
    }

    /// A receiver that changes whenever approvals, grants, the vault or settings change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    // ---- internals ----

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    fn changed(&self) {
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn effective(&self, vault: VaultState) -> VaultState {
        match self.inner.audit.status().state {
            AuditState::Quarantined { .. } => VaultState::Quarantined,
            _ => vault,
        }
    }
}

impl Authorizer for Authority {
    fn authorize(&self, call: CallToAuthorize, done: Decided) {
        let now = self.now();
        let mut state = self.state();
        // A call after the machine slept, or after the idle time, finds the vault locked:
        // the sweeper's next round may be seconds away.
        let locked = self
            .stepped_away(&mut state, now)
            .is_some_and(|reason| self.lock_in(&mut state, &reason));
        state.last_activity = now;
        // A log that cannot be written could record neither the question nor the answer.
        if state.vault == VaultState::Ready
            && let AuditState::Unavailable { reason } = self.inner.audit.status().state
        {
            done(Verdict::Deny(Denial::audit_unavailable(&reason)));
            return;
        }
        self.decide_locked(&mut state, call, done, now);
        drop(state);
        if locked {
            self.changed();
        }
    }

    fn authorize_operation(&self, operation: &OperationToAuthorize) -> Verdict {
        let now = self.now();
        let mut state = self.state();
        let locked = self
            .stepped_away(&mut state, now)
            .is_some_and(|reason| self.lock_in(&mut state, &reason));
        let verdict = match self.inner.audit.status().state {
            AuditState::Unavailable { reason } if state.vault == VaultState::Ready => {
                Verdict::Deny(Denial::audit_unavailable(&reason))
            }
            _ => self.decide_operation(&mut state, operation, now),
        };
        drop(state);
        if locked {
            self.changed();
        }
        verdict
    }

    fn withdraw(&self, session: u64, call: CallId, why: Withdrawn) -> Withdrawal {
        let mut state = self.state();
        // A call is either decided at once or waits in `pending` until whatever takes it out
        // (an answer, the timeout, the lock) calls its `done`: not there means decided.
        let Some(id) = state
            .pending
            .iter()
            .find(|(_, p)| p.call.session == session && p.call.request.call == call)
            .map(|(id, _)| *id)
        else {
            return Withdrawal::AlreadyDecided;
        };
        // An agent that gave up waiting (its client's timeout) may well retry the same call:
        // the card stays open for it, and an answer covers the retry (`retry`).
        if why == Withdrawn::Cancelled
            && let Some(pending) = state.pending.get_mut(&id)
            && retry::RetryKey::of(&pending.call).is_some()
        {
            pending.waiting = false;
            pending.done = Box::new(|_| {});
            tracing::info!(approval = %id, "the agent stopped waiting; the request stays open for its identical retry");
            drop(state);
            self.changed();
            return Withdrawal::Withdrawn;
        }
        state.pending.remove(&id);
        self.inner.audit.record(AuditEvent::ApprovalExpired {
            approval: id,
            session,
            code: "withdrawn".into(),
            reason: why.as_str().into(),
        });
        tracing::info!(approval = %id, "approval request withdrawn: {}", why.as_str());
        drop(state);
        self.changed();
        Withdrawal::Withdrawn
    }

    fn release(
        &self,
        _session: u64,
        agent: Option<&postern_domain::AgentIdentity>,
        config: &postern_domain::ServerConfig,
        identity: &postern_domain::Digest,
    ) -> Release {
        self.release_for(agent, config, identity)
    }

    fn inject(
        &self,
        server: &ServerLabel,
        to: &postern_gateway::authorize::Destination,
        credentials: &std::collections::BTreeSet<String>,
        egress: Option<Arc<dyn postern_gateway::authorize::LaunchEgress>>,
    ) -> Result<
        Vec<postern_gateway::authorize::InjectedHeader>,
        postern_gateway::authorize::InjectError,
    > {
        self.inject_for(server, to, credentials, egress)
    }

    fn session_ended(&self, _session: u64, agent: Option<&postern_domain::AgentIdentity>) {
        // Grants "until the agent run ends" outlive a session while the agent process
        // lives (it may reconnect); the sweep ends them with the process.
        if agent.is_some_and(|a| !run_alive(AgentRun::of(a))) {
            self.sweep();
        }
    }
}

fn random() -> u128 {
    ulid::Ulid::new().random()
}
