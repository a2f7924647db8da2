//! Proof of presence (issue 13): the one place the engine checks that a person, not a process
//! of theirs, asks for something that widens authority or destroys configuration or evidence.
//!
//! Every process of the user can reach the engine's socket, edit the home and read the
//! keychain, so the proof is something only the person has: the **Postern passphrase**. The
//! keychain holds the vault key wrapped under it (`postern_vault::WrappedKey`, argon2id); a
//! proof is a passphrase that unwraps it. [`Authority::prove`] is the only maker of a
//! [`Proven`], and every widening method takes one, so no path (the app in-process, the CLI
//! over the socket) can widen without passing through here.
//!
//! Where the OS can authenticate the person (polkit on Linux, LocalAuthentication on macOS:
//! `crate::os_auth`), that is a proof too, but only while the vault is unlocked: the OS says
//! yes or no and holds no secret, so it can vouch for a person while the vault key is already
//! in the engine's memory (approvals, widening acts) and can never unlock the vault or change
//! the passphrase. A failed or dismissed OS authentication counts like a wrong passphrase.
//!
//! Wrong passphrases back off exponentially (1 s, 2 s, 4 s, ... at most 5 minutes) and each
//! is recorded in the audit log (`proof_refused`). There are two back-offs, one per
//! [`Channel`]: any process of the user can make wrong tries over the socket, as often as the
//! back-off lets it, and that must not keep the person waiting at the app's own window,
//! which only the app reaches (in-process). A proof held on either starts both over. The
//! back-offs are kept in the store, so a restarted engine (which starts locked) still makes
//! the guesser wait; one kept longer than the longest back-off is cut to it at the start. A
//! process of the user can delete those rows, as it can copy the keychain's wrapped key and
//! guess offline: against either, what holds is argon2id's cost per guess and the
//! passphrase's strength.

use postern_domain::AuditEvent;
use postern_gateway::audit::AuditSink;
use postern_vault::{Secret, VaultKey, WrappedKey};

use super::Authority;
use crate::os_auth::{self, Asker, Verdict};

/// The keychain item holding the vault key wrapped under the passphrase.
pub const VAULT_KEY_ITEM: &str = "vault-key";

/// The shortest passphrase Postern accepts (characters).
pub const MIN_PASSPHRASE_CHARS: usize = 8;

/// The longest wait between wrong passphrases.
const BACKOFF_CAP_MS: u64 = 5 * 60 * 1000;

/// Where a proof came from; each has its own back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The engine's socket: the CLI at a terminal, and any process of the user.
    Socket,
    /// The app's own window, in the engine's process: no other process reaches it.
    App,
}

/// What a person offers to show they are there.
#[derive(Debug)]
#[non_exhaustive]
pub enum Proof {
    /// The Postern passphrase, as typed into the app's own window or on the controlling
    /// terminal (never from standard input, arguments, the environment or a file), and
    /// where it came from.
    Passphrase(Secret<String>, Channel),
    /// A plain click in the app's own window. It proves nothing by itself: it stands for the
    /// passphrase only for an approval, only while the vault is unlocked, and only within the
    /// `click_window_ms` setting (off by default) after the passphrase was last typed. Only
    /// the app, in-process, makes one: the socket carries a passphrase, the OS's word, or
    /// nothing.
    Click,
    /// The OS authenticates the person at the process that asked ([`Asker`]: the app's own
    /// process, or the CLI's as the socket's peer credentials name it). Stands in for the
    /// passphrase only while the vault is unlocked.
    Os(Asker),
}

impl Proof {
    /// A passphrase proof that came over the socket.
    pub fn passphrase(text: String) -> Proof {
        Proof::Passphrase(Secret::new(text), Channel::Socket)
    }

    /// A passphrase typed into the app's own window (the app, whose engine runs in-process).
    pub fn typed_in_app(passphrase: Secret<String>) -> Proof {
        Proof::Passphrase(passphrase, Channel::App)
    }

    /// Where it came from: a plain click and the OS's word for the app's own process are
    /// the app's; the OS's word for a socket peer is the socket's.
    pub fn channel(&self) -> Channel {
        match self {
            Proof::Passphrase(_, channel) => *channel,
            Proof::Click => Channel::App,
            Proof::Os(asker) if asker.is_this_process() => Channel::App,
            Proof::Os(_) => Channel::Socket,
        }
    }

    /// An OS proof for this process (the app, whose engine runs in-process).
    pub fn os_for_this_process() -> Result<Proof, PresenceError> {
        Asker::this_process().map(Proof::Os).ok_or_else(|| {
            PresenceError::OsUnavailable("this process's start time is unknown".into())
        })
    }

    /// An OS proof for the process at the other end of the socket, by the pid its peer
    /// credentials gave (never a pid a request names).
    pub(crate) fn os_for_peer(pid: Option<u32>) -> Result<Proof, PresenceError> {
        pid.and_then(Asker::peer).map(Proof::Os).ok_or_else(|| {
            PresenceError::OsUnavailable(
                "the process that asked is gone or its credentials are unknown".into(),
            )
        })
    }
}

/// A checked proof: the vault key the passphrase unwrapped. Only [`Authority::prove`] (and
/// setting the first passphrase) makes one.
pub struct Proven {
    pub(super) key: VaultKey,
}

impl std::fmt::Debug for Proven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proven(..)")
    }
}

/// Why a proof was not accepted. No variant carries the passphrase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PresenceError {
    /// No proof was given.
    #[error(
        "to {what}, Postern needs your passphrase: answer in the Postern app, or run the command in a terminal of your own, where it asks for it"
    )]
    Required {
        /// The act, in words ("approve a request").
        what: String,
    },
    /// No passphrase was chosen yet.
    #[error(
        "no Postern passphrase is set yet: choose one in the Postern app, or with `postern passphrase` in a terminal"
    )]
    NotSet,
    /// A first passphrase was offered where one exists.
    #[error("a Postern passphrase is set already; to change it, prove the current one")]
    AlreadySet,
    /// A new passphrase is too short.
    #[error("a Postern passphrase has at least {MIN_PASSPHRASE_CHARS} characters")]
    TooShort,
    /// The passphrase is wrong.
    #[error("wrong passphrase; the next try is allowed in {} s", secs(*retry_after_ms))]
    Wrong {
        /// Wrong tries in a row.
        failures: u32,
        /// How long until the next try is heard (ms).
        retry_after_ms: u64,
    },
    /// A try came before the back-off ended.
    #[error(
        "too many wrong passphrases in a row; try again in {} s",
        secs(*retry_after_ms)
    )]
    Backoff {
        /// How long until the next try is heard (ms).
        retry_after_ms: u64,
    },
    /// The passphrase unwrapped a key that is not the one the vault is unlocked with: the
    /// keychain's wrapped key was replaced behind the engine's back.
    #[error(
        "the vault key in the keychain is not the one Postern unlocked with (it was replaced behind Postern's back); nothing was changed"
    )]
    KeyReplaced,
    /// The keychain could not be read or written, or holds something Postern did not write.
    #[error("the vault key could not be used: {0}")]
    Unavailable(String),
    /// An OS proof where only the passphrase will do: the vault is locked (unlocking needs
    /// the key the passphrase unwraps), or the passphrase itself is being changed.
    #[error(
        "to {what}, Postern needs your passphrase: system authentication says only yes or no and holds no secret, so it stands in for the passphrase only while the vault is unlocked, and never to unlock it or to change the passphrase"
    )]
    OsNeedsPassphrase {
        /// The act, in words.
        what: String,
    },
    /// The OS could not be asked (no polkitd, no system bus, Postern's polkit actions not
    /// installed, a platform without OS authentication).
    #[error("system authentication is not available: {0}; use your Postern passphrase instead")]
    OsUnavailable(String),
    /// No authentication agent could ask the person (no desktop polkit agent for this
    /// session, no terminal for `pkttyagent`).
    #[error(
        "system authentication found no authentication agent to ask you (none runs for this session or terminal); use your Postern passphrase instead"
    )]
    OsNoAgent,
    /// The person closed the OS's dialog.
    #[error(
        "system authentication was dismissed; the next try is allowed in {} s",
        secs(*retry_after_ms)
    )]
    OsDismissed {
        /// Refused tries in a row.
        failures: u32,
        /// How long until the next try is heard (ms).
        retry_after_ms: u64,
    },
    /// The OS's authentication failed (a wrong password).
    #[error(
        "system authentication failed; the next try is allowed in {} s",
        secs(*retry_after_ms)
    )]
    OsDenied {
        /// Refused tries in a row.
        failures: u32,
        /// How long until the next try is heard (ms).
        retry_after_ms: u64,
    },
}

impl PresenceError {
    /// The stable machine code (docs/errors.md).
    pub fn code(&self) -> &'static str {
        match self {
            PresenceError::Required { .. } => "proof_required",
            PresenceError::NotSet => "passphrase_not_set",
            PresenceError::AlreadySet => "passphrase_already_set",
            PresenceError::TooShort => "passphrase_too_short",
            PresenceError::Wrong { .. } => "passphrase_wrong",
            PresenceError::Backoff { .. } => "proof_backoff",
            PresenceError::KeyReplaced => "vault_key_replaced",
            PresenceError::Unavailable(_) => "vault_key_unavailable",
            PresenceError::OsNeedsPassphrase { .. } => "os_auth_needs_passphrase",
            PresenceError::OsUnavailable(_) => "os_auth_unavailable",
            PresenceError::OsNoAgent => "os_auth_no_agent",
            PresenceError::OsDismissed { .. } => "os_auth_dismissed",
            PresenceError::OsDenied { .. } => "os_auth_denied",
        }
    }
}

fn secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// Wrong tries in a row and when the next is heard (wall-clock ms), as the store keeps them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Attempts {
    failures: u32,
    not_before_ms: u64,
}

/// The back-off of each channel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Backoffs {
    socket: Attempts,
    app: Attempts,
}

impl Backoffs {
    fn of(&mut self, channel: Channel) -> &mut Attempts {
        match channel {
            Channel::Socket => &mut self.socket,
            Channel::App => &mut self.app,
        }
    }
}

/// The key a channel's back-off is stored under (the socket's as it was before there were
/// two).
fn attempts_key(channel: Channel) -> &'static str {
    match channel {
        Channel::Socket => "proof-backoff",
        Channel::App => "proof-backoff-app",
    }
}

/// The back-offs as the store last kept them (none: no wrong try since the last proof), each
/// wait ending at most the longest back-off after `now_ms`: a row written into the store to
/// keep the person out for longer than any wrong try would (a process of the user can write
/// it) waits no longer than one.
pub(super) fn load_attempts(store: &postern_store::Store, now_ms: u64) -> Backoffs {
    let load = |channel| {
        let kept: Attempts = store
            .setting::<Attempts>(attempts_key(channel))
            .unwrap_or_else(|e| {
                tracing::warn!("the stored passphrase back-off is unreadable ({e}); starting over");
                None
            })
            .unwrap_or_default();
        Attempts {
            not_before_ms: kept
                .not_before_ms
                .min(now_ms.saturating_add(BACKOFF_CAP_MS)),
            ..kept
        }
    };
    Backoffs {
        socket: load(Channel::Socket),
        app: load(Channel::App),
    }
}

/// The wait after `failures` wrong tries in a row: 1 s, doubling, at most 5 minutes.
pub(super) fn backoff_ms(failures: u32) -> u64 {
    1000u64
        .saturating_mul(1u64 << failures.saturating_sub(1).min(20))
        .min(BACKOFF_CAP_MS)
}

impl Authority {
    /// Whether a passphrase was chosen for this home.
    pub fn passphrase_set(&self) -> bool {
        self.state().passphrase_set
    }

    /// Checks `proof` for `what` (an act in words, for the refusal and the audit log). The
    /// only maker of [`Proven`]. Blocks for argon2id's work (a fraction of a second) and a
    /// keychain read: call it off async threads.
    pub fn prove(&self, proof: Option<&Proof>, what: &str) -> Result<Proven, PresenceError> {
        let required = || PresenceError::Required { what: what.into() };
        let proof = proof.ok_or_else(required)?;
        if matches!(proof, Proof::Click) {
            return Err(required());
        }
        // One proof at a time: two wrong tries racing would both slip past the back-off.
        let _one = self
            .inner
            .proving
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = self.now();
        let channel = proof.channel();
        {
            let mut state = self.state();
            let not_before_ms = state.attempts.of(channel).not_before_ms;
            if now < not_before_ms {
                return Err(PresenceError::Backoff {
                    retry_after_ms: not_before_ms - now,
                });
            }
        }
        let proven = match proof {
            Proof::Passphrase(passphrase, _) => self.prove_passphrase(passphrase, channel, what)?,
            Proof::Os(asker) => self.prove_os(asker, channel, what)?,
            Proof::Click => return Err(required()),
        };
        let now = self.now();
        let mut state = self.state();
        // The plain-click window opens after a typed passphrase only (its setting says so).
        if state.key.is_some() && matches!(proof, Proof::Passphrase(..)) {
            state.last_proof_ms = Some(now);
        }
        if channel == Channel::Socket {
            let count = state.socket_proof.as_ref().map_or(0, |p| p.count) + 1;
            state.socket_proof = Some(crate::SocketProof {
                what: what.to_owned(),
                at_ms: now,
                count,
            });
            drop(state);
            self.changed();
        }
        Ok(proven)
    }

    /// [`Authority::prove`] for approving a request: a [`Proof::Click`] counts too, within
    /// the plain-click window after the last passphrase (the setting; off by default).
    pub fn prove_approval(&self, proof: Option<&Proof>) -> Result<Proven, PresenceError> {
        const WHAT: &str = "approve a request";
        if !matches!(proof, Some(Proof::Click)) {
            return self.prove(proof, WHAT);
        }
        let state = self.state();
        match (&state.key, clicks_until(&state)) {
            (Some(key), Some(until)) if self.now() <= until => Ok(Proven { key: key.clone() }),
            _ => Err(PresenceError::Required { what: WHAT.into() }),
        }
    }

    /// The passphrase check itself (one at a time, the back-off already checked).
    fn prove_passphrase(
        &self,
        passphrase: &Secret<String>,
        channel: Channel,
        what: &str,
    ) -> Result<Proven, PresenceError> {
        let wrapped = self.wrapped_key()?.ok_or(PresenceError::NotSet)?;
        match wrapped.unwrap_key(passphrase.expose().as_bytes()) {
            Ok(key) => {
                let mut state = self.state();
                if let Some(held) = &state.key
                    && !held.same_as(&key)
                {
                    drop(state);
                    self.inner.audit.record(AuditEvent::ProofRefused {
                        what: format!("{what} (the keychain's vault key was replaced)"),
                        failures: 0,
                        retry_after_ms: 0,
                    });
                    return Err(PresenceError::KeyReplaced);
                }
                self.reset_attempts(&mut state);
                Ok(Proven { key })
            }
            Err(postern_vault::KeyError::WrongPassphrase) => {
                let (failures, retry_after_ms) = self.refused(channel, what, None);
                Err(PresenceError::Wrong {
                    failures,
                    retry_after_ms,
                })
            }
            Err(e) => Err(PresenceError::Unavailable(e.to_string())),
        }
    }

    /// The OS check (one at a time, the back-off already checked): asks the OS, and on a yes
    /// gives the key the vault is unlocked with, if it still is.
    fn prove_os(
        &self,
        asker: &Asker,
        channel: Channel,
        what: &str,
    ) -> Result<Proven, PresenceError> {
        let needs_passphrase = || PresenceError::OsNeedsPassphrase { what: what.into() };
        if self.state().key.is_none() {
            return Err(needs_passphrase());
        }
        let refused = |how| self.refused(channel, what, Some(how));
        match os_auth::ask(asker, what) {
            Verdict::Allowed => {
                let mut state = self.state();
                // The vault may have locked while the dialog was up: a yes given before a
                // lock does not open it.
                let key = state.key.clone().ok_or_else(needs_passphrase)?;
                self.reset_attempts(&mut state);
                Ok(Proven { key })
            }
            Verdict::Denied => {
                let (failures, retry_after_ms) = refused("a failed system authentication");
                Err(PresenceError::OsDenied {
                    failures,
                    retry_after_ms,
                })
            }
            Verdict::Dismissed => {
                let (failures, retry_after_ms) = refused("a dismissed system authentication");
                Err(PresenceError::OsDismissed {
                    failures,
                    retry_after_ms,
                })
            }
            Verdict::NoAgent => Err(PresenceError::OsNoAgent),
            Verdict::Unavailable(why) => Err(PresenceError::OsUnavailable(why)),
        }
    }

    /// A proof held: both back-offs start over (the person is there).
    fn reset_attempts(&self, state: &mut super::State) {
        for channel in [Channel::Socket, Channel::App] {
            let attempts = state.attempts.of(channel);
            if *attempts != Attempts::default() {
                *attempts = Attempts::default();
                self.keep_attempts(channel, Attempts::default());
            }
        }
    }

    /// Counts a refused proof toward its channel's back-off (kept in the store) and records
    /// it in the audit log (`os`: how the OS refused, in words; `None` for a wrong
    /// passphrase); returns the refusals in a row and the wait before the next try.
    fn refused(&self, channel: Channel, what: &str, os: Option<&str>) -> (u32, u64) {
        let now = self.now();
        let mut state = self.state();
        let attempts = state.attempts.of(channel);
        attempts.failures = attempts.failures.saturating_add(1);
        let failures = attempts.failures;
        let retry_after_ms = backoff_ms(failures);
        attempts.not_before_ms = now + retry_after_ms;
        let kept = *attempts;
        self.keep_attempts(channel, kept);
        drop(state);
        let what = match os {
            None => what.to_owned(),
            Some(how) => format!("{what} ({how})"),
        };
        tracing::warn!(failures, "a refused proof to {what}");
        self.inner.audit.record(AuditEvent::ProofRefused {
            what,
            failures,
            retry_after_ms,
        });
        self.changed();
        (failures, retry_after_ms)
    }

    /// Sets the passphrase. The first one needs no proof (there is nothing to prove against):
    /// a vault key is made, credential values already in the keychain are sealed under it,
    /// the settings are sealed, and the vault unlocks. A later one needs the current one
    /// (`proof`) and wraps the same key anew.
    pub fn set_passphrase(
        &self,
        passphrase: &Secret<String>,
        proof: Option<&Proof>,
    ) -> Result<(), PresenceError> {
        if passphrase.expose().chars().count() < MIN_PASSPHRASE_CHARS {
            return Err(PresenceError::TooShort);
        }
        let unavailable = |e: &dyn std::fmt::Display| PresenceError::Unavailable(e.to_string());
        if let Some(Proof::Os(_)) = proof {
            return Err(PresenceError::OsNeedsPassphrase {
                what: "change the Postern passphrase".into(),
            });
        }
        if self.wrapped_key()?.is_some() {
            let Some(proof) = proof else {
                return Err(PresenceError::AlreadySet);
            };
            let proven = self.prove(Some(proof), "change the Postern passphrase")?;
            let wrapped = proven
                .key
                .wrap(passphrase.expose().as_bytes())
                .map_err(|e| unavailable(&e))?;
            self.inner
                .secrets
                .set(VAULT_KEY_ITEM, wrapped.as_bytes())
                .map_err(|e| unavailable(&e))?;
            self.inner.audit.record(AuditEvent::ConfigChanged {
                what: "the Postern passphrase was changed".into(),
                server: None,
                narrowing: None,
            });
            return Ok(());
        }
        let key = VaultKey::generate().map_err(|e| unavailable(&e))?;
        let sealed = self
            .seal_existing_credentials(&key)
            .map_err(|e| unavailable(&e))?;
        let wrapped = key
            .wrap(passphrase.expose().as_bytes())
            .map_err(|e| unavailable(&e))?;
        self.inner
            .secrets
            .set(VAULT_KEY_ITEM, wrapped.as_bytes())
            .map_err(|e| unavailable(&e))?;
        {
            let mut state = self.state();
            state.passphrase_set = true;
            // What the store holds now is what the person set up before there was a
            // passphrase: vouched for from here on.
            state.bindings = None;
            state.specs = None;
            state.baselines = None;
            self.seal_config(&state, &key);
            let (bindings, specs, baselines) = self.sealed_bindings(&key);
            state.bindings = Some(bindings);
            state.specs = Some(specs);
            state.baselines = Some(baselines);
        }
        self.inner.audit.record(AuditEvent::ConfigChanged {
            what: if sealed == 0 {
                "a Postern passphrase was set".into()
            } else {
                format!(
                    "a Postern passphrase was set; {sealed} credential value(s) in the keychain were sealed under the vault key"
                )
            },
            server: None,
            narrowing: None,
        });
        self.unlock(Proven { key })
            .map_err(|e| PresenceError::Unavailable(e.to_string()))?;
        Ok(())
    }

    /// Writes a channel's back-off to the store, so that a restart does not reset it.
    fn keep_attempts(&self, channel: Channel, attempts: Attempts) {
        let kept = self
            .inner
            .store
            .lock()
            .map_err(|_| "store unavailable".to_owned())
            .and_then(|store| {
                store
                    .set_setting(attempts_key(channel), &attempts)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = kept {
            tracing::error!("the passphrase back-off could not be stored: {e}");
        }
    }

    /// The keychain's wrapped vault key, if there is one.
    fn wrapped_key(&self) -> Result<Option<WrappedKey>, PresenceError> {
        let stored = self
            .inner
            .secrets
            .get(VAULT_KEY_ITEM)
            .map_err(|e| PresenceError::Unavailable(e.to_string()))?;
        stored
            .map(|bytes| WrappedKey::from_bytes(bytes.expose()))
            .transpose()
            .map_err(|e| PresenceError::Unavailable(e.to_string()))
    }
}

/// Until when plain clicks approve (wall ms): the last passphrase proven while unlocked plus
/// the plain-click window, when the setting is on.
pub(super) fn clicks_until(state: &super::State) -> Option<u64> {
    let window = state.settings.click_window_ms;
    match (state.key.is_some(), state.last_proof_ms) {
        (true, Some(proven)) if window > 0 => Some(proven.saturating_add(window)),
        _ => None,
    }
}

/// Whether the keychain holds a wrapped vault key (an unreadable keychain counts as yes: the
/// first-run step must not offer to replace a key it could not see).
pub fn passphrase_known(secrets: &dyn postern_vault::SecretStore) -> bool {
    !matches!(secrets.get(VAULT_KEY_ITEM), Ok(None))
}

/// Checks `proof` where no engine runs (the CLI's acts on a home no engine owns: forgetting
/// its keychain entries, re-anchoring its audit log, replacing or removing a server; opening
/// the audit log's bodies, whose key is sealed under the vault key). Returns the vault key
/// the passphrase unwrapped. The back-off does not apply: each try costs argon2id's work and
/// a process start.
pub fn check_offline(
    secrets: &dyn postern_vault::SecretStore,
    proof: &Proof,
) -> Result<VaultKey, PresenceError> {
    let passphrase = match proof {
        Proof::Passphrase(passphrase, _) => passphrase,
        Proof::Os(_) => {
            return Err(PresenceError::OsNeedsPassphrase {
                what: "act where no engine runs".into(),
            });
        }
        Proof::Click => {
            return Err(PresenceError::Required {
                what: "act on this home".into(),
            });
        }
    };
    let stored = secrets
        .get(VAULT_KEY_ITEM)
        .map_err(|e| PresenceError::Unavailable(e.to_string()))?
        .ok_or(PresenceError::NotSet)?;
    let wrapped = WrappedKey::from_bytes(stored.expose())
        .map_err(|e| PresenceError::Unavailable(e.to_string()))?;
    match wrapped.unwrap_key(passphrase.expose().as_bytes()) {
        Ok(key) => Ok(key),
        Err(postern_vault::KeyError::WrongPassphrase) => Err(PresenceError::Wrong {
            failures: 1,
            retry_after_ms: 0,
        }),
        Err(e) => Err(PresenceError::Unavailable(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_doubles_to_five_minutes() {
        let waits: Vec<u64> = (1..=12).map(backoff_ms).collect();
        assert_eq!(&waits[..5], &[1000, 2000, 4000, 8000, 16000]);
        assert_eq!(waits[11], BACKOFF_CAP_MS);
        assert_eq!(backoff_ms(u32::MAX), BACKOFF_CAP_MS);
    }
}
