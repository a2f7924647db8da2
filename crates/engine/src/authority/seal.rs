//! The seal: what a person set (the settings, per-call approvals, credential bindings and
//! specs, approved baselines) sealed under the vault key, so that what was edited into
//! `postern.db` behind the engine's back is found at unlock, and before a launch or a call
//! uses it, and is reported and undone rather than taken.

use postern_domain::credential::Injection;
use postern_domain::decision::{EveryUse, EveryUseSetting};
use postern_domain::{AuditEvent, Credential, CredentialName, Narrowing, ServerLabel};
use postern_gateway::audit::AuditSink;
use postern_store::Store;
use serde::{Deserialize, Serialize};

use super::lock::{SETTINGS_KEY, Settings, describe, strictest};
use super::{Authority, Proven, State};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use postern_vault::VaultKey;

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
    /// The audit log's head (`SEQ:HASH`, as its writer held it) when the seal was written;
    /// absent from a seal written before the seal named it. Every narrowing recorded after it
    /// is taken again at the next unlock ([`Authentic::narrow`]), the rows between it and the
    /// writer's head verified on the way.
    #[serde(default)]
    log_head: Option<String>,
}

/// The seal as an unlock found it, read once: as stored, what it vouches for if it verifies,
/// and every narrowing the log recorded since it was written.
pub(super) struct SealAtUnlock {
    stored: Option<SealedConfig>,
    authentic: Option<Authentic>,
    narrowed: Vec<Narrowing>,
}

impl Authentic {
    /// What the seal vouches for, narrowed by `narrowing` (recorded in the log after it): a
    /// store put back behind the engine's back, an engine restarted (whose memory of the
    /// change went with it) or an older seal put back undo nothing a person narrowed.
    fn narrow(&mut self, narrowing: Narrowing) {
        match narrowing {
            Narrowing::Unbound { server, credential } => self
                .bindings
                .retain(|(s, c)| !(s == server.as_str() && c == credential.as_str())),
            // On, whatever level the record names: a narrowing never turns anything off.
            Narrowing::EveryUseOn { setting } => {
                let on = EveryUseSetting {
                    level: EveryUse::Confirm,
                    ..setting
                };
                if !self.every_use.contains(&on) {
                    self.every_use.retain(|s| s.target != on.target);
                    self.every_use.push(on);
                }
            }
            Narrowing::CredentialRemoved { credential } => {
                self.bindings.retain(|(_, c)| c != credential.as_str());
                if let Some(specs) = &mut self.credentials {
                    specs.retain(|(name, _)| name != credential.as_str());
                }
            }
            Narrowing::ServerRemoved { server } => {
                self.bindings.retain(|(s, _)| s != server.as_str());
                self.baselines.retain(|(s, _)| s != server.as_str());
            }
            Narrowing::Settings {
                session_mode,
                auto_lock_ms,
                click_window_ms,
            } => {
                let narrowed = Settings {
                    session_mode,
                    auto_lock_ms,
                    click_window_ms,
                    approval_timeout_ms: self.settings.approval_timeout_ms,
                };
                self.settings = strictest(self.settings, narrowed);
            }
            Narrowing::LostRecords => {
                self.bindings.clear();
                self.baselines.clear();
                self.settings = strictest(self.settings, Settings::default());
            }
        }
    }
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

/// What `sealed` vouches for, if it verifies under `key`.
fn verified(sealed: &SealedConfig, key: &VaultKey) -> Option<Authentic> {
    let mac = BASE64.decode(&sealed.mac).ok()?;
    key.verify_mac(SEAL_PURPOSE, sealed.config.as_bytes(), &mac)
        .then(|| serde_json::from_str::<Authentic>(&sealed.config).ok())
        .flatten()
}

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
                    // While the log takes nothing (unavailable, quarantined) its writer has no
                    // head, and the unlock read no narrowing after the head of the seal it
                    // opened: the seal names that head again, so the next unlock reads them,
                    // and never the whole log as if the seal were older than every record.
                    log_head: self
                        .inner
                        .audit
                        .head()
                        .map(|head| head.to_string())
                        .or_else(|| state.sealed_head.clone()),
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
        let authentic = stored.as_ref().and_then(|sealed| verified(sealed, key));
        (stored, authentic)
    }

    /// The seal, read once for an unlock, with the narrowings the log recorded after it (see
    /// [`Authentic::log_head`]; all of them for a seal that names no head, or none that
    /// verifies), read on a connection of their own, so that an unlock reads them before it
    /// holds the gate's state. `Err`: they could not be read (the log's opening key missing
    /// or replaced, a record that does not open, rows between the seal's head and the
    /// writer's that do not chain: deleted, edited or planted behind the engine's back).
    pub(super) fn seal_at_unlock(&self, key: &VaultKey) -> Result<SealAtUnlock, String> {
        let (stored, authentic) = self.read_seal(key);
        let from = authentic.as_ref().and_then(|a| a.log_head.as_deref());
        let narrowed = self
            .narrowed_since(from, key)?
            .map(|(narrowed, _)| narrowed)
            .unwrap_or_default();
        Ok(SealAtUnlock {
            stored,
            authentic,
            narrowed,
        })
    }

    /// The narrowings the log recorded after `from` (a seal's `log_head`; none: from the
    /// first record) up to the writer's head, with that head; `None` while the writer has
    /// none (an empty or unusable log).
    fn narrowed_since(
        &self,
        from: Option<&str>,
        key: &VaultKey,
    ) -> Result<Option<(Vec<Narrowing>, String)>, String> {
        let Some(to) = self.inner.audit.head() else {
            return Ok(None);
        };
        let reader = self
            .inner
            .store
            .lock()
            .map_err(|_| "the store is unavailable".to_owned())?
            .reader()
            .map_err(|e| e.to_string())?;
        let from = from.and_then(|head| head.parse().ok());
        crate::audit::narrowings_between(&reader, &*self.inner.secrets, key, from, to)
            .map(|narrowed| Some((narrowed, to.to_string())))
            .map_err(|e| e.to_string())
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
        // What was narrowed since the seal came before this change: it is taken into the seal
        // now, and the seal's head moved past it, so that the unlock does not apply it after
        // the change (an unbind, then the person's bind again, would lose the bind). Unread,
        // the seal keeps its head, and the unlock reads them (or refuses).
        self.inner.audit.flush();
        match self.narrowed_since(authentic.log_head.as_deref(), &proven.key) {
            Ok(Some((narrowed, head))) => {
                for narrowing in narrowed {
                    authentic.narrow(narrowing);
                }
                authentic.log_head = Some(head);
            }
            Ok(None) => {}
            Err(e) => tracing::error!("the narrowings since the seal cannot be read: {e}"),
        }
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
    pub(super) fn check_config_seal(&self, state: &mut State, key: &VaultKey, seal: SealAtUnlock) {
        let SealAtUnlock {
            stored,
            authentic,
            narrowed,
        } = seal;
        state.sealed_head = authentic.as_ref().and_then(|a| a.log_head.clone());
        let broken = match (&authentic, &stored) {
            (Some(_), _) => None,
            (None, Some(_)) => Some("the seal of the settings does not verify".to_owned()),
            (None, None) => Some("the seal of the settings is missing".to_owned()),
        };
        // A broken seal vouches for nothing: the defaults, no binding, no baseline.
        let mut authentic = authentic.unwrap_or(Authentic {
            settings: Settings::default(),
            every_use: state.every_use.clone(),
            bindings: Vec::new(),
            baselines: Vec::new(),
            credentials: None,
            log_head: None,
        });
        // What was narrowed since the seal was written narrows what it vouches for.
        for narrowing in narrowed {
            authentic.narrow(narrowing);
        }
        let settings = strictest(state.settings, authentic.settings);
        let mut every_use = state.every_use.clone();
        let restored: Vec<EveryUseSetting> = authentic
            .every_use
            .iter()
            .filter(|s| !every_use.iter().any(|o| o.target == s.target))
            .cloned()
            .collect();
        every_use.extend(restored.iter().cloned());
        let mut found: Vec<String> = broken.into_iter().collect();
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
