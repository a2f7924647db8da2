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
                release.egress = Some(Arc::new(EgressLaunch(launch)));
                release.brokered.extend(names.iter().cloned());
                release.released.extend(names);
            }
            Err(why) => {
                reasons.push(why);
                release.withheld.extend(names);
            }
        }
    }

    /// A launch of `server` sent `credentials`' placeholders where they may not go: the
    /// release approvals of those credentials for that server are withdrawn.
    fn leaked(&self, server: &str, credentials: &[String]) {
        let mut state = self.state();
        state
            .releases
            .retain(|a| !(a.server.as_str() == server && credentials.contains(&a.credential)));
        drop(state);
        self.changed();
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
#[derive(Debug)]
struct EgressLaunch(postern_egress::Launch);

impl LaunchEgress for EgressLaunch {
    fn started(&self, epoch: ExecutionEpoch) {
        self.0.set_epoch(epoch);
    }

    fn lend(&self, credential: &str, value: &Secret<String>, hosts: &[String]) -> Lent {
        let placeholder = placeholder(value.expose());
        let admission = self.0.admit(Brokered {
            credential: credential.to_owned(),
            placeholder: placeholder.clone(),
            value: Secret::new(value.expose().clone()),
            hosts: hosts.to_vec(),
        });
        Lent {
            placeholder,
            hold: Arc::new(admission),
        }
    }
}

/// Where the broker reports: the audit log, and the gate for a leak attempt.
struct Report {
    gate: Weak<Inner>,
}

impl EgressSink for Report {
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

    fn leak(&self, launch: &LaunchInfo, credentials: &[String], host: &str) {
        let Some(inner) = self.gate.upgrade() else {
            return;
        };
        if let Ok(server) = launch.server.parse() {
            inner.audit.record(AuditEvent::CredentialLeakAttempt {
                server,
                epoch: launch.epoch,
                credentials: credentials.to_vec(),
                host: host.to_owned(),
            });
        }
        Authority { inner }.leaked(&launch.server, credentials);
    }
}
