//! Adding a server, the one way the CLI (`postern server add`, `postern import`) and the app
//! (the first-run form, import) both do it: what a person typed becomes a checked
//! [`ServerConfig`] ([`ServerForm::config`]), and the store takes it unless the label is taken
//! (when replacing is not asked for) or a bound credential sets one of its variables
//! ([`add`]). The caller then has the engine record the change in the audit log.

use std::path::PathBuf;

use postern_domain::{EnvName, EnvVar, ServerConfig, ServerLabel};
use postern_store::{AddOutcome, Store, StoreError};

/// A server as a person typed it, before any check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerForm {
    /// The label agents will use (`postern mcp <label>`); surrounding blanks are ignored.
    pub label: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The working directory: absolute, existing (a CLI makes a relative one absolute first).
    pub cwd: Option<PathBuf>,
    /// Environment variables, `NAME=value` each; blank lines are ignored.
    pub env: Vec<String>,
}

/// Why a server was not added.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// What was typed is not a server (a bad label, working directory or variable).
    #[error("{0}")]
    Invalid(String),
    /// The label is configured already, and replacing was not asked for.
    #[error("a server '{0}' is configured already")]
    Exists(ServerLabel),
    /// A credential bound to the label sets one of the server's own variables at launch.
    #[error(
        "credential '{credential}' bound to '{label}' sets {var} at launch; --env {var}=... would set it too, and one would silently win. Leave out --env {var}, or unbind the credential first (postern server unbind {label} {credential})"
    )]
    EnvSetByCredential {
        /// The server.
        label: ServerLabel,
        /// The variable both would set.
        var: String,
        /// The credential's scope name.
        credential: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ServerForm {
    /// The configuration this form describes, checked: a configurable label, an absolute
    /// existing working directory (canonical), well-formed variables, a program.
    pub fn config(self) -> Result<ServerConfig, ServerError> {
        let invalid = |e: String| ServerError::Invalid(e);
        let label = ServerLabel::parse_configurable(self.label.trim())
            .map_err(|e| invalid(e.to_string()))?;
        let cwd =
            match self.cwd.filter(|c| !c.as_os_str().is_empty()) {
                None => None,
                Some(dir) if !dir.is_absolute() => {
                    return Err(invalid(format!(
                        "the working directory must be an absolute path; got {:?}",
                        dir.display().to_string()
                    )));
                }
                Some(dir) => Some(std::fs::canonicalize(&dir).map_err(|e| {
                    invalid(format!("the working directory {}: {e}", dir.display()))
                })?),
            };
        let env = self
            .env
            .iter()
            .filter(|line| !line.trim().is_empty())
            .map(|line| line.parse::<EnvVar>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(e.to_string()))?;
        ServerConfig::new(label, self.command, cwd, env).map_err(|e| invalid(e.to_string()))
    }
}

/// Whether the server to add may take the place of one with its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse: the label is someone else's ([`ServerError::Exists`]).
    Refuse,
    /// Replace it (the caller has the person's proof: replacing destroys configuration).
    Replace,
}

/// Adds `config` to the store, refusing a taken label unless `existing` says replace, and a
/// variable that a credential bound to the label sets at launch (one would silently win).
/// The change is queued for the audit log: the caller tells the engine
/// ([`crate::Engine::config_changed`], or the socket's `configChanged` from another process).
pub fn add(
    store: &Store,
    config: &ServerConfig,
    existing: Existing,
) -> Result<AddOutcome, ServerError> {
    check(store, config, existing)?;
    Ok(store.add_server(config)?)
}

/// What [`add`] would refuse, without adding (a dry run).
pub fn check(store: &Store, config: &ServerConfig, existing: Existing) -> Result<(), ServerError> {
    if existing == Existing::Refuse && store.server(&config.label)?.is_some() {
        return Err(ServerError::Exists(config.label.clone()));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some((path, why)) = postern_supervisor::refused_writable(config, home.as_deref()) {
        return Err(ServerError::Invalid(format!(
            "--writable {}: a confined server may not write there: {why}",
            path.display()
        )));
    }
    for credential in store.bindings(&config.label)? {
        let Some(var) = credential.env_var() else {
            continue;
        };
        if config.env.iter().any(|e| sets(var, &e.name)) {
            return Err(ServerError::EnvSetByCredential {
                label: config.label.clone(),
                var: var.to_owned(),
                credential: credential.name.to_string(),
            });
        }
    }
    Ok(())
}

/// Whether setting `other` at launch sets the variable `var` (names compared as the platform
/// does; a name stored before names were checked is compared as it is).
pub(crate) fn sets(var: &str, other: &str) -> bool {
    var.parse::<EnvName>()
        .ok()
        .map_or(other == var, |name| name.is(other))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(label: &str, cwd: Option<&str>, env: &[&str]) -> ServerForm {
        ServerForm {
            label: label.into(),
            command: vec!["npx".into(), "server".into()],
            cwd: cwd.map(PathBuf::from),
            env: env.iter().map(|e| (*e).to_owned()).collect(),
        }
    }

    #[test]
    fn a_form_becomes_a_checked_config() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().to_str().unwrap();
        let config = form(" time ", Some(cwd), &["A=1", "  ", "B=two"])
            .config()
            .unwrap();
        assert_eq!(config.label.as_str(), "time");
        assert_eq!(config.cwd, Some(std::fs::canonicalize(dir.path()).unwrap()));
        let names: Vec<&str> = config.env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["A", "B"]);
        assert_eq!(form("t", Some(""), &[]).config().unwrap().cwd, None);
    }

    #[test]
    fn a_bad_form_says_what_is_wrong() {
        let cases = [
            (
                form("t", Some("relative/dir"), &[]),
                "must be an absolute path",
            ),
            (
                form("t", Some("/no/such/dir/at/all"), &[]),
                "the working directory /no/such",
            ),
            (form("t", None, &["no-equals-sign"]), "no-equals-sign"),
            (form("postern", None, &[]), "postern"),
            (form("", None, &[]), ""),
        ];
        for (form, expected) in cases {
            let err = form.clone().config().expect_err(&format!("{form:?}"));
            assert!(matches!(err, ServerError::Invalid(_)), "{err:?}");
            assert!(err.to_string().contains(expected), "{form:?}: {err}");
        }
    }

    #[test]
    fn a_taken_label_is_refused_unless_replacing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let config = form("time", None, &[]).config().unwrap();
        assert_eq!(
            add(&store, &config, Existing::Refuse).unwrap(),
            AddOutcome::Added
        );
        let err = add(&store, &config, Existing::Refuse).unwrap_err();
        assert_eq!(err.to_string(), "a server 'time' is configured already");
        assert_eq!(
            add(&store, &config, Existing::Replace).unwrap(),
            AddOutcome::Replaced
        );
    }

    #[test]
    fn a_variable_a_bound_credential_sets_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let config = |env: &[&str]| form("inventory", None, env).config().unwrap();
        add(&store, &config(&[]), Existing::Refuse).unwrap();
        let label: ServerLabel = "inventory".parse().unwrap();
        let name = "inventory-api".parse().unwrap();
        let env = postern_domain::Injection::Env {
            var: "INVENTORY_TOKEN".into(),
        };
        store.add_credential(&name, &env, &[], false).unwrap();
        store.bind(&label, &name).unwrap();

        add(&store, &config(&["TZ=UTC"]), Existing::Replace).expect("another variable");
        let refused = add(&store, &config(&["INVENTORY_TOKEN=x1"]), Existing::Replace)
            .expect_err("the credential sets it");
        assert_eq!(
            refused.to_string(),
            "credential 'inventory-api' bound to 'inventory' sets INVENTORY_TOKEN at launch; --env INVENTORY_TOKEN=... would set it too, and one would silently win. Leave out --env INVENTORY_TOKEN, or unbind the credential first (postern server unbind inventory inventory-api)"
        );
        assert_eq!(
            store.server(&label).unwrap().unwrap().env.len(),
            1,
            "TZ stays"
        );
    }

    #[test]
    fn variable_names_compare_as_the_platform_does() {
        assert!(sets("TOKEN", "TOKEN"));
        assert!(!sets("TOKEN", "OTHER"));
        assert_eq!(sets("TOKEN", "token"), cfg!(windows));
    }
}
