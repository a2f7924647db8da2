//! The egress broker as the gate runs it (issue 15): a launch given a credential bound to hosts
//! holds a placeholder, and its way out is the broker ([`postern_egress`]), which puts the value
//! in requests to those hosts only. The built-in `http_request` goes out the same way: its
//! launch has a way out of its own, and each allowed call borrows its credentials' placeholders
//! for as long as it is open ([`LaunchEgress::lend`]). What the broker does is audited here; a placeholder headed
//! anywhere else withdraws the release approvals of that server's credentials, so the next
//! launch is given none of them until a person approves again.

use std::path::Path;
use std::sync::{Arc, Weak};

use postern_domain::{AuditEvent, ExecutionEpoch, ServerConfig};
use postern_egress::{Broker, Brokered, EgressError, EgressSink, LaunchInfo};
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::{LaunchEgress, Lent, Release};
use postern_vault::Secret;

use super::{Authority, Inner};

impl Authority {
    /// Starts the egress broker: its files in `dir`, upstream TLS also trusting `extra_ca`.
    /// Until it runs, a credential bound to hosts is withheld from launches.
    pub fn start_egress(&self, dir: &Path, extra_ca: Option<&Path>) -> Result<(), EgressError> {
        let report = Report {
            gate: Arc::downgrade(&self.inner),
        };
        let broker = Broker::start(dir, extra_ca, Arc::new(report))?;
        if self.inner.egress.set(broker).is_err() {
            tracing::warn!("the egress broker was started twice; the first one stays");
        }
        Ok(())
    }

    /// The files launches' proxy variables name (the broker's trust store, its Node preload),
    /// which a confined launch reads; none while the broker is not running.
    pub fn egress_files(&self) -> Vec<std::path::PathBuf> {
        self.inner.egress.get().map_or_else(Vec::new, |broker| {
            let files = broker.files();
            vec![files.ca.clone(), files.bundle.clone(), files.node.clone()]
        })
    }

    /// Opens the way out for a launch of `config` holding `brokered` (each with the variable
    /// its placeholder goes in), adding the placeholders and the broker's variables to
    /// `release`; without a broker they are withheld.
    pub(super) fn open_egress(
        &self,
        config: &ServerConfig,
        brokered: Vec<(String, Brokered)>,
        release: &mut Release,
        reasons: &mut Vec<&'static str>,
    ) {
        let names: Vec<String> = brokered.iter().map(|(_, b)| b.credential.clone()).collect();
        let placeholders: Vec<(String, Secret<String>)> = brokered
            .iter()
            .map(|(var, b)| (var.clone(), Secret::new(b.placeholder.clone())))
            .collect();
        let brokered: Vec<Brokered> = brokered.into_iter().map(|(_, b)| b).collect();
        let own_options = config
            .env
            .iter()
            .find(|var| var.name == "NODE_OPTIONS")
            .map(|var| var.value.as_str());
        let opened = match self.inner.egress.get() {
            Some(broker) => broker
                .open(config.label.as_str(), brokered, own_options)
                .map_err(|e| {
                    tracing::error!(server = %config.label, "the egress broker could not open a way out: {e}");
                    "the egress broker could not open a way out"
                }),
            None => Err("the egress broker is not running"),
        };
        match opened {
            Ok(launch) => {
                release.env.extend(placeholders);
                release.env.extend(
                    launch
                        .env()
                        .iter()
                        .map(|(k, v)| (k.clone(), Secret::new(v.clone()))),
                );
                release.egress = Some(Arc::new(EgressLaunch {
                    launch,
                    gate: Arc::downgrade(&self.inner),
                }));
                release.brokered.extend(names.iter().cloned());
                release.released.extend(names);
            }
            Err(why) => {
                reasons.push(why);
                release.withheld.extend(names);
            }
        }
    }

    /// A launch of `server` sent `credentials`' placeholders toward `host`, where they may not
    /// go: the release approvals of those credentials for that server are withdrawn, and a
    /// notice waits for a person ([`crate::GateStatus::leaks`]).
    fn leaked(&self, server: &str, credentials: &[String], host: &str) {
        let now = self.now();
        let mut state = self.state();
        state
            .releases
            .retain(|a| !(a.server.as_str() == server && credentials.contains(&a.credential)));
        let same = |n: &crate::LeakNotice| {
            n.server == server && n.host == host && n.credentials == credentials
        };
        match state.leaks.iter().position(same) {
            Some(i) => {
                let mut notice = state.leaks.remove(i);
                notice.at_ms = now;
                notice.count = notice.count.saturating_add(1);
                state.leaks.push(notice);
            }
            None => state.leaks.push(crate::LeakNotice {
                server: server.to_owned(),
                credentials: credentials.to_vec(),
                host: host.to_owned(),
                at_ms: now,
                count: 1,
            }),
        }
        let excess = state.leaks.len().saturating_sub(super::MAX_LEAKS);
        state.leaks.drain(..excess);
        drop(state);
        self.changed();
    }

    /// Takes back every placeholder lent to an open built-in call: the vault locked, or a
    /// credential changed, so no call decided before may still use a value.
    pub(super) fn revoke_lent(&self) {
        let lent = std::mem::take(&mut *self.inner.lent.lock().unwrap_or_else(|e| e.into_inner()));
        for admission in lent.iter().filter_map(Weak::upgrade) {
            admission.revoke();
        }
    }

    /// A person saw the leak notices: they are cleared (the withdrawn approvals stay
    /// withdrawn). Returns how many there were.
    pub fn dismiss_leaks(&self) -> usize {
        let dismissed = std::mem::take(&mut self.state().leaks).len();
        if dismissed > 0 {
            self.changed();
        }
        dismissed
    }
}

/// A placeholder for `value`, from fresh randomness.
pub(super) fn placeholder(value: &str) -> String {
    let mut random = vec![0u8; postern_domain::credential::randomness_needed(value.len())];
    if let Err(e) = getrandom::fill(&mut random) {
        // No randomness: a placeholder of zeros would be guessable; refuse loudly instead.
        panic!("no randomness from the operating system for a placeholder: {e}");
    }
    postern_domain::credential::placeholder(value, &random)
}

/// The broker's launch, kept by the session while its process runs.
struct EgressLaunch {
    launch: postern_egress::Launch,
    /// Where lent placeholders are registered, to be taken back (`Authority::revoke_lent`).
    gate: Weak<Inner>,
}

impl std::fmt::Debug for EgressLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EgressLaunch").field(&self.launch).finish()
    }
}

impl LaunchEgress for EgressLaunch {
    fn started(&self, epoch: ExecutionEpoch) {
        self.launch.set_epoch(epoch);
    }

    fn way_out(&self) -> Option<postern_supervisor::WayOut> {
        Some(postern_supervisor::WayOut {
            port: self.launch.port(),
            socket: self.launch.socket().to_owned(),
        })
    }

    fn lend(
        &self,
        credential: &str,
        value: &Secret<String>,
        forms: Vec<Secret<String>>,
        hosts: &[String],
    ) -> Lent {
        let placeholder = placeholder(value.expose());
        let admission = Arc::new(self.launch.admit(Brokered {
            credential: credential.to_owned(),
            placeholder: placeholder.clone(),
            value: Secret::new(value.expose().clone()),
            hosts: hosts.to_vec(),
            forms,
        }));
        if let Some(gate) = self.gate.upgrade() {
            let mut lent = gate.lent.lock().unwrap_or_else(|e| e.into_inner());
            lent.retain(|a| a.strong_count() > 0);
            lent.push(Arc::downgrade(&admission));
        }
        Lent {
            placeholder,
            hold: admission,
        }
    }
}

/// Where the broker reports: the audit log, and the gate for a leak attempt.
struct Report {
    gate: Weak<Inner>,
}

impl EgressSink for Report {
    fn may_substitute(&self, _: &LaunchInfo) -> bool {
        self.gate.upgrade().is_some_and(|inner| {
            Authority { inner }.vault_now() == postern_domain::decision::VaultState::Ready
        })
    }

    fn substituted(&self, launch: &LaunchInfo, credentials: &[String], host: &str) {
        let Some(inner) = self.gate.upgrade() else {
            return;
        };
        let Ok(server) = launch.server.parse() else {
            return;
        };
        inner.audit.record(AuditEvent::CredentialSubstituted {
            server,
            epoch: launch.epoch,
            credentials: credentials.to_vec(),
            host: host.to_owned(),
        });
    }

    fn leak(&self, launch: &LaunchInfo, credentials: &[String], to: &str) {
        let Some(inner) = self.gate.upgrade() else {
            return;
        };
        if let Ok(server) = launch.server.parse() {
            inner.audit.record(AuditEvent::CredentialLeakAttempt {
                server,
                epoch: launch.epoch,
                credentials: credentials.to_vec(),
                host: to.to_owned(),
            });
        }
        Authority { inner }.leaked(&launch.server, credentials, to);
    }
}
