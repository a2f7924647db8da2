//! The vault lock and the settings a human controls: locking and unlocking, the sweeper's
//! round (grants whose time or agent run is over, the idle lock, a sleep seen on the clocks),
//! the persisted settings and the every-use settings.

use postern_domain::decision::{
    APPROVAL_TIMEOUT_MS, Denial, EveryUse, EveryUseSetting, SettingTarget, SettingsUpdate,
};
use postern_domain::{AuditEvent, BUILTIN_LABEL, CredentialName, Grant, Narrowing};
use postern_gateway::Command;
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::Verdict;
use postern_store::Store;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::approvals::expired_event;
use super::grants::run_alive;
use super::{Authority, PresenceError, Proven, SessionMode, State, VaultState};
use postern_vault::VaultKey;

/// The idle time after which the vault locks itself, by default (8 hours).
pub const AUTO_LOCK_MS: u64 = 8 * 60 * 60 * 1000;

/// The longest approval timeout (1 day): longer, and an unanswered call would hang its agent
/// for good.
pub const MAX_APPROVAL_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// The longest auto-lock time (1 week); 0 turns the auto-lock off.
pub const MAX_AUTO_LOCK_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// The longest time plain clicks approve after a passphrase (15 minutes).
pub const MAX_CLICK_WINDOW_MS: u64 = 15 * 60 * 1000;

/// How far the wall clock may run ahead of the monotonic one between two looks before the
/// gate takes it for a sleep (ms). Far above clock slewing, far below a nap.
const SLEPT_AFTER_MS: i128 = 60_000;

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
    /// For this long after the passphrase was typed, a plain click in the app approves a
    /// request (ms; 0, the default: every approval needs the passphrase). On X11 any program
    /// of the user can click for them meanwhile.
    #[serde(default)]
    #[ts(type = "number")]
    pub click_window_ms: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            session_mode: SessionMode::Prompt,
            approval_timeout_ms: APPROVAL_TIMEOUT_MS,
            auto_lock_ms: AUTO_LOCK_MS,
            click_window_ms: 0,
        }
    }
}

/// `current` with the fields `update` sets.
fn applied(current: Settings, update: &SettingsUpdate) -> Settings {
    let mut next = current;
    if let Some(mode) = update.session_mode {
        next.session_mode = mode;
    }
    if let Some(ms) = update.approval_timeout_ms {
        next.approval_timeout_ms = ms;
    }
    if let Some(ms) = update.auto_lock_ms {
        next.auto_lock_ms = ms;
    }
    if let Some(ms) = update.click_window_ms {
        next.click_window_ms = ms;
    }
    next
}

/// Why the vault stayed locked after a proof that held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnlockError(pub String);

/// Why a settings change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

impl Authority {
    /// Locks the vault: every call is refused with `vault_locked` until a human unlocks,
    /// grants and admissions end, open requests are withdrawn. Returns whether it was
    /// unlocked.
    pub fn lock(&self, reason: &str) -> bool {
        let mut state = self.state();
        let locked = self.lock_in(&mut state, reason);
        drop(state);
        if locked {
            self.changed();
        }
        locked
    }

    /// [`Authority::lock`] under the caller's hold of the state; the caller tells the
    /// watchers (`changed`) once it lets go.
    pub(super) fn lock_in(&self, state: &mut State, reason: &str) -> bool {
        if state.vault == VaultState::Locked {
            return false;
        }
        state.vault = VaultState::Locked;
        state.key = None;
        state.last_proof_ms = None;
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
        state.later.clear();
        // Waiting calls are answered before any server stops: a session that sees its server
        // stop first must find their verdicts already given (they were never forwarded).
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
        let _ = self.inner.commands.send(Command::DropCredentials);
        self.revoke_lent();
        tracing::info!("vault locked: {reason}");
        true
    }

    /// Why the vault should lock now although nobody asked, if it should: the machine slept
    /// (the wall clock ran ahead of the monotonic one, which stands still in sleep; a wall
    /// clock set ahead by hand looks the same, and locking is the safe reading), or nothing
    /// happened for the auto-lock time while no request waited. Looked at by the sweeper
    /// and before every decision.
    pub(super) fn stepped_away(&self, state: &mut State, now: u64) -> Option<String> {
        let offset = i128::from(now) - i128::from(self.inner.clock.monotonic_ms());
        let ahead = offset - std::mem::replace(&mut state.clock_offset, offset);
        if state.vault != VaultState::Ready {
            return None;
        }
        if ahead > SLEPT_AFTER_MS {
            return Some(format!(
                "the machine slept (its clock moved {} min ahead)",
                ahead / 60_000
            ));
        }
        let idle = state.settings.auto_lock_ms;
        let idle_for = now.saturating_sub(state.last_activity);
        (idle > 0 && state.pending.is_empty() && idle_for >= idle)
            .then(|| format!("idle for {} min", idle_for / 60_000))
    }

    /// Unlocks the vault with the key a proof unwrapped ([`Authority::prove`]). The first
    /// unlock after a start checks the settings against the seal the engine last wrote: a
    /// value found wider than sealed (edited in the store behind the engine's back) is not
    /// used, the stricter one is, and status and the audit log say so. Returns whether it was
    /// locked. Refused, the vault staying locked, when what was narrowed since the seal cannot
    /// be read from the audit log: it could be any narrowing, and none may be undone (the
    /// person puts the log's opening key back in the keychain).
    pub fn unlock(&self, proven: Proven) -> Result<bool, UnlockError> {
        let now = self.now();
        // What was narrowed since the seal is in the log, to be taken again by the seal's
        // check: stored before it is read, and read before the gate's state is held (a long
        // log holds up the unlock, not every call).
        self.inner.audit.flush();
        let seal = self.seal_at_unlock(&proven.key).map_err(|why| {
            let refused = format!(
                "the vault stays locked: what was narrowed since the settings were last sealed cannot be read from the audit log ({why}), and none of it may be undone; put the log's opening key back in the keychain (or start over with a new Postern home)"
            );
            tracing::error!("{refused}");
            UnlockError(refused)
        })?;
        let mut state = self.state();
        if state.vault == VaultState::Ready {
            return Ok(false);
        }
        self.check_config_seal(&mut state, &proven.key, seal);
        let key = proven.key.clone();
        state.key = Some(proven.key);
        state.vault = VaultState::Ready;
        state.last_activity = now;
        state.last_proof_ms = Some(now);
        self.inner.audit.record(AuditEvent::VaultUnlocked);
        drop(state);
        // The audit log's opening key is sealed under the vault key (a plain one from before
        // is sealed now), and journals left behind at start catch up with it.
        self.inner.audit.adopt(&key);
        tracing::info!("vault unlocked");
        self.changed();
        Ok(true)
    }

    /// A copy of the vault key while the vault is unlocked (opening the audit log's bodies).
    pub(crate) fn vault_key(&self) -> Option<VaultKey> {
        self.state().key.clone()
    }

    /// Whether `update` would widen the settings in force (observe mode, a longer or no
    /// auto-lock, a longer plain-click window): such a change needs the person's proof.
    pub fn settings_widen(&self, update: &SettingsUpdate) -> bool {
        let current = self.state().settings;
        let next = applied(current, update);
        strictest(next, current) != next
    }

    /// Changes settings and persists them. A change that widens (observe mode, a longer or
    /// no auto-lock) needs a proof.
    pub fn update_settings(
        &self,
        update: SettingsUpdate,
        proven: Option<&Proven>,
    ) -> Result<Settings, SettingsError> {
        if update
            .approval_timeout_ms
            .is_some_and(|ms| !(1000..=MAX_APPROVAL_TIMEOUT_MS).contains(&ms))
        {
            return Err(SettingsError(format!(
                "the approval timeout must be between 1 second and 1 day ({} seconds)",
                MAX_APPROVAL_TIMEOUT_MS / 1000
            )));
        }
        if update.auto_lock_ms.is_some_and(|ms| ms > MAX_AUTO_LOCK_MS) {
            return Err(SettingsError(format!(
                "the auto-lock time must be at most 1 week ({} minutes); 0 turns it off",
                MAX_AUTO_LOCK_MS / 60_000
            )));
        }
        if update
            .click_window_ms
            .is_some_and(|ms| ms > MAX_CLICK_WINDOW_MS)
        {
            return Err(SettingsError(format!(
                "plain clicks approve for at most 15 minutes ({} seconds) after the passphrase; 0 turns them off",
                MAX_CLICK_WINDOW_MS / 1000
            )));
        }
        let mut state = self.state();
        let next = applied(state.settings, &update);
        if next == state.settings {
            return Ok(next);
        }
        let narrows = strictest(next, state.settings) == next;
        if proven.is_none() && !narrows {
            return Err(SettingsError(
                PresenceError::Required {
                    what: "widen the settings".into(),
                }
                .to_string(),
            ));
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
        self.reseal(&state);
        self.inner.audit.record(AuditEvent::ConfigChanged {
            what: format!("settings: {}", describe(&next)),
            server: None,
            // Taken again at the next unlock: locked, the seal could not take it, and an older
            // seal put back is narrowed by every one recorded since.
            narrowing: narrows.then_some(Narrowing::Settings {
                session_mode: next.session_mode,
                auto_lock_ms: next.auto_lock_ms,
                click_window_ms: next.click_window_ms,
            }),
        });
        drop(state);
        self.changed();
        Ok(next)
    }

    /// Sets (or, at `off`, clears) an every-use setting (the caller checked a human asked).
    /// Turning it on for a server that is not configured or a credential that does not
    /// exist is refused (it would never apply, and a typo would look like protection), and
    /// so is turning it off where it is not on (nothing would change). A tool is not checked
    /// here: the engine may not have seen the server's catalog.
    pub fn set_every_use(
        &self,
        setting: EveryUseSetting,
        proven: Option<&Proven>,
    ) -> Result<(), SettingsError> {
        if setting.level == EveryUse::Off && proven.is_none() {
            return Err(SettingsError(
                PresenceError::Required {
                    what: "turn per-call approval off".into(),
                }
                .to_string(),
            ));
        }
        let mut state = self.state();
        {
            let store = self
                .inner
                .store
                .lock()
                .map_err(|_| SettingsError("store unavailable".into()))?;
            match setting.level {
                EveryUse::Confirm => target_exists(&store, &setting.target)?,
                EveryUse::Off => not_on(&state.every_use, &setting.target)?,
            }
            store
                .set_every_use(&setting)
                .map_err(|e| SettingsError(e.to_string()))?;
        }
        // The change, on what is in force: never the store's rows as found, where a setting
        // removed behind the engine's back would be sealed as gone by this change.
        state.every_use.retain(|s| s.target != setting.target);
        if setting.level == EveryUse::Confirm {
            state.every_use.push(setting.clone());
            state.every_use.sort_by(|a, b| a.target.cmp(&b.target));
        }
        self.reseal(&state);
        self.inner.audit.record(AuditEvent::ConfigChanged {
            what: format!(
                "every-use approval {} for {}",
                match setting.level {
                    EveryUse::Off => "off",
                    EveryUse::Confirm => "on",
                },
                serde_json::to_string(&setting.target).unwrap_or_default()
            ),
            server: None,
            narrowing: (setting.level == EveryUse::Confirm)
                .then_some(Narrowing::EveryUseOn { setting }),
        });
        drop(state);
        self.changed();
        Ok(())
    }

    /// Ends grants whose time or agent run is over, and locks the vault when the user
    /// stepped away (idle, or the machine slept).
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
        let locked = self
            .stepped_away(&mut state, now)
            .is_some_and(|reason| self.lock_in(&mut state, &reason));
        drop(state);
        if locked {
            self.changed();
        }
    }
}

/// Refuses an every-use target that could never apply: a server that is neither configured
/// nor the built-in one, a credential that does not exist.
fn target_exists(store: &Store, target: &SettingTarget) -> Result<(), SettingsError> {
    let failed = |e: postern_store::StoreError| SettingsError(e.to_string());
    match target {
        SettingTarget::Server { server } | SettingTarget::Tool { server, .. } => {
            if server.as_str() == BUILTIN_LABEL || store.server(server).map_err(failed)?.is_some() {
                return Ok(());
            }
            let mut known: Vec<String> = store
                .servers()
                .map_err(failed)?
                .into_iter()
                .map(|s| s.label.to_string())
                .collect();
            known.push(BUILTIN_LABEL.to_owned());
            Err(SettingsError(format!(
                "no server is configured as '{server}', so per-call approval there would never apply; the servers are: {}",
                known.join(", ")
            )))
        }
        SettingTarget::Credential { name } => {
            let parsed: CredentialName =
                name.parse()
                    .map_err(|e: postern_domain::credential::CredentialNameError| {
                        SettingsError(e.to_string())
                    })?;
            if store.credential(&parsed).map_err(failed)?.is_some() {
                return Ok(());
            }
            let known: Vec<String> = store
                .credentials()
                .map_err(failed)?
                .into_iter()
                .map(|c| c.name.to_string())
                .collect();
            Err(SettingsError(format!(
                "no credential named '{name}', so per-call approval for it would never apply; {}",
                listing(
                    "the credentials are: ",
                    &known,
                    ", ",
                    "there are no credentials yet"
                )
            )))
        }
    }
}

/// Refuses turning off an every-use setting that is not on.
fn not_on(settings: &[EveryUseSetting], target: &SettingTarget) -> Result<(), SettingsError> {
    if settings.iter().any(|s| s.target == *target) {
        return Ok(());
    }
    let on: Vec<String> = settings.iter().map(|s| s.target.to_string()).collect();
    Err(SettingsError(format!(
        "per-call approval was not on for {target}, so there is nothing to turn off; {}",
        listing("it is on for: ", &on, "; ", "it is off everywhere")
    )))
}

/// `items` after `intro`, joined by `separator`; `none` when there are none.
fn listing(intro: &str, items: &[String], separator: &str, none: &str) -> String {
    if items.is_empty() {
        none.to_owned()
    } else {
        format!("{intro}{}", items.join(separator))
    }
}

/// Settings in words, for the audit log and warnings.
pub(super) fn describe(settings: &Settings) -> String {
    format!(
        "session mode {}, approval timeout {} s, auto-lock {}, plain clicks {}",
        mode_name(settings.session_mode),
        settings.approval_timeout_ms / 1000,
        if settings.auto_lock_ms == 0 {
            "never".to_owned()
        } else {
            format!("after {} min idle", settings.auto_lock_ms / 60_000)
        },
        if settings.click_window_ms == 0 {
            "off".to_owned()
        } else {
            format!(
                "approve for {} s after the passphrase",
                settings.click_window_ms / 1000
            )
        }
    )
}

/// The stricter of two settings, field by field: prompting over observing, the shorter
/// auto-lock over a longer one or none, the shorter plain-click window. The approval timeout
/// grants nothing: `a`'s is kept.
pub(super) fn strictest(a: Settings, b: Settings) -> Settings {
    let session_mode =
        if a.session_mode == SessionMode::Prompt || b.session_mode == SessionMode::Prompt {
            SessionMode::Prompt
        } else {
            SessionMode::Observe
        };
    let auto_lock_ms = match (a.auto_lock_ms, b.auto_lock_ms) {
        (0, other) | (other, 0) => other,
        (x, y) => x.min(y),
    };
    Settings {
        session_mode,
        approval_timeout_ms: a.approval_timeout_ms,
        auto_lock_ms,
        click_window_ms: a.click_window_ms.min(b.click_window_ms),
    }
}

/// `prompt` or `observe`.
pub fn mode_name(mode: SessionMode) -> &'static str {
    match mode {
        SessionMode::Prompt => "prompt",
        SessionMode::Observe => "observe",
    }
}

/// The key settings are stored under.
pub(super) const SETTINGS_KEY: &str = "settings";

pub(super) fn load_settings(store: &Store) -> Settings {
    match store.setting::<Settings>(SETTINGS_KEY) {
        Ok(Some(settings)) => settings,
        Ok(None) => Settings::default(),
        Err(e) => {
            tracing::warn!("stored settings are unreadable ({e}); using the defaults");
            Settings::default()
        }
    }
}
