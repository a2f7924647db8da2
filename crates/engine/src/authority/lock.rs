//! The vault lock and the settings a human controls: locking and unlocking, the sweeper's
//! round (grants whose time or agent run is over, the idle lock, a sleep seen on the clocks),
//! the persisted settings and the every-use settings.

use postern_domain::credential::Injection;
use postern_domain::decision::{
    APPROVAL_TIMEOUT_MS, Denial, EveryUse, EveryUseSetting, SettingTarget, SettingsUpdate,
};
use postern_domain::{AuditEvent, BUILTIN_LABEL, Credential, CredentialName, Grant, ServerLabel};
use postern_gateway::Command;
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::Verdict;
use postern_store::Store;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::approvals::expired_event;
use super::grants::run_alive;
use super::{Authority, PresenceError, Proven, SessionMode, State, VaultState};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
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
    /// locked.
    pub fn unlock(&self, proven: Proven) -> bool {
        let now = self.now();
        let mut state = self.state();
        if state.vault == VaultState::Ready {
            return false;
        }
        self.check_config_seal(&mut state, &proven.key);
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
        true
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
        if proven.is_none() && strictest(next, state.settings) != next {
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
            state.every_use = store
                .every_use()
                .map_err(|e| SettingsError(e.to_string()))?;
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
fn describe(settings: &Settings) -> String {
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
fn strictest(a: Settings, b: Settings) -> Settings {
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

/// The key the seal of the settings is stored under.
const SEAL_KEY: &str = "sealed-config";

/// The settings as the engine last wrote them while it held the vault key, and their MAC
/// (base64).
#[derive(Debug, Serialize, Deserialize)]
struct SealedConfig {
    config: String,
    mac: String,
}

/// What the seal covers: the settings and per-call approvals (held in the state), and, as
/// stored, the credential bindings and a digest of each approved baseline (the launch a card
/// is compared with).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Authentic {
    settings: Settings,
    every_use: Vec<EveryUseSetting>,
    bindings: Pairs,
    baselines: Pairs,
    /// Each credential's name and spec ([`spec_of`]) as a person added it; absent from a seal
    /// written before specs were sealed (the store's are taken then, once).
    #[serde(default)]
    credentials: Option<Pairs>,
}

/// Pairs of labels as stored: (server, credential) bindings, (server, digest) baselines.
type Pairs = Vec<(String, String)>;

/// The bindings and baseline digests as the store holds them now.
fn stored_rows(store: &Store) -> (Pairs, Pairs) {
    let bindings = store.all_bindings().unwrap_or_else(|e| {
        tracing::error!("cannot read the bindings to seal them: {e}");
        Vec::new()
    });
    let baselines = store.baseline_digests().unwrap_or_else(|e| {
        tracing::error!("cannot read the approved baselines to seal them: {e}");
        Vec::new()
    });
    (bindings, baselines)
}

/// A credential's spec as sealed: its injection and hosts, as JSON.
pub(super) fn spec_of(credential: &Credential) -> String {
    spec_text(&credential.injection, &credential.hosts)
}

/// A spec as sealed, from its injection and hosts.
pub(super) fn spec_text(injection: &Injection, hosts: &[String]) -> String {
    serde_json::to_string(&(injection, hosts)).unwrap_or_default()
}

/// Each stored credential's name and spec.
fn stored_specs(store: &Store) -> Pairs {
    store
        .credentials()
        .unwrap_or_else(|e| {
            tracing::error!("cannot read the credentials to seal them: {e}");
            Vec::new()
        })
        .iter()
        .map(|c| (c.name.to_string(), spec_of(c)))
        .collect()
}

const SEAL_PURPOSE: &str = "postern settings seal v1";

/// Writes `authentic` sealed under `key`.
fn write_seal(store: &Store, authentic: &Authentic, key: &VaultKey) -> Result<(), String> {
    let config = serde_json::to_string(authentic).unwrap_or_default();
    let mac = key.mac(SEAL_PURPOSE, config.as_bytes());
    let sealed = SealedConfig {
        config,
        mac: BASE64.encode(mac),
    };
    store
        .set_setting(SEAL_KEY, &sealed)
        .map_err(|e| e.to_string())
}

/// A change to what the seal vouches for.
#[derive(Debug, Clone, Copy)]
pub(super) enum Vouch<'a> {
    /// A person bound (`true`) or unbound `server` and `credential`.
    Binding {
        server: &'a str,
        credential: &'a str,
        bound: bool,
    },
    /// A person added credential `name` with `spec` (its [`spec_of`]), or removed it
    /// (`None`), and with it its bindings.
    Credential {
        name: &'a str,
        spec: Option<&'a str>,
    },
}

impl Vouch<'_> {
    /// Applies the change to vouched `bindings` and `specs` (each `None`: not held).
    pub(super) fn apply(self, bindings: &mut Option<Pairs>, specs: &mut Option<Pairs>) {
        match self {
            Vouch::Binding {
                server,
                credential,
                bound,
            } => {
                let pair = (server.to_owned(), credential.to_owned());
                if let Some(vouched) = bindings {
                    vouched.retain(|b| *b != pair);
                    if bound {
                        vouched.push(pair);
                    }
                }
            }
            Vouch::Credential { name, spec } => {
                if let Some(specs) = specs {
                    specs.retain(|(n, _)| n != name);
                    specs.extend(spec.map(|spec| (name.to_owned(), spec.to_owned())));
                }
                if spec.is_none()
                    && let Some(vouched) = bindings
                {
                    vouched.retain(|(_, c)| c != name);
                }
            }
        }
    }
}

impl Authority {
    /// Writes the seal of the settings in force, and of the bindings and approved baselines
    /// as stored, under `key`.
    pub(super) fn seal_config(&self, state: &State, key: &VaultKey) {
        let written = self
            .inner
            .store
            .lock()
            .map_err(|_| "store unavailable".to_owned())
            .and_then(|store| {
                let (stored, stored_baselines) = stored_rows(&store);
                // Likewise the approved baselines: those a person's approval wrote.
                let baselines = match &state.baselines {
                    Some(vouched) => stored_baselines
                        .into_iter()
                        .filter(|b| vouched.contains(b))
                        .collect(),
                    None => stored_baselines,
                };
                // What a person bound (as the store still holds it), never a row as found:
                // one written behind the engine's back would be vouched for from now on.
                // Without a vouched set yet (the first passphrase), the store's rows.
                let bindings = match &state.bindings {
                    Some(vouched) => stored.into_iter().filter(|b| vouched.contains(b)).collect(),
                    None => stored,
                };
                let credentials = match &state.specs {
                    Some(specs) => specs.clone(),
                    None => stored_specs(&store),
                };
                let authentic = Authentic {
                    settings: state.settings,
                    every_use: state.every_use.clone(),
                    bindings,
                    baselines,
                    credentials: Some(credentials),
                };
                write_seal(&store, &authentic, key)
            });
        if let Err(e) = written {
            tracing::error!("the settings' seal could not be written: {e}");
        }
    }

    /// The seal as stored (`None`: there is none), and what it vouches for if it verifies
    /// under `key`.
    fn read_seal(&self, key: &VaultKey) -> (Option<SealedConfig>, Option<Authentic>) {
        let stored: Option<SealedConfig> = self
            .inner
            .store
            .lock()
            .ok()
            .and_then(|store| store.setting(SEAL_KEY).ok().flatten());
        let authentic = stored.as_ref().and_then(|sealed| {
            let mac = BASE64.decode(&sealed.mac).ok()?;
            key.verify_mac(SEAL_PURPOSE, sealed.config.as_bytes(), &mac)
                .then(|| serde_json::from_str::<Authentic>(&sealed.config).ok())
                .flatten()
        });
        (stored, authentic)
    }

    /// `bound` (`server`'s credential bindings as the store holds them, read for a launch or
    /// a call) less those the seal does not vouch for, while the vault key is held: a binding
    /// written into `postern.db` behind the engine's back is removed and reported as at an
    /// unlock (`config_tampered`), never used. Locked, `bound` as it is: nothing is released
    /// while locked, and the next unlock checks them.
    pub(crate) fn vouched(&self, server: &ServerLabel, bound: Vec<Credential>) -> Vec<Credential> {
        let mut state = self.state();
        if state.key.is_none() {
            return bound;
        }
        let pair = |c: &Credential| (server.as_str().to_owned(), c.name.as_str().to_owned());
        let vouched = state.bindings.get_or_insert_with(Vec::new);
        // A binding the store no longer holds (a server removed, a row deleted) is no longer
        // vouched for: the same row written again later is not the person's.
        vouched.retain(|b| b.0 != server.as_str() || bound.iter().any(|c| pair(c) == *b));
        let (mut kept, unvouched): (Vec<Credential>, Vec<Credential>) =
            bound.into_iter().partition(|c| vouched.contains(&pair(c)));
        // A kept credential's spec is the one sealed: one edited in the store is put back.
        let specs = state.specs.clone().unwrap_or_default();
        let edited: Vec<(usize, String)> = kept
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let (_, was) = specs.iter().find(|(n, _)| n == c.name.as_str())?;
                (*was != spec_of(c)).then(|| (i, was.clone()))
            })
            .collect();
        if unvouched.is_empty() && edited.is_empty() {
            return kept;
        }
        let mut found = Vec::new();
        if let Ok(store) = self.inner.store.lock() {
            for credential in &unvouched {
                let name = credential.name.as_str();
                if let Err(e) = store.remove_binding_row(server.as_str(), name) {
                    tracing::error!("a binding could not be removed: {e}");
                }
                found.push(format!(
                    "credential '{name}' was bound to '{server}' and is unbound"
                ));
            }
            for (i, was) in &edited {
                let name = kept[*i].name.to_string();
                if let Some((injection, hosts)) = restore_spec(&store, &name, was) {
                    kept[*i].injection = injection;
                    kept[*i].hosts = hosts;
                }
                found.push(format!(
                    "credential '{name}' had its hosts or injection edited; they are as you set them again"
                ));
            }
        }
        self.report_tampered(&mut state, &found);
        drop(state);
        self.changed();
        kept
    }

    /// Says what was found edited behind the engine's back: the log, the audit log
    /// (`config_tampered`) and status (`configWarning`).
    fn report_tampered(&self, state: &mut State, found: &[String]) {
        let what = format!(
            "Postern's settings were edited behind its back: {}",
            found.join("; ")
        );
        tracing::warn!("{what}");
        self.inner
            .audit
            .record(AuditEvent::ConfigTampered { what: what.clone() });
        state.config_warning = Some(what);
    }

    /// The bindings and credential specs the seal vouches for, read and verified under `key`
    /// (none if it does not verify).
    pub(super) fn sealed_bindings(&self, key: &VaultKey) -> (Pairs, Pairs, Pairs) {
        self.read_seal(key)
            .1
            .map(|a| (a.bindings, a.credentials.unwrap_or_default(), a.baselines))
            .unwrap_or_default()
    }

    /// Whether `server`'s approved baseline as the store holds it now is one the seal vouches
    /// for (while unlocked; locked, no card is shown anyway). One that is not is forgotten and
    /// reported, as at an unlock: its cards show everything as new.
    pub(super) fn baseline_vouched(&self, state: &mut State, server: &ServerLabel) -> bool {
        let Some(vouched) = &state.baselines else {
            return true;
        };
        let Ok(store) = self.inner.store.lock() else {
            return false;
        };
        let stored = store.baseline_digests().unwrap_or_default();
        let row = stored.iter().find(|(s, _)| s == server.as_str());
        if row.is_none_or(|row| vouched.contains(row)) {
            return true;
        }
        if let Err(e) = store.remove_approved_baseline(server.as_str()) {
            tracing::error!("an approved baseline could not be removed: {e}");
        }
        drop(store);
        self.report_tampered(
            state,
            &[format!(
                "the launch last approved for '{server}' was edited and is forgotten (its next card shows everything as new)"
            )],
        );
        false
    }

    /// The vouched bindings the store no longer holds are no longer vouched for (a server's
    /// removal, told by the CLI): the same row written again later is not the person's.
    pub fn forget_removed_bindings(&self) {
        let mut state = self.state();
        let Some(vouched) = &mut state.bindings else {
            return;
        };
        let Ok(store) = self.inner.store.lock() else {
            return;
        };
        let (stored, _) = stored_rows(&store);
        vouched.retain(|b| stored.contains(b));
    }

    /// A change a person proved with `proven`. Unlocked, the vouched sets in memory follow it
    /// and are sealed. Locked, they are not held (the next unlock reads them from the seal):
    /// the change is sealed on top of the seal as it stands, opened with the proof's key, so
    /// that the unlock finds it vouched for rather than planted. (A seal that does not verify
    /// is left for the unlock to report.)
    pub(super) fn vouch_proven(&self, state: &mut State, proven: &Proven, change: Vouch<'_>) {
        if state.key.is_some() {
            change.apply(&mut state.bindings, &mut state.specs);
            self.reseal(state);
            return;
        }
        let (_, Some(mut authentic)) = self.read_seal(&proven.key) else {
            return;
        };
        let mut bindings = Some(std::mem::take(&mut authentic.bindings));
        change.apply(&mut bindings, &mut authentic.credentials);
        authentic.bindings = bindings.unwrap_or_default();
        let written = self
            .inner
            .store
            .lock()
            .map_err(|_| "store unavailable".to_owned())
            .and_then(|store| write_seal(&store, &authentic, &proven.key));
        if let Err(e) = written {
            tracing::error!("the settings' seal could not be written: {e}");
        }
    }

    /// [`Authority::seal_config`] with the key held while unlocked. A narrowing change made
    /// while locked is sealed at the next unlock (a stricter value than sealed is taken as
    /// it is).
    pub(super) fn reseal(&self, state: &State) {
        if let Some(key) = &state.key {
            self.seal_config(state, key);
        }
    }

    /// Compares the settings in force (read from the store at start, narrowed since) with
    /// the seal: anything wider than sealed is replaced by the sealed value, written back,
    /// and reported. A seal that is missing or does not verify counts as the defaults.
    fn check_config_seal(&self, state: &mut State, key: &VaultKey) {
        let (stored, authentic) = self.read_seal(key);
        let seal_broken = authentic.is_none();
        // A broken seal vouches for nothing: the defaults, no binding, no baseline.
        let authentic = authentic.unwrap_or(Authentic {
            settings: Settings::default(),
            every_use: state.every_use.clone(),
            bindings: Vec::new(),
            baselines: Vec::new(),
            credentials: None,
        });
        let settings = strictest(state.settings, authentic.settings);
        let mut every_use = state.every_use.clone();
        let restored: Vec<EveryUseSetting> = authentic
            .every_use
            .iter()
            .filter(|s| !every_use.iter().any(|o| o.target == s.target))
            .cloned()
            .collect();
        every_use.extend(restored.iter().cloned());
        let mut found = Vec::new();
        if seal_broken {
            found.push(if stored.is_some() {
                "the seal of the settings does not verify".to_owned()
            } else {
                "the seal of the settings is missing".to_owned()
            });
        }
        if settings != state.settings {
            found.push(format!(
                "the settings read {} and {} is in force instead",
                describe(&state.settings),
                describe(&settings)
            ));
        }
        if !restored.is_empty() {
            found.push(format!(
                "per-call approval was removed for {} and is on again",
                restored
                    .iter()
                    .map(|s| s.target.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // Bindings and baselines the seal does not vouch for are dropped: a credential is
        // bound again by a person, a card without a baseline shows everything as new.
        let mut present = None;
        if let Ok(store) = self.inner.store.lock() {
            let (bindings, baselines) = stored_rows(&store);
            present = Some(bindings.clone());
            for (server, credential) in bindings {
                if authentic
                    .bindings
                    .contains(&(server.clone(), credential.clone()))
                {
                    continue;
                }
                if let Err(e) = store.remove_binding_row(&server, &credential) {
                    tracing::error!("a binding could not be removed: {e}");
                }
                found.push(format!(
                    "credential '{credential}' was bound to '{server}' and is unbound"
                ));
            }
            for (server, digest) in baselines {
                if authentic.baselines.contains(&(server.clone(), digest)) {
                    continue;
                }
                if let Err(e) = store.remove_approved_baseline(&server) {
                    tracing::error!("an approved baseline could not be removed: {e}");
                }
                state
                    .last_approved
                    .retain(|label, _| label.as_str() != server);
                found.push(format!(
                    "the launch last approved for '{server}' was edited and is forgotten (its next card shows everything as new)"
                ));
            }
            let specs = match &authentic.credentials {
                Some(sealed) => {
                    for (name, spec) in stored_specs(&store) {
                        if let Some((_, was)) = sealed.iter().find(|(n, _)| *n == name)
                            && *was != spec
                        {
                            restore_spec(&store, &name, was);
                            found.push(format!(
                                "credential '{name}' had its hosts or injection edited; they are as you set them again"
                            ));
                        }
                    }
                    sealed.clone()
                }
                None => stored_specs(&store),
            };
            state.specs = Some(specs);
        }
        if !found.is_empty() {
            if let Ok(store) = self.inner.store.lock() {
                if settings != state.settings
                    && let Err(e) = store.set_setting(SETTINGS_KEY, &settings)
                {
                    tracing::error!("the stricter settings could not be written back: {e}");
                }
                for setting in &restored {
                    if let Err(e) = store.set_every_use(setting) {
                        tracing::error!("per-call approval could not be written back: {e}");
                    }
                }
            }
            self.report_tampered(state, &found);
        }
        state.settings = settings;
        state.every_use = every_use;
        // Only what the store still holds: a binding undone while locked (an unbind takes no
        // proof, so the seal still names it) is not vouched for if a row comes back.
        let mut vouched = authentic.bindings;
        if let Some(present) = present {
            vouched.retain(|b| present.contains(b));
        }
        state.bindings = Some(vouched);
        state.baselines = Some(authentic.baselines);
        self.seal_config(state, key);
    }
}

/// Writes credential `name`'s sealed spec `was` back into the store; the spec, or `None` if
/// it cannot be read back (the credential then keeps the store's, and the warning stands).
fn restore_spec(store: &Store, name: &str, was: &str) -> Option<(Injection, Vec<String>)> {
    let (injection, hosts): (Injection, Vec<String>) = serde_json::from_str(was).ok()?;
    let name: CredentialName = name.parse().ok()?;
    if let Err(e) = store.restore_credential_spec(&name, &injection, &hosts) {
        tracing::error!("a credential's spec could not be put back: {e}");
    }
    Some((injection, hosts))
}

/// `prompt` or `observe`.
pub fn mode_name(mode: SessionMode) -> &'static str {
    match mode {
        SessionMode::Prompt => "prompt",
        SessionMode::Observe => "observe",
    }
}

/// The key settings are stored under.
const SETTINGS_KEY: &str = "settings";

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
