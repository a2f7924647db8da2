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

mod clock;
mod credentials;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::decision::{
    APPROVAL_TIMEOUT_MS, ApprovalCard, Ask, AskFor, CardInputs, CardState, Decision, Denial,
    EveryUseSetting, GrantChoice, Inputs, Reply, SessionStatus, Settlement, decide,
};
use postern_domain::{
    AgentRun, ApprovalId, AuditEvent, CallId, ExecutionRecord, Grant, GrantEnd, GrantId,
    ServerLabel,
};
use postern_gateway::Command;
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::{
    Authorizer, CallToAuthorize, Decided, Release, Verdict, Withdrawn,
};
use postern_store::Store;
use postern_vault::SecretStore;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use ts_rs::TS;

pub use clock::{Clock, ManualClock, SystemClock};
pub use credentials::CredentialError;
use credentials::{Approved, Carry};

pub use postern_domain::decision::{SessionMode, VaultState};

use crate::{AuditLog, AuditState};

/// The idle time after which the vault locks itself, by default (8 hours).
pub const AUTO_LOCK_MS: u64 = 8 * 60 * 60 * 1000;
/// How often grants are swept and the idle lock is checked.
const SWEEP_EVERY: Duration = Duration::from_secs(15);
/// The longest "for N minutes" a human may choose (a day).
const MAX_MINUTES: u32 = 24 * 60;

/// The settings a human controls (persisted in the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// `prompt` (a human admits each new agent run) or `observe` (admitted and journaled).
    #[ts(type = "\"prompt\" | \"observe\"")]
    pub session_mode: SessionMode,
    /// How long a human has to answer an approval request (ms).
    #[ts(type = "number")]
    pub approval_timeout_ms: u64,
    /// Lock the vault after this long without a call or an answer (ms; 0: never).
    #[ts(type = "number")]
    pub auto_lock_ms: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            session_mode: SessionMode::Prompt,
            approval_timeout_ms: APPROVAL_TIMEOUT_MS,
            auto_lock_ms: AUTO_LOCK_MS,
        }
    }
}

/// A change to [`Settings`]; fields left out keep their value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingsUpdate {
    /// The new session mode.
    pub session_mode: Option<SessionMode>,
    /// The new approval timeout (ms, at least 1 s).
    pub approval_timeout_ms: Option<u64>,
    /// The new auto-lock time (ms; 0: never).
    pub auto_lock_ms: Option<u64>,
}

/// Why a human's answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No open request has that id: answered, timed out, withdrawn, or never asked. A late
    /// decision is ignored.
    #[error("no open approval request {0}: it was answered, timed out or withdrawn")]
    NotOpen(String),
    /// The answer does not fit the card.
    #[error("{0}")]
    Unacceptable(String),
}

/// Why a settings change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

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
}

struct State {
    vault: VaultState,
    settings: Settings,
    every_use: Vec<EveryUseSetting>,
    grants: Vec<Grant>,
    /// Agent runs a human (or observe mode) admitted, per server.
    admitted: HashSet<(AgentRun, ServerLabel)>,
    pending: BTreeMap<ApprovalId, Pending>,
    /// The last epoch and catalog of each server a human approved under: what a new card
    /// is compared with.
    last_approved: BTreeMap<ServerLabel, (ExecutionRecord, Arc<Catalog>)>,
    /// The last call or answer (unix ms), for the idle lock.
    last_activity: u64,
    /// Credential releases humans approved (per run, server, identity).
    releases: HashSet<Approved>,
    /// Approvals waiting for the relaunch they caused.
    carries: Vec<Carry>,
}

struct Pending {
    card: ApprovalCard,
    ask: Ask,
    call: CallToAuthorize,
    done: Decided,
}

impl Authority {
    /// The gate's state for an engine: settings from `store`, the vault ready (the human
    /// who started the engine is present), nothing granted. Must run inside a tokio runtime
    /// (it starts the sweeper: grant expiry and the idle lock).
    pub fn new(
        audit: Arc<AuditLog>,
        store: Arc<Mutex<Store>>,
        clock: Arc<dyn Clock>,
        secrets: Arc<dyn SecretStore>,
        commands: broadcast::Sender<Command>,
    ) -> Self {
        // Every-use settings that cannot be read might have asked for a human: fail closed
        // by starting locked, so the human sees the problem before anything runs.
        let (settings, every_use, vault) = match store.lock() {
            Ok(store) => match store.every_use() {
                Ok(every_use) => (load_settings(&store), every_use, VaultState::Ready),
                Err(e) => {
                    tracing::error!(
                        "cannot read every-use settings ({e}); the vault starts locked"
                    );
                    (load_settings(&store), Vec::new(), VaultState::Locked)
                }
            },
            Err(_) => (Settings::default(), Vec::new(), VaultState::Locked),
        };
        let now = clock.now_ms();
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                vault,
                settings,
                every_use,
                grants: Vec::new(),
                admitted: HashSet::new(),
                pending: BTreeMap::new(),
                last_approved: BTreeMap::new(),
                last_activity: now,
                releases: HashSet::new(),
                carries: Vec::new(),
            }),
            audit,
            store,
            clock,
            secrets,
            commands,
            changes: watch::channel(0).0,
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

    /// The gate at a glance.
    pub fn gate_status(&self) -> crate::GateStatus {
        let state = self.state();
        crate::GateStatus {
            vault: self.effective(state.vault),
            approvals: state.pending.len() as u32,
            grants: state.grants.len() as u32,
            settings: state.settings,
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

    /// Open approval requests, oldest first.
    pub fn approvals(&self) -> Vec<ApprovalCard> {
        let mut cards: Vec<ApprovalCard> = self
            .state()
            .pending
            .values()
            .map(|p| p.card.clone())
            .collect();
        cards.sort_by_key(|c| (c.asked_at, c.id));
        cards
    }

    /// Live grants.
    pub fn grants(&self) -> Vec<Grant> {
        let now = self.now();
        let mut state = self.state();
        self.expire_grants(&mut state, now);
        state.grants.clone()
    }

    /// A receiver that changes whenever approvals, grants, the vault or settings change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// A human's answer to an open request. Takes effect at once: the waiting call is
    /// forwarded or refused.
    pub fn answer(&self, id: ApprovalId, reply: Reply) -> Result<(), AnswerError> {
        let now = self.now();
        let mut state = self.state();
        state.last_activity = now;
        let Some(mut pending) = state.pending.remove(&id) else {
            return Err(AnswerError::NotOpen(id.to_string()));
        };
        if now >= pending.card.expires_at {
            // Its timer has not fired yet (a machine that slept): the answer is late all
            // the same.
            drop(state);
            self.expire(id, pending);
            return Err(AnswerError::NotOpen(id.to_string()));
        }
        // Any "for N minutes" is fine where the card offers minutes at all.
        if let Reply::Approve {
            choice: Some(choice @ GrantChoice::ForMinutes { minutes }),
        } = reply
        {
            let offers_minutes = pending
                .ask
                .choices
                .iter()
                .any(|c| matches!(c, GrantChoice::ForMinutes { .. }));
            if offers_minutes && !(1..=MAX_MINUTES).contains(&minutes) {
                state.pending.insert(id, pending);
                return Err(AnswerError::Unacceptable(format!(
                    "minutes must be between 1 and {MAX_MINUTES}"
                )));
            }
            if offers_minutes && !pending.ask.choices.contains(&choice) {
                pending.ask.choices.push(choice);
            }
        }
        let settlement = pending.ask.settle(
            Some(reply),
            pending.card.asked_at,
            now,
            state.settings.approval_timeout_ms,
            CardState::Open,
        );
        match settlement {
            Settlement::Pending | Settlement::Unacceptable => {
                let offered = describe_choices(&pending.ask.choices);
                state.pending.insert(id, pending);
                Err(AnswerError::Unacceptable(format!(
                    "this request asks about {}; answer with one of: {offered}",
                    if offered == "none" {
                        "the session only"
                    } else {
                        "the call"
                    }
                )))
            }
            Settlement::Refused(denial) => {
                let (session, code) = (pending.call.session, denial.code);
                let event = if code == postern_domain::decision::DenyCode::ApprovalDenied {
                    AuditEvent::ApprovalDenied {
                        approval: id,
                        session,
                    }
                } else {
                    expired_event(id, session, &denial, "no answer in time")
                };
                self.inner.audit.record(event);
                (pending.done)(Verdict::Deny(denial));
                self.changed();
                Ok(())
            }
            Settlement::Approved {
                admit_session,
                grant,
            } => {
                let call = pending.call;
                let run = call.request.run();
                if admit_session && let Some(run) = run {
                    self.admit(&mut state, &call, run, "human");
                }
                Self::approve_release(&mut state, &call);
                if call
                    .withheld
                    .iter()
                    .any(|w| call.request.credentials.contains(w))
                {
                    // This launch lacks what was just released: the call goes to a relaunch
                    // of the same code, and its grant with it.
                    state.carries.push(Carry {
                        approval: id,
                        session: call.session,
                        identity: call.record.identity_digest(),
                        tool: call.request.tool.clone(),
                        choice: grant,
                    });
                    state.last_approved.insert(
                        call.request.server.clone(),
                        (call.record.clone(), Arc::clone(&call.catalog)),
                    );
                    drop(state);
                    (pending.done)(Verdict::Relaunch);
                    self.changed();
                    return Ok(());
                }
                let grant = grant.and_then(|choice| {
                    pending
                        .ask
                        .grant(choice, GrantId::new(now, random()), &call.request, now)
                });
                if let Some(grant) = &grant {
                    state.grants.push(grant.clone());
                }
                self.inner.audit.record(AuditEvent::ApprovalGranted {
                    approval: id,
                    session: call.session,
                    admitted_session: admit_session,
                    grant: grant.map(Box::new),
                });
                state.last_approved.insert(
                    call.request.server.clone(),
                    (call.record.clone(), Arc::clone(&call.catalog)),
                );
                self.decide_locked(&mut state, call, pending.done, now);
                self.changed();
                Ok(())
            }
        }
    }

    /// Ends a grant before its time. Returns whether it was live.
    pub fn revoke(&self, id: GrantId) -> bool {
        let mut state = self.state();
        let before = state.grants.len();
        state.grants.retain(|g| g.id != id);
        let revoked = state.grants.len() != before;
        if revoked {
            self.inner.audit.record(AuditEvent::GrantEnded {
                grant: id,
                reason: "revoked by a human".into(),
            });
            self.changed();
        }
        revoked
    }

    /// Locks the vault: every call is refused with `vault_locked` until a human unlocks,
    /// grants and admissions end, open requests are withdrawn. Returns whether it was
    /// unlocked.
    pub fn lock(&self, reason: &str) -> bool {
        let mut state = self.state();
        if state.vault == VaultState::Locked {
            return false;
        }
        state.vault = VaultState::Locked;
        self.inner.audit.record(AuditEvent::VaultLocked {
            reason: reason.to_owned(),
        });
        for grant in std::mem::take(&mut state.grants) {
            self.inner.audit.record(AuditEvent::GrantEnded {
                grant: grant.id,
                reason: "vault locked".into(),
            });
        }
        state.admitted.clear();
        state.releases.clear();
        state.carries.clear();
        let _ = self.inner.commands.send(Command::DropCredentials);
        let denial = Denial::vault_locked();
        for (id, pending) in std::mem::take(&mut state.pending) {
            self.inner.audit.record(expired_event(
                id,
                pending.call.session,
                &denial,
                "the vault was locked while the request was open",
            ));
            (pending.done)(Verdict::Deny(denial.clone()));
        }
        drop(state);
        tracing::info!("vault locked: {reason}");
        self.changed();
        true
    }

    /// Unlocks the vault (the caller checked a human asked). Returns whether it was locked.
    pub fn unlock(&self) -> bool {
        let now = self.now();
        let mut state = self.state();
        if state.vault == VaultState::Ready {
            return false;
        }
        state.vault = VaultState::Ready;
        state.last_activity = now;
        self.inner.audit.record(AuditEvent::VaultUnlocked);
        drop(state);
        tracing::info!("vault unlocked");
        self.changed();
        true
    }

    /// Changes settings (the caller checked a human asked) and persists them.
    pub fn update_settings(&self, update: SettingsUpdate) -> Result<Settings, SettingsError> {
        if update.approval_timeout_ms.is_some_and(|ms| ms < 1000) {
            return Err(SettingsError(
                "the approval timeout must be at least 1 second".into(),
            ));
        }
        let mut state = self.state();
        let mut next = state.settings;
        if let Some(mode) = update.session_mode {
            next.session_mode = mode;
        }
        if let Some(ms) = update.approval_timeout_ms {
            next.approval_timeout_ms = ms;
        }
        if let Some(ms) = update.auto_lock_ms {
            next.auto_lock_ms = ms;
        }
        if next == state.settings {
            return Ok(next);
        }
        {
            let store = self
                .inner
                .store
                .lock()
                .map_err(|_| SettingsError("store unavailable".into()))?;
            store
                .set_setting(SETTINGS_KEY, &next)
                .map_err(|e| SettingsError(e.to_string()))?;
        }
        state.settings = next;
        self.inner.audit.record(AuditEvent::ConfigChanged {
            what: format!(
                "settings: session mode {}, approval timeout {} s, auto-lock {}",
                mode_name(next.session_mode),
                next.approval_timeout_ms / 1000,
                if next.auto_lock_ms == 0 {
                    "never".to_owned()
                } else {
                    format!("after {} min idle", next.auto_lock_ms / 60_000)
                }
            ),
            server: None,
        });
        drop(state);
        self.changed();
        Ok(next)
    }

    /// Sets (or, at `off`, clears) an every-use setting (the caller checked a human asked).
    pub fn set_every_use(&self, setting: EveryUseSetting) -> Result<(), SettingsError> {
        let mut state = self.state();
        {
            let store = self
                .inner
                .store
                .lock()
                .map_err(|_| SettingsError("store unavailable".into()))?;
            store
                .set_every_use(&setting)
                .map_err(|e| SettingsError(e.to_string()))?;
            state.every_use = store
                .every_use()
                .map_err(|e| SettingsError(e.to_string()))?;
        }
        self.inner.audit.record(AuditEvent::ConfigChanged {
            what: format!(
                "every-use approval {} for {}",
                match setting.level {
                    postern_domain::decision::EveryUse::Off => "off",
                    postern_domain::decision::EveryUse::Confirm => "on",
                },
                serde_json::to_string(&setting.target).unwrap_or_default()
            ),
            server: None,
        });
        drop(state);
        self.changed();
        Ok(())
    }

    /// Ends grants whose time or agent run is over, and locks an idle vault.
    pub fn sweep(&self) {
        let now = self.now();
        let mut state = self.state();
        self.expire_grants(&mut state, now);
        let ended: Vec<Grant> = state
            .grants
            .iter()
            .filter(|g| !run_alive(g.agent_run))
            .cloned()
            .collect();
        if !ended.is_empty() {
            state.grants.retain(|g| run_alive(g.agent_run));
            state.admitted.retain(|(run, _)| run_alive(*run));
            for grant in ended {
                self.inner.audit.record(AuditEvent::GrantEnded {
                    grant: grant.id,
                    reason: "the agent run ended".into(),
                });
            }
            self.changed();
        }
        let idle = state.settings.auto_lock_ms;
        let idle_for = now.saturating_sub(state.last_activity);
        let lock = idle > 0
            && state.vault == VaultState::Ready
            && state.pending.is_empty()
            && idle_for >= idle;
        drop(state);
        if lock {
            self.lock(&format!("idle for {} min", idle_for / 60_000));
        }
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

    /// Admits `run` for the call's server; `by` is `human` or `observe`.
    fn admit(&self, state: &mut State, call: &CallToAuthorize, run: AgentRun, by: &str) {
        state.admitted.insert((run, call.request.server.clone()));
        self.inner.audit.record(AuditEvent::SessionApproved {
            session: call.session,
            server: call.request.server.clone(),
            agent_run: run,
            by: by.into(),
        });
    }

    fn expire_grants(&self, state: &mut State, now: u64) {
        let mut expired = Vec::new();
        state.grants.retain(|g| match g.end {
            GrantEnd::Until { unix_ms } if unix_ms <= now => {
                expired.push(g.id);
                false
            }
            _ => true,
        });
        for id in expired {
            self.inner.audit.record(AuditEvent::GrantEnded {
                grant: id,
                reason: "its time ran out".into(),
            });
        }
    }

    /// Runs the ladder for `call` and acts on the decision: answer now, or open a card.
    fn decide_locked(&self, state: &mut State, call: CallToAuthorize, done: Decided, now: u64) {
        self.expire_grants(state, now);
        if let Some((approval, grant)) = Self::take_carry(state, &call, now) {
            self.inner.audit.record(AuditEvent::ApprovalGranted {
                approval,
                session: call.session,
                admitted_session: false,
                grant: Some(Box::new(grant.clone())),
            });
            state.grants.push(grant);
        }
        let session = match call.request.run() {
            Some(run) if state.admitted.contains(&(run, call.request.server.clone())) => {
                SessionStatus::Approved
            }
            _ => SessionStatus::NotApproved,
        };
        let decision = decide(&Inputs {
            vault: self.effective(state.vault),
            mode: state.settings.session_mode,
            session,
            every_use: &state.every_use,
            grants: &state.grants,
            request: &call.request,
            now,
        });
        // A credential this launch was not given is released only by a human, whatever
        // let the call through otherwise (observe mode included).
        let decision = match decision {
            Decision::Allow {
                authority: postern_domain::decision::Authority::Observed,
            } if call
                .withheld
                .iter()
                .any(|w| call.request.credentials.contains(w)) =>
            {
                Decision::AskHuman(Ask {
                    what: AskFor::Call,
                    every_use: Vec::new(),
                    choices: postern_domain::decision::all_choices(),
                })
            }
            decision => decision,
        };
        match decision {
            Decision::Allow { authority } => {
                if let postern_domain::decision::Authority::Grant(id) = authority
                    && let Some(i) = state.grants.iter().position(|g| g.id == id)
                    && matches!(state.grants[i].end, GrantEnd::ThisCallOnly { .. })
                {
                    state.grants.remove(i);
                    self.inner.audit.record(AuditEvent::GrantEnded {
                        grant: id,
                        reason: "used by its call".into(),
                    });
                }
                if state.settings.session_mode == SessionMode::Observe
                    && session == SessionStatus::NotApproved
                    && let Some(run) = call.request.run()
                {
                    self.admit(state, &call, run, "observe");
                }
                done(Verdict::Allow(authority));
            }
            Decision::Deny(denial) => done(Verdict::Deny(denial)),
            Decision::AskHuman(ask) => self.open_card(state, call, ask, done, now),
        }
    }

    fn open_card(
        &self,
        state: &mut State,
        call: CallToAuthorize,
        ask: Ask,
        done: Decided,
        now: u64,
    ) {
        let Some(agent) = call.agent.clone() else {
            done(Verdict::Deny(Denial::session_unidentifiable(
                "the calling process could not be identified",
            )));
            return;
        };
        let id = ApprovalId::new(now, random());
        let timeout_ms = state.settings.approval_timeout_ms;
        let (last_record, last_catalog) = match state.last_approved.get(&call.request.server) {
            Some((record, catalog)) => (Some(record), Some(catalog.as_ref())),
            None => (None, None),
        };
        let card = ApprovalCard::new(&CardInputs {
            id,
            asked_at: now,
            timeout_ms,
            ask: &ask,
            agent: &agent,
            request: &call.request,
            record: &call.record,
            last_approved_record: last_record,
            catalog: &call.catalog,
            last_approved_catalog: last_catalog,
            arguments: &call.arguments,
            withheld: &call.withheld,
        });
        self.inner.audit.record(AuditEvent::ApprovalRequested {
            approval: id,
            session: call.session,
            server: call.request.server.clone(),
            agent_run: call.request.run(),
            epoch: call.request.epoch,
            tool: call.request.tool.clone(),
            credentials: call.request.credentials.clone(),
            what: ask.what,
            every_use: ask.every_use.clone(),
            choices: ask.choices.clone(),
            expires_at: card.expires_at,
        });
        tracing::info!(approval = %id, server = %call.request.server, tool = %call.request.tool, agent = %agent.chain_text(), "approval requested");
        state.pending.insert(
            id,
            Pending {
                card,
                ask,
                call,
                done,
            },
        );
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
            if let Some(inner) = weak.upgrade() {
                Authority { inner }.time_out(id);
            }
        });
        self.changed();
    }

    fn time_out(&self, id: ApprovalId) {
        let pending = self.state().pending.remove(&id);
        if let Some(pending) = pending {
            self.expire(id, pending);
        }
    }

    /// A request nobody answered in time: the call is refused with `approval_timeout`.
    fn expire(&self, id: ApprovalId, pending: Pending) {
        let denial = Denial::approval_timeout();
        let waited = pending
            .card
            .expires_at
            .saturating_sub(pending.card.asked_at)
            / 1000;
        self.inner.audit.record(expired_event(
            id,
            pending.call.session,
            &denial,
            &format!("no answer within {waited} s"),
        ));
        tracing::info!(approval = %id, "approval request timed out");
        (pending.done)(Verdict::Deny(denial));
        self.changed();
    }
}

impl Authorizer for Authority {
    fn authorize(&self, call: CallToAuthorize, done: Decided) {
        let now = self.now();
        let mut state = self.state();
        state.last_activity = now;
        // A log that cannot be written could record neither the question nor the answer.
        if state.vault == VaultState::Ready
            && let AuditState::Unavailable { reason } = self.inner.audit.status().state
        {
            done(Verdict::Deny(Denial::audit_unavailable(&reason)));
            return;
        }
        self.decide_locked(&mut state, call, done, now);
    }

    fn withdraw(&self, session: u64, call: CallId, why: Withdrawn) {
        let mut state = self.state();
        let Some(id) = state
            .pending
            .iter()
            .find(|(_, p)| p.call.session == session && p.call.request.call == call)
            .map(|(id, _)| *id)
        else {
            return;
        };
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
        host: &str,
        credentials: &std::collections::BTreeSet<String>,
    ) -> Result<
        Vec<postern_gateway::authorize::InjectedHeader>,
        postern_gateway::authorize::InjectError,
    > {
        self.inject_for(server, host, credentials)
    }

    fn session_ended(&self, _session: u64, agent: Option<&postern_domain::AgentIdentity>) {
        // Grants "until the agent run ends" outlive a session while the agent process
        // lives (it may reconnect); the sweep ends them with the process.
        if agent.is_some_and(|a| !run_alive(AgentRun::of(a))) {
            self.sweep();
        }
    }
}

/// The key settings are stored under.
const SETTINGS_KEY: &str = "settings";

fn load_settings(store: &Store) -> Settings {
    match store.setting::<Settings>(SETTINGS_KEY) {
        Ok(Some(settings)) => settings,
        Ok(None) => Settings::default(),
        Err(e) => {
            tracing::warn!("stored settings are unreadable ({e}); using the defaults");
            Settings::default()
        }
    }
}

fn expired_event(id: ApprovalId, session: u64, denial: &Denial, reason: &str) -> AuditEvent {
    AuditEvent::ApprovalExpired {
        approval: id,
        session,
        code: denial.code.as_str().into(),
        reason: reason.into(),
    }
}

fn describe_choices(choices: &[GrantChoice]) -> String {
    if choices.is_empty() {
        return "none".into();
    }
    let mut out: Vec<String> = Vec::new();
    for choice in choices {
        let text = match choice {
            GrantChoice::ThisCall => "--once".to_owned(),
            GrantChoice::UntilRunEnds => "--run".to_owned(),
            GrantChoice::ForMinutes { .. } => "--minutes N".to_owned(),
        };
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out.join(", ")
}

/// `prompt` or `observe`.
pub fn mode_name(mode: SessionMode) -> &'static str {
    match mode {
        SessionMode::Prompt => "prompt",
        SessionMode::Observe => "observe",
    }
}

/// Whether the agent process of `run` still runs (the same process: pid and start time).
fn run_alive(run: AgentRun) -> bool {
    postern_supervisor::process_start_time(run.pid) == Some(run.start_time)
}

fn random() -> u128 {
    ulid::Ulid::new().random()
}
