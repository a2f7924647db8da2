//! Credentials (issue 6): values in the OS keychain (sealed under the vault key), metadata in
//! the store; adding, rotating, removing and binding them, each a person's proven act. Who
//! gets a value, and when, is `release.rs`.

use postern_domain::decision::{EveryUse, EveryUseSetting, SettingTarget};
use postern_domain::{
    BUILTIN_LABEL, Credential, CredentialName, CredentialSpec, Injection, ServerConfig, ServerLabel,
};
use postern_gateway::Command;
use postern_vault::Secret;

use super::seal::Vouch;
use super::{Authority, Proven};

/// Why a credential operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// A credential of that name exists.
    #[error("a credential named '{0}' exists; rotate it or remove it first")]
    Exists(CredentialName),
    /// No credential of that name.
    #[error("no credential named '{0}'")]
    NotFound(CredentialName),
    /// No server of that label.
    #[error("no server is configured as '{0}'")]
    NoServer(ServerLabel),
    /// The server's environment has no such variable (to move into the keychain).
    #[error("'{server}' sets no environment variable {var}")]
    NoVariable {
        /// The server.
        server: ServerLabel,
        /// The variable asked for.
        var: String,
    },
    /// A header credential bound to a server other than the built-in one.
    #[error(
        "credential '{0}' is injected as an HTTP header; only the built-in server '{builtin}' can use it",
        builtin = BUILTIN_LABEL
    )]
    HeaderBeyondBuiltin(CredentialName),
    /// An environment credential bound to the built-in server.
    #[error(
        "credential '{0}' is an environment variable; the built-in server '{builtin}' injects only header credentials (bearer, header, basic)",
        builtin = BUILTIN_LABEL
    )]
    EnvOnBuiltin(CredentialName),
    /// The server sets the credential's variable in its own environment.
    #[error(
        "credential '{name}' sets {var}, which server '{server}' already sets in its own environment (--env); one would silently win at launch. Add the server again without --env {var}=... (postern server add {server} ... replaces it), or give the credential another variable"
    )]
    SetByServer {
        /// The credential.
        name: CredentialName,
        /// Its variable.
        var: String,
        /// The server.
        server: ServerLabel,
    },
    /// Another credential bound to the server sets the same variable.
    #[error(
        "credential '{name}' sets {var}, which credential '{other}' bound to '{server}' already sets; one would silently win at launch. Unbind it first (postern server unbind {server} {other}) or give one of them another variable"
    )]
    SetByCredential {
        /// The credential.
        name: CredentialName,
        /// Its variable.
        var: String,
        /// The credential already bound.
        other: CredentialName,
        /// The server.
        server: ServerLabel,
    },
    /// A per-call approval setting the credential asked for was refused.
    #[error("{0}")]
    Settings(String),
    /// The store or the keychain refused, or a value or spec does not fit (its reason).
    #[error("{0}")]
    Failed(String),
}

impl CredentialError {
    /// The stable code a refusal carries (docs/errors.md, "Refusals of management requests");
    /// none for a store or keychain failure or a refused setting, whose sentence says what.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::Exists(_) => Some("credential_exists"),
            Self::NotFound(_) => Some("credential_not_found"),
            Self::NoServer(_) => Some("server_not_found"),
            Self::NoVariable { .. } => Some("variable_not_set"),
            Self::HeaderBeyondBuiltin(_) | Self::EnvOnBuiltin(_) => {
                Some("credential_kind_mismatch")
            }
            Self::SetByServer { .. } | Self::SetByCredential { .. } => Some("variable_conflict"),
            Self::Settings(_) | Self::Failed(_) => None,
        }
    }
}

impl Authority {
    /// Adds a credential: its value to the keychain, its metadata to the store. With
    /// `every_use`, every call that would use it needs a human.
    pub fn add_credential(
        &self,
        proven: &Proven,
        name: &CredentialName,
        spec: CredentialSpec,
        every_use: bool,
        value: Secret<String>,
    ) -> Result<Credential, CredentialError> {
        spec.injection().check_value(value.expose()).map_err(fail)?;
        let store = self.store()?;
        if store.credential(name).map_err(fail)?.is_some() {
            return Err(CredentialError::Exists(name.clone()));
        }
        let item = postern_domain::credential::keychain_item(name, 1);
        let sealed = proven
            .key
            .seal(&item, value.expose().as_bytes())
            .map_err(fail)?;
        self.inner.secrets.set(&item, &sealed).map_err(fail)?;
        if let Err(e) = store.add_credential(name, spec.injection(), &spec.hosts(), every_use) {
            let _ = self.inner.secrets.delete(&item);
            return Err(fail(e));
        }
        drop(store);
        // Sealed as the person gave it, never as read back: a row rewritten meanwhile is not
        // theirs. (The store's lock let go: the authority's is taken first, then the store's.)
        let sealed = super::seal::spec_text(spec.injection(), &spec.hosts());
        let change = Vouch::Credential {
            name: name.as_str(),
            spec: Some(&sealed),
        };
        self.vouch_proven(&mut self.state(), proven, change);
        if every_use {
            self.set_every_use(
                EveryUseSetting {
                    target: SettingTarget::Credential {
                        name: name.to_string(),
                    },
                    level: EveryUse::Confirm,
                },
                Some(proven),
            )
            .map_err(|e| CredentialError::Settings(e.0))?;
        }
        self.config_changed();
        self.credential(name)
    }

    /// Every credential's metadata.
    pub fn credentials(&self) -> Result<Vec<Credential>, CredentialError> {
        self.store()?.credentials().map_err(fail)
    }

    fn credential(&self, name: &CredentialName) -> Result<Credential, CredentialError> {
        self.store()?
            .credential(name)
            .map_err(fail)?
            .ok_or_else(|| CredentialError::NotFound(name.clone()))
    }

    /// Replaces a credential's value (a new version); servers holding the old value restart.
    pub fn rotate_credential(
        &self,
        proven: &Proven,
        name: &CredentialName,
        value: Secret<String>,
    ) -> Result<Credential, CredentialError> {
        let old = self.credential(name)?;
        old.injection.check_value(value.expose()).map_err(fail)?;
        let next = postern_domain::credential::keychain_item(name, old.version + 1);
        let sealed = proven
            .key
            .seal(&next, value.expose().as_bytes())
            .map_err(fail)?;
        self.inner.secrets.set(&next, &sealed).map_err(fail)?;
        let rotated = self.store()?.rotate_credential(name).map_err(fail)?;
        let rotated = rotated.ok_or_else(|| CredentialError::NotFound(name.clone()))?;
        let _ = self.inner.secrets.delete(&old.keychain_item());
        self.config_changed();
        let _ = self
            .inner
            .commands
            .send(Command::RestartHolding(name.to_string()));
        self.revoke_lent();
        Ok(rotated)
    }

    /// Removes a credential: its value, its metadata, its bindings; servers holding it restart
    /// without it.
    pub fn remove_credential(
        &self,
        proven: &Proven,
        name: &CredentialName,
    ) -> Result<(), CredentialError> {
        let old = self.credential(name)?;
        self.store()?.remove_credential(name).map_err(fail)?;
        let change = Vouch::Credential {
            name: name.as_str(),
            spec: None,
        };
        self.vouch_proven(&mut self.state(), proven, change);
        let _ = self.inner.secrets.delete(&old.keychain_item());
        // A credential added again under this name is another secret: approved anew.
        self.state()
            .releases
            .retain(|a| a.credential != name.as_str());
        let _ = self.set_every_use(
            EveryUseSetting {
                target: SettingTarget::Credential {
                    name: name.to_string(),
                },
                level: EveryUse::Off,
            },
            Some(proven),
        );
        self.config_changed();
        let _ = self
            .inner
            .commands
            .send(Command::RestartHolding(name.to_string()));
        self.revoke_lent();
        Ok(())
    }

    /// Moves `var` out of `server`'s configured environment (plain text in the database, as
    /// an imported agent configuration had it) into the OS keychain: an env credential named
    /// `<server>-<var>` in lower case, bound to `server`, so the server gets the same variable,
    /// released only to code a person approved. Adds and binds a credential: it needs the
    /// person's proof. Nothing changes when a step fails.
    pub fn move_env_to_keychain(
        &self,
        proven: &Proven,
        server: &ServerLabel,
        var: &str,
    ) -> Result<CredentialName, CredentialError> {
        // The store's lock is taken for each step, never across the credential calls (they
        // take it themselves).
        let config = self
            .store()?
            .server(server)
            .map_err(fail)?
            .ok_or_else(|| CredentialError::NoServer(server.clone()))?;
        let Some(at) = config.env.iter().position(|v| v.name == var) else {
            return Err(CredentialError::NoVariable {
                server: server.clone(),
                var: var.to_owned(),
            });
        };
        let derived = format!("{server}-{var}").to_ascii_lowercase().replace(
            |c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "-",
        );
        let name: CredentialName = derived.parse().map_err(fail)?;
        let spec = CredentialSpec::new(
            Injection::Env {
                var: var.to_owned(),
            },
            &[],
        )
        .map_err(fail)?;
        let mut moved = config.clone();
        let value = Secret::new(moved.env.remove(at).value);
        self.add_credential(proven, &name, spec, false, value)?;
        let moved_out = self.store()?.add_server(&moved).map_err(fail);
        let bound = moved_out.and_then(|_| self.bind(proven, server, &name));
        if let Err(err) = bound {
            if let Ok(store) = self.store() {
                let _ = store.add_server(&config);
            }
            let _ = self.remove_credential(proven, &name);
            return Err(err);
        }
        // The plain value is gone from the row (zeroed by `secure_delete`); its older copies
        // in the write-ahead log go too.
        match self.store()?.forget_deleted() {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                %server,
                "a reader kept the database's write-ahead log: the moved value's old copy \
                 leaves it at the next checkpoint"
            ),
            Err(e) => tracing::warn!(%server, "cannot checkpoint the database: {e}"),
        }
        self.config_changed();
        Ok(name)
    }

    /// Binds a credential to a server (its next launch may get it, once approved).
    pub fn bind(
        &self,
        proven: &Proven,
        server: &ServerLabel,
        name: &CredentialName,
    ) -> Result<bool, CredentialError> {
        // Held until the binding is sealed: a launch looking its server up meanwhile would
        // find a binding the seal does not vouch for yet, and drop it (`Authority::vouched`).
        let mut state = self.state();
        let store = self.store()?;
        let builtin = server.as_str() == BUILTIN_LABEL;
        let config = store.server(server).map_err(fail)?;
        if !builtin && config.is_none() {
            return Err(CredentialError::NoServer(server.clone()));
        }
        let credential = store
            .credential(name)
            .map_err(fail)?
            .ok_or_else(|| CredentialError::NotFound(name.clone()))?;
        if !builtin && credential.env_var().is_none() {
            return Err(CredentialError::HeaderBeyondBuiltin(name.clone()));
        }
        if builtin && credential.env_var().is_some() {
            return Err(CredentialError::EnvOnBuiltin(name.clone()));
        }
        if let (Some(config), Some(var)) = (config, credential.env_var()) {
            collision(&config, name, var)?;
        }
        let bound = store.bind(server, name).map_err(fail)?;
        drop(store);
        let change = Vouch::Binding {
            server: server.as_str(),
            credential: name.as_str(),
            bound: true,
        };
        self.vouch_proven(&mut state, proven, change);
        drop(state);
        crate::record_config_changes(&self.inner.store, &self.inner.audit);
        self.changed();
        if bound {
            // Running processes were launched without the binding: their next launch knows
            // it (and withholds the value until a human approves that launch's identity).
            let _ = self.inner.commands.send(Command::Restart(server.clone()));
        }
        Ok(bound)
    }

    /// Unbinds a credential from a server; servers holding it restart without it.
    pub fn unbind(
        &self,
        server: &ServerLabel,
        name: &CredentialName,
    ) -> Result<bool, CredentialError> {
        let unbound = self.store()?.unbind(server, name).map_err(fail)?;
        let mut guard = self.state();
        let state = &mut *guard;
        let change = Vouch::Binding {
            server: server.as_str(),
            credential: name.as_str(),
            bound: false,
        };
        change.apply(&mut state.bindings, &mut state.specs);
        drop(guard);
        self.config_changed();
        if unbound {
            // Bound again later, it is released only on a new approval.
            self.state()
                .releases
                .retain(|a| !(a.credential == name.as_str() && a.server == *server));
            let _ = self
                .inner
                .commands
                .send(Command::RestartHolding(name.to_string()));
            self.revoke_lent();
        }
        Ok(unbound)
    }

    /// Seals, under `key`, every credential value in the keychain stored before the vault
    /// had a key (a home from before the passphrase). Returns how many were sealed.
    pub(super) fn seal_existing_credentials(
        &self,
        key: &postern_vault::VaultKey,
    ) -> Result<usize, CredentialError> {
        let credentials = self.store()?.credentials().map_err(fail)?;
        let mut sealed = 0;
        for credential in credentials {
            let item = credential.keychain_item();
            let Some(value) = self.inner.secrets.get(&item).map_err(fail)? else {
                continue;
            };
            if postern_vault::is_sealed(value.expose()) {
                continue;
            }
            let value = key.seal(&item, value.expose()).map_err(fail)?;
            self.inner.secrets.set(&item, &value).map_err(fail)?;
            sealed += 1;
        }
        Ok(sealed)
    }

    pub(super) fn store(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, postern_store::Store>, CredentialError> {
        self.inner
            .store
            .lock()
            .map_err(|_| CredentialError::Failed("the store is unavailable".into()))
    }

    fn config_changed(&self) {
        crate::record_config_changes(&self.inner.store, &self.inner.audit);
        // Bindings are under the seal.
        self.reseal(&self.state());
        self.changed();
    }
}

/// Refuses binding `name`, released as `var`, to `config` when something else already sets
/// `var` at its launch (one of them would silently win): the server's own environment, or
/// another env credential bound to it. Binding the same credential again is no collision.
fn collision(
    config: &ServerConfig,
    name: &CredentialName,
    var: &str,
) -> Result<(), CredentialError> {
    let sets_it = |other: &str| crate::servers::sets(var, other);
    let server = &config.label;
    if config.env.iter().any(|e| sets_it(&e.name)) {
        return Err(CredentialError::SetByServer {
            name: name.clone(),
            var: var.to_owned(),
            server: server.clone(),
        });
    }
    let other = config
        .credentials
        .iter()
        .find(|c| c.name != *name && c.env_var().is_some_and(sets_it));
    if let Some(other) = other {
        return Err(CredentialError::SetByCredential {
            name: name.clone(),
            var: var.to_owned(),
            other: other.name.clone(),
            server: server.clone(),
        });
    }
    Ok(())
}

fn fail(e: impl std::fmt::Display) -> CredentialError {
    CredentialError::Failed(e.to_string())
}
