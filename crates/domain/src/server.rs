//! How a configured MCP server is launched.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{RestartPolicy, ServerLabel};

/// One configured stdio MCP server: what to run, where, with which extra environment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// The name agents use: `postern mcp <label>`.
    pub label: ServerLabel,
    /// The program and its arguments, never empty.
    pub command: Vec<String>,
    /// The working directory; the engine's own when absent.
    pub cwd: Option<PathBuf>,
    /// Extra environment variables, in the order given.
    pub env: Vec<EnvVar>,
    /// Extra paths that are part of the server's identity (files, or directories hashed
    /// as trees), relative to `cwd` unless absolute.
    #[serde(default)]
    pub identity_paths: Vec<PathBuf>,
    /// What happens when identity artifacts change under a running process.
    #[serde(default)]
    pub restart: RestartPolicy,
    /// The server reloads its own code when its files change (nodemon-style): a change
    /// to its artifacts ends the epoch at once.
    #[serde(default)]
    pub self_reloading: bool,
    /// The credentials bound to it (metadata only; values stay in the keychain). Their
    /// environment variable names are part of its identity whether or not a launch is given
    /// the values.
    #[serde(default)]
    pub credentials: Vec<crate::Credential>,
    /// Methods the gate does not know that agents may send this server all the same
    /// (`--pass-method vendor/search`): each is decided like any request other than a tool
    /// call (the vault, the caller, admission) and journaled. Others get -32601.
    #[serde(default)]
    pub pass_methods: Vec<String>,
    /// Whether its launches run in the OS sandbox (issue 16): confined unless a person opted
    /// this server out.
    #[serde(default)]
    pub confinement: Confinement,
    /// Where a confined launch may write besides its working directory and a private temp
    /// directory (its caches), relative to `cwd` unless absolute.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
}

/// Whether a server's launches are confined (issue 16).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confinement {
    /// In the OS sandbox: the system read-only, writes only to its directory, its caches and a
    /// private temp directory; credential paths, the Postern home and the session bus not
    /// visible; the network only through the egress broker.
    #[default]
    Confined,
    /// Opted out: it runs with everything the user has, and every surface says so.
    Unconfined,
}

impl fmt::Display for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Confined => "confined",
            Self::Unconfined => "unconfined",
        })
    }
}

impl FromStr for Confinement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "confined" => Ok(Self::Confined),
            "unconfined" => Ok(Self::Unconfined),
            other => Err(format!(
                "confinement is 'confined' or 'unconfined', not {other:?}"
            )),
        }
    }
}

/// Why a server configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No command was given after `--`.
    #[error("a server needs a command to run (after `--`)")]
    EmptyCommand,
    /// An `--env` entry is not `KEY=VALUE`.
    #[error("--env takes KEY=VALUE, got {0:?}")]
    BadEnv(String),
    /// An `--env` entry's name is not an environment variable name.
    #[error("--env {0}")]
    BadEnvName(EnvNameError),
    /// An `--env` entry's value holds a NUL byte (named by its variable, never shown).
    #[error("the value of --env {0} contains a NUL byte, which no environment can carry")]
    NulInEnvValue(String),
    /// A working directory that is not absolute.
    #[error("the working directory must be an absolute path, got {0:?}")]
    RelativeCwd(PathBuf),
}

impl ServerConfig {
    /// Builds a configuration, refusing an empty command or a relative working directory.
    pub fn new(
        label: ServerLabel,
        command: Vec<String>,
        cwd: Option<PathBuf>,
        env: Vec<EnvVar>,
    ) -> Result<Self, ConfigError> {
        if command.first().is_none_or(|program| program.is_empty()) {
            return Err(ConfigError::EmptyCommand);
        }
        if let Some(dir) = &cwd
            && !dir.is_absolute()
        {
            return Err(ConfigError::RelativeCwd(dir.clone()));
        }
        Ok(Self {
            label,
            command,
            cwd,
            env,
            identity_paths: Vec::new(),
            restart: RestartPolicy::Manual,
            self_reloading: false,
            credentials: Vec::new(),
            pass_methods: Vec::new(),
            confinement: Confinement::Confined,
            writable: Vec::new(),
        })
    }

    /// The program to run.
    pub fn program(&self) -> &str {
        &self.command[0]
    }

    /// The arguments after the program.
    pub fn args(&self) -> &[String] {
        &self.command[1..]
    }
}

/// One `KEY=VALUE` environment entry for a server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    /// The variable's name (an [`EnvName`] when given through [`EnvVar::from_str`]; stored
    /// configurations from before that rule load as they are).
    pub name: String,
    /// The variable's value (never logged: it may hold a token).
    pub value: String,
}

impl fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}=<redacted>", self.name)
    }
}

impl FromStr for EnvVar {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| ConfigError::BadEnv(s.to_owned()))?;
        let name: EnvName = name.parse().map_err(ConfigError::BadEnvName)?;
        if value.contains('\0') {
            return Err(ConfigError::NulInEnvValue(name.into()));
        }
        Ok(Self {
            name: name.into(),
            value: value.to_owned(),
        })
    }
}

/// An environment variable's name as Postern accepts one: ASCII letters, digits and `_`, not
/// starting with a digit (the portable POSIX names, which every shell can set and every
/// runtime read). The rule for a server's `--env KEY=VALUE` and an env credential's variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnvName(String);

/// Why a string is not an environment variable name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not an environment variable name: use letters, digits and '_', not starting with a digit (e.g. API_TOKEN)"
)]
pub struct EnvNameError(pub String);

impl EnvName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `other` names the same variable at launch: the same name, or on Windows, whose
    /// environment ignores case, the same name in another case.
    pub fn is(&self, other: &str) -> bool {
        if cfg!(windows) {
            self.0.eq_ignore_ascii_case(other)
        } else {
            self.0 == other
        }
    }
}

impl FromStr for EnvName {
    type Err = EnvNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(EnvNameError(s.to_owned()))
        }
    }
}

impl From<EnvName> for String {
    fn from(name: EnvName) -> Self {
        name.0
    }
}

impl fmt::Display for EnvName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label() -> ServerLabel {
        "time".parse().expect("valid label")
    }

    #[test]
    fn refuses_empty_command_and_relative_cwd() {
        assert_eq!(
            ServerConfig::new(label(), vec![], None, vec![]),
            Err(ConfigError::EmptyCommand)
        );
        assert_eq!(
            ServerConfig::new(label(), vec!["x".into()], Some("rel/dir".into()), vec![]),
            Err(ConfigError::RelativeCwd("rel/dir".into()))
        );
    }

    #[test]
    fn env_parses_key_value_and_keeps_later_equals_signs() {
        let v: EnvVar = "TOKEN=a=b".parse().expect("valid");
        assert_eq!((v.name.as_str(), v.value.as_str()), ("TOKEN", "a=b"));
        assert_eq!(
            "=x".parse::<EnvVar>(),
            Err(ConfigError::BadEnvName(EnvNameError(String::new())))
        );
        assert_eq!(
            "TOKEN=a\0b".parse::<EnvVar>(),
            Err(ConfigError::NulInEnvValue("TOKEN".into()))
        );
        assert_eq!(
            "NOEQUALS".parse::<EnvVar>(),
            Err(ConfigError::BadEnv("NOEQUALS".into()))
        );
    }

    #[test]
    fn env_names_are_portable_shell_names() {
        for good in ["TOKEN", "_x", "http_proxy", "A1_B2"] {
            assert_eq!(good.parse::<EnvName>().expect(good).as_str(), good);
        }
        for bad in ["", "BAD NAME", "1ST", "A-B", "A.B", "A=B", "ÄPFEL", "X\0"] {
            assert_eq!(
                bad.parse::<EnvName>(),
                Err(EnvNameError(bad.into())),
                "{bad}"
            );
        }
        let refused = "BAD NAME=hunter2".parse::<EnvVar>().expect_err("space");
        assert!(
            std::error::Error::source(&refused).is_none(),
            "said once, not again as a cause"
        );
        assert_eq!(
            refused.to_string(),
            "--env \"BAD NAME\" is not an environment variable name: use letters, digits and '_', not starting with a digit (e.g. API_TOKEN)"
        );
        assert!(!refused.to_string().contains("hunter2"));
    }

    #[test]
    fn env_debug_never_shows_the_value() {
        let v: EnvVar = "TOKEN=hunter2".parse().expect("valid");
        assert_eq!(format!("{v:?}"), "TOKEN=<redacted>");
    }
}
