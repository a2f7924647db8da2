//! Releasing credentials: a server launch gets a credential only when a human approved that
//! exact identity (the digest the host captured before launch) for it, for this agent run;
//! the built-in server gets header credentials per call, from the values the vault opens.
//!
//! A launch of an identity nobody approved for a bound credential is started without it
//! (docs/refresh-contract.md §9): its catalog and its credential-free tools work, the status
//! says "credential withheld", and the next call's approval card says so. Approving that call
//! releases the credential to the identity; the server is relaunched with it (a new epoch of
//! the same code) and the call is decided again there, under a grant for the new epoch that the
//! approval carried over ([`Carry`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use postern_domain::decision::GrantChoice;
use postern_domain::{
    AgentIdentity, AgentRun, BUILTIN_LABEL, Credential, Digest, Grant, GrantEnd, GrantId,
    Injection, ServerConfig, ServerLabel, ToolScope,
};
use postern_gateway::authorize::{
    CallToAuthorize, Destination, InjectError, InjectedHeader, LaunchEgress, Release,
};
use postern_vault::Secret;

use super::{Authority, State, VaultState, random};

/// A release a human approved: this agent run's launches of this server with this identity
/// get this credential.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Approved {
    pub run: AgentRun,
    pub server: ServerLabel,
    pub identity: Digest,
    pub credential: String,
}

/// An approval that released credentials to a launch that did not have them: the call is
/// decided again on the relaunch, under a grant for the relaunch's epoch. It is the call's
/// alone: the same session, code, tool and arguments (a call the person never saw does not
/// take it), within [`RETRY_WINDOW_MS`](super::retry::RETRY_WINDOW_MS) of the answer (its
/// agent may have stopped waiting, and its identical retry then makes the relaunch).
#[derive(Debug, Clone)]
pub(super) struct Carry {
    pub approval: postern_domain::ApprovalId,
    pub session: u64,
    pub identity: Digest,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub choice: Option<GrantChoice>,
    /// Where the person answered.
    pub by: postern_domain::AnswerChannel,
    /// Taken by then, or dropped.
    pub until_ms: u64,
    /// A relaunch was made for it: a call that finds its launch still without the
    /// credential (the keychain could not give it) is asked about, never relaunched again.
    pub relaunched: bool,
}

impl Carry {
    /// Whether `call` is the call this carry was given for (on any launch of its code).
    fn is_for(&self, call: &CallToAuthorize, identity: &Digest) -> bool {
        self.session == call.session
            && self.identity == *identity
            && self.tool == call.request.tool
            && self.arguments == call.arguments
    }
}

impl Authority {
    /// The credentials a launch gets: each bound env credential whose release a human approved
    /// for this agent run, server and identity, while the vault is ready.
    pub(super) fn release_for(
        &self,
        agent: Option<&AgentIdentity>,
        config: &ServerConfig,
        identity: &Digest,
    ) -> Release {
        let mut release = self.release_credentials(agent, config, identity);
        // A confined launch reaches the network only through the broker (issue 16): it gets
        // a way out even with no placeholder to hold.
        if release.egress.is_none() && config.confinement == postern_domain::Confinement::Confined {
            self.open_egress(config, Vec::new(), &mut release, &mut Vec::new());
        }
        release
    }

    fn release_credentials(
        &self,
        agent: Option<&AgentIdentity>,
        config: &ServerConfig,
        identity: &Digest,
    ) -> Release {
        let bound: Vec<&Credential> = config
            .credentials
            .iter()
            .filter(|c| c.env_var().is_some())
            .collect();
        let mut release = Release::default();
        if config.label.as_str() == BUILTIN_LABEL {
            // Its requests go out through the broker too; each call borrows the placeholders
            // of the credentials it was allowed (`inject_for`).
            let mut reasons = Vec::new();
            self.open_egress(config, Vec::new(), &mut release, &mut reasons);
            return release;
        }
        if bound.is_empty() {
            return release;
        }
        // Decide under the gate's lock; read the keychain (a D-Bus round trip) after it.
        let run = agent.map(AgentRun::of);
        let decided: Vec<(&Credential, Option<&'static str>)> = {
            let state = self.state();
            bound
                .into_iter()
                .map(|credential| {
                    let name = credential.name.to_string();
                    let approved = run.is_some_and(|run| {
                        state.releases.contains(&Approved {
                            run,
                            server: config.label.clone(),
                            identity: *identity,
                            credential: name.clone(),
                        })
                    });
                    // Checked again where it is used: the server may have been looked up
                    // while the vault was locked (`Authority::vouched` vouches only unlocked).
                    let pair = (config.label.to_string(), name.clone());
                    let unvouched = state.bindings.as_ref().is_some_and(|b| !b.contains(&pair))
                        || state.specs.as_ref().is_some_and(|specs| {
                            !specs.contains(&(name.clone(), super::seal::spec_of(credential)))
                        });
                    let why = if state.vault != VaultState::Ready {
                        Some("the vault is locked")
                    } else if unvouched {
                        Some("its binding or its hosts were not set by a person")
                    } else if run.is_none() {
                        Some("the agent could not be identified")
                    } else if approved {
                        None
                    } else if state.releases.iter().any(|a| {
                        Some(a.run) == run && a.server == config.label && a.credential == name
                    }) {
                        Some("identity changed since approval")
                    } else {
                        Some("not approved for this identity yet")
                    };
                    (credential, why)
                })
                .collect()
        };
        let mut reasons: Vec<&str> = Vec::new();
        let mut brokered: Vec<(String, postern_egress::Brokered)> = Vec::new();
        for (credential, why) in decided {
            let name = credential.name.to_string();
            let value = match why {
                None => match self.read_value(&credential.keychain_item()) {
                    Ok(value) => Some(value),
                    Err(why) => {
                        tracing::warn!(credential = %name, "not released: {why}");
                        reasons.push(why);
                        None
                    }
                },
                Some(why) => {
                    reasons.push(why);
                    None
                }
            };
            match (value, credential.env_var()) {
                // Bound to hosts: the launch holds a placeholder, the broker the value.
                (Some(value), Some(var)) if credential.brokered() => {
                    let brokered_value = postern_egress::Brokered {
                        credential: name,
                        placeholder: super::egress::placeholder(&value),
                        value: Secret::new(value),
                        hosts: credential.hosts.clone(),
                        forms: Vec::new(),
                    };
                    brokered.push((var.to_owned(), brokered_value));
                }
                (Some(value), Some(var)) => {
                    release.env.push((var.to_owned(), Secret::new(value)));
                    release.released.push(name);
                }
                _ => release.withheld.push(name),
            }
        }
        if !brokered.is_empty() {
            self.open_egress(config, brokered, &mut release, &mut reasons);
        }
        reasons.dedup();
        if !reasons.is_empty() {
            release.reason = Some(reasons.join("; "));
        }
        release
    }

    /// The headers an allowed call to the built-in server carries: each credential of its
    /// scope that is still bound to the builtin, is a header kind and may go to `to`, its
    /// value read from the keychain now and formatted for its kind. A credential unbound or
    /// removed since the call was decided is left out (narrower than approved); a value that
    /// cannot be read refuses the call.
    pub(super) fn inject_for(
        &self,
        server: &ServerLabel,
        to: &Destination,
        credentials: &BTreeSet<String>,
        egress: Option<Arc<dyn LaunchEgress>>,
    ) -> Result<Vec<InjectedHeader>, InjectError> {
        if server.as_str() != BUILTIN_LABEL || credentials.is_empty() {
            return Ok(Vec::new());
        }
        if self.vault() != VaultState::Ready {
            return Err(InjectError::VaultLocked);
        }
        let Some(egress) = egress else {
            return Err(InjectError::Unavailable(
                "the egress broker is not running, so no credential can go out".into(),
            ));
        };
        let bound = self
            .store()
            .map_err(|e| InjectError::Unavailable(e.to_string()))?
            .bindings(server)
            .map_err(|e| InjectError::Unavailable(e.to_string()))?;
        let mut headers = Vec::new();
        for name in credentials {
            let Some(credential) = bound.iter().find(|c| c.name.as_str() == name) else {
                tracing::info!(credential = %name, "not injected: no longer bound to the built-in server");
                continue;
            };
            if !to.allows(credential) {
                tracing::info!(credential = %name, host = %to.host, port = to.port, "not injected: the host is not one of the credential's");
                continue;
            }
            let unreadable =
                |why: &str| InjectError::Unavailable(format!("credential '{name}' {why}"));
            let raw = Secret::new(
                self.read_value(&credential.keychain_item())
                    .map_err(|why| unreadable(&format!("was not used: {why}")))?,
            );
            if raw.expose().chars().any(char::is_control) {
                return Err(unreadable(
                    "cannot be sent as an HTTP header (its value has control characters)",
                ));
            }
            // What the header carries of the value, lent to the call as a placeholder: the
            // broker puts it back toward the credential's hosts only.
            let mut forms = Vec::new();
            let (header, secret, format): (String, Secret<String>, fn(&str) -> String) =
                match &credential.injection {
                    Injection::Bearer => ("Authorization".into(), raw, |p| format!("Bearer {p}")),
                    Injection::Basic => {
                        // An answer may quote the decoded pair or the password: neither
                        // comes back.
                        if let Some((_, password)) = raw.expose().split_once(':')
                            && !password.is_empty()
                        {
                            forms.push(Secret::new(password.to_owned()));
                        }
                        let encoded = Secret::new(BASE64.encode(raw.expose()));
                        forms.push(raw);
                        ("Authorization".into(), encoded, |p| format!("Basic {p}"))
                    }
                    Injection::Header { name } => (name.clone(), raw, str::to_owned),
                    Injection::Env { .. } => continue,
                };
            let lent = egress.lend(name, &secret, forms, &credential.hosts);
            headers.push(InjectedHeader {
                credential: name.clone(),
                header,
                value: Secret::new(format(&lent.placeholder)),
                hosts: credential.hosts.clone(),
                hold: Some(lent.hold),
            });
        }
        Ok(headers)
    }

    /// A human approved `call`: its identity may now hold the credentials it would use.
    pub(super) fn approve_release(state: &mut State, call: &CallToAuthorize) {
        let Some(run) = call.request.run() else {
            return;
        };
        let identity = call.record.identity_digest();
        for credential in &call.request.credentials {
            state.releases.insert(Approved {
                run,
                server: call.request.server.clone(),
                identity,
                credential: credential.clone(),
            });
        }
    }

    /// The grant an approval carried to the relaunch it caused, if `call` is on it.
    pub(super) fn take_carry(
        state: &mut State,
        call: &CallToAuthorize,
        now: u64,
    ) -> Option<(
        postern_domain::ApprovalId,
        Grant,
        postern_domain::AnswerChannel,
    )> {
        state.carries.retain(|c| c.until_ms > now);
        if state.carries.is_empty() || !call.withheld.is_empty() {
            return None; // the common case: no digest of the record for it
        }
        let identity = call.record.identity_digest();
        let at = state
            .carries
            .iter()
            .position(|c| c.is_for(call, &identity))?;
        let carry = state.carries.remove(at);
        let end = match carry.choice? {
            GrantChoice::ThisCall => GrantEnd::ThisCallOnly {
                call: call.request.call,
            },
            GrantChoice::UntilRunEnds => GrantEnd::UntilRunEnds,
            GrantChoice::ForMinutes { minutes } => GrantEnd::Until {
                unix_ms: now.saturating_add(u64::from(minutes) * 60_000),
            },
        };
        let grant = Grant {
            id: GrantId::new(now, random()),
            agent_run: call.request.run()?,
            server_label: call.request.server.clone(),
            execution_epoch: call.request.epoch,
            tool_scope: ToolScope::Tools([call.request.tool.clone()].into()),
            credential_scope: call.request.credentials.clone(),
            issued_at: now,
            end,
        };
        Some((carry.approval, grant, carry.by))
    }

    /// Whether `call` is to be relaunched for an approval carried to a relaunch, which its
    /// launch cannot take (it lacks what the approval released): the call that was approved,
    /// retried after its agent stopped waiting, when no relaunch was made for it yet (once
    /// only: a relaunch that still lacks the credential is not made again).
    pub(super) fn relaunch_for_carry(state: &mut State, call: &CallToAuthorize, now: u64) -> bool {
        if state.carries.is_empty() || call.withheld.is_empty() {
            return false;
        }
        let identity = call.record.identity_digest();
        let carry = state
            .carries
            .iter_mut()
            .find(|c| !c.relaunched && c.until_ms > now && c.is_for(call, &identity));
        carry.is_some_and(|c| {
            c.relaunched = true;
            true
        })
    }

    /// A credential's value from the keychain item `item`, opened with the vault key held
    /// while unlocked. A value that is not sealed under this vault's key (stored behind
    /// Postern's back, or under another key) is refused. The error says why, in words.
    fn read_value(&self, item: &str) -> Result<String, &'static str> {
        let stored = match self.inner.secrets.get(item) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err("its value is missing from the keychain"),
            Err(e) => {
                tracing::warn!(%item, "keychain read failed: {e}");
                return Err("the keychain refused to read it");
            }
        };
        let opened = {
            let state = self.state();
            let Some(key) = &state.key else {
                return Err("the vault is locked");
            };
            key.open(item, stored.expose())
        };
        let opened =
            opened.map_err(|_| "its value in the keychain is not sealed under this vault's key")?;
        String::from_utf8(opened.expose().clone()).map_err(|_| "its value is not text")
    }
}

#[cfg(test)]
mod tests {
    //! Per-call injection for the built-in server, over a real store and audit log in a temp
    //! home with the in-memory keychain.

    use std::sync::{Arc, Mutex};

    use postern_store::Store;
    use postern_vault::{MemoryStore, SecretStore};

    use super::*;
    use postern_domain::{CredentialName, CredentialSpec};

    use crate::authority::Proven;
    use crate::{AuditLog, Home, ManualClock};

    struct Fixture {
        authority: Authority,
        proven: Proven,
        _dir: tempfile::TempDir,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let secrets: Arc<dyn SecretStore> = Arc::new(MemoryStore::new());
        let store = Arc::new(Mutex::new(Store::open(home.path()).expect("store")));
        let audit = Arc::new(AuditLog::open(home.path(), Arc::clone(&secrets)));
        let authority = Authority::new(
            audit,
            store,
            Arc::new(ManualClock::new()),
            secrets,
            tokio::sync::broadcast::channel(8).0,
        );
        let passphrase = "correct horse battery";
        authority
            .set_passphrase(&Secret::new(passphrase.into()), None)
            .expect("first passphrase");
        let proven = authority
            .prove(
                Some(&crate::authority::Proof::passphrase(passphrase.into())),
                "test",
            )
            .expect("proof");
        Fixture {
            authority,
            proven,
            _dir: dir,
        }
    }

    /// A request's destination: `127.0.0.1` on the port its credentials name, others on 443.
    fn to(host: &str) -> Destination {
        Destination {
            host: host.into(),
            port: if host == "127.0.0.1" { 8080 } else { 443 },
        }
    }

    fn builtin() -> ServerLabel {
        BUILTIN_LABEL.parse().expect("label")
    }

    fn add(f: &Fixture, name: &str, injection: Injection, hosts: &[&str], value: &str) {
        let name: CredentialName = name.parse().expect("name");
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        let spec = CredentialSpec::new(injection, &hosts).expect("spec");
        f.authority
            .add_credential(&f.proven, &name, spec, false, Secret::new(value.into()))
            .expect("add");
        f.authority
            .bind(&f.proven, &builtin(), &name)
            .expect("bind");
    }

    fn scope(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    /// A launch's way out that lends each credential as `ph-<name>` and remembers what it
    /// was lent.
    #[derive(Debug, Default)]
    struct Lender(Mutex<Vec<(String, String)>>);

    impl LaunchEgress for Lender {
        fn started(&self, _: postern_domain::ExecutionEpoch) {}

        fn lend(
            &self,
            credential: &str,
            value: &Secret<String>,
            _forms: Vec<Secret<String>>,
            _hosts: &[String],
        ) -> postern_gateway::authorize::Lent {
            self.0
                .lock()
                .expect("lent")
                .push((credential.to_owned(), value.expose().clone()));
            postern_gateway::authorize::Lent {
                placeholder: format!("ph-{credential}"),
                hold: Arc::new(()),
            }
        }
    }

    fn lender() -> (Arc<Lender>, Option<Arc<dyn LaunchEgress>>) {
        let lender = Arc::new(Lender::default());
        let egress: Arc<dyn LaunchEgress> = lender.clone();
        (lender, Some(egress))
    }

    fn shown(headers: &[InjectedHeader]) -> Vec<(String, String, String)> {
        headers
            .iter()
            .map(|h| {
                (
                    h.credential.clone(),
                    h.header.clone(),
                    h.value.expose().clone(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn each_kind_is_formatted_and_only_for_its_hosts() {
        let f = fixture();
        add(&f, "api", Injection::Bearer, &["api.example.com"], "tok-1");
        add(
            &f,
            "basic",
            Injection::Basic,
            &["api.example.com"],
            "alice:pw",
        );
        let key = Injection::Header {
            name: "X-Api-Key".into(),
        };
        add(&f, "key", key, &["other.example.com"], "key-1");
        let all = scope(&["api", "basic", "key"]);
        let (lent, egress) = lender();
        let headers = f
            .authority
            .inject_for(&builtin(), &to("api.example.com"), &all, egress.clone())
            .expect("inject");
        // The call carries placeholders; the broker was lent what goes in their place.
        assert_eq!(
            shown(&headers),
            [
                ("api".into(), "Authorization".into(), "Bearer ph-api".into()),
                (
                    "basic".into(),
                    "Authorization".into(),
                    "Basic ph-basic".into()
                ),
            ]
        );
        assert_eq!(
            *lent.0.lock().expect("lent"),
            [
                ("api".to_owned(), "tok-1".to_owned()),
                ("basic".to_owned(), BASE64.encode("alice:pw")),
            ]
        );
        assert!(headers.iter().all(|h| h.hold.is_some()));
        assert_eq!(headers[0].hosts, ["api.example.com"]);
        let other = f
            .authority
            .inject_for(&builtin(), &to("other.example.com"), &all, egress.clone())
            .expect("inject");
        assert_eq!(
            shown(&other),
            [("key".into(), "X-Api-Key".into(), "ph-key".into())]
        );
        // Without a way out (no broker), nothing is lent: the call is refused.
        assert!(matches!(
            f.authority
                .inject_for(&builtin(), &to("api.example.com"), &all, None)
                .expect_err("no broker"),
            InjectError::Unavailable(_)
        ));
        // Only the builtin, and only the call's own scope.
        let label: ServerLabel = "time".parse().expect("label");
        assert!(
            f.authority
                .inject_for(&label, &to("api.example.com"), &all, egress.clone())
                .expect("other server")
                .is_empty()
        );
        assert!(
            f.authority
                .inject_for(&builtin(), &to("api.example.com"), &BTreeSet::new(), egress)
                .expect("empty")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn unbound_is_left_out_and_a_locked_vault_or_a_missing_value_refuses() {
        let f = fixture();
        add(&f, "api", Injection::Bearer, &["127.0.0.1:8080"], "tok-2");
        let api = scope(&["api"]);
        let (_lent, egress) = lender();
        f.authority
            .unbind(&builtin(), &"api".parse().expect("name"))
            .expect("unbind");
        assert!(
            f.authority
                .inject_for(&builtin(), &to("127.0.0.1"), &api, egress.clone())
                .expect("unbound")
                .is_empty()
        );

        f.authority
            .bind(&f.proven, &builtin(), &"api".parse().expect("name"))
            .expect("bind");
        // Bound to one port on this machine: not another port there.
        let elsewhere = Destination {
            port: 8081,
            ..to("127.0.0.1")
        };
        assert!(
            f.authority
                .inject_for(&builtin(), &elsewhere, &api, egress.clone())
                .expect("another port")
                .is_empty()
        );
        f.authority
            .inner
            .secrets
            .delete("credential.api.v1")
            .expect("delete");
        let missing = f
            .authority
            .inject_for(&builtin(), &to("127.0.0.1"), &api, egress.clone())
            .expect_err("missing");
        assert_eq!(
            missing,
            InjectError::Unavailable(
                "credential 'api' was not used: its value is missing from the keychain".into()
            )
        );
        // A value written into the keychain behind Postern's back is not sealed under the
        // vault key: it is not used.
        f.authority
            .inner
            .secrets
            .set("credential.api.v1", b"planted")
            .expect("set");
        let planted = f
            .authority
            .inject_for(&builtin(), &to("127.0.0.1"), &api, egress.clone())
            .expect_err("planted");
        assert_eq!(
            planted,
            InjectError::Unavailable(
                "credential 'api' was not used: its value in the keychain is not sealed under this vault's key".into()
            )
        );

        f.authority.lock("test");
        assert_eq!(
            f.authority
                .inject_for(&builtin(), &to("127.0.0.1"), &api, egress.clone())
                .expect_err("locked"),
            InjectError::VaultLocked
        );
    }

    #[tokio::test]
    async fn the_builtin_takes_header_credentials_and_only_it_does() {
        let f = fixture();
        let env = "env".parse::<CredentialName>().expect("name");
        f.authority
            .add_credential(
                &f.proven,
                &env,
                CredentialSpec::new(
                    Injection::Env {
                        var: "TOKEN".into(),
                    },
                    &[],
                )
                .expect("spec"),
                false,
                Secret::new("v".into()),
            )
            .expect("add");
        let refused = f
            .authority
            .bind(&f.proven, &builtin(), &env)
            .expect_err("env on builtin");
        assert!(
            refused
                .to_string()
                .contains("injects only header credentials"),
            "{refused}"
        );

        add(&f, "api", Injection::Bearer, &["127.0.0.1:8080"], "tok-3");
        let store = f.authority.store().expect("store");
        let bound = store.bindings(&builtin()).expect("bindings");
        assert_eq!(bound.len(), 1);
        assert_eq!(bound[0].name.as_str(), "api");
    }
}
