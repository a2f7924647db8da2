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
    /// The variable's name: non-empty, no `=` and no NUL.
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
        match s.split_once('=') {
            Some((name, value)) if !name.is_empty() && !s.contains('\0') => Ok(Self {
                name: name.to_owned(),
                value: value.to_owned(),
            }),
            _ => Err(ConfigError::BadEnv(s.to_owned())),
        }
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
            Err(ConfigError::BadEnv("=x".into()))
        );
        assert_eq!(
            "NOEQUALS".parse::<EnvVar>(),
            Err(ConfigError::BadEnv("NOEQUALS".into()))
        );
    }

    #[test]
    fn env_debug_never_shows_the_value() {
        let v: EnvVar = "TOKEN=hunter2".parse().expect("valid");
        assert_eq!(format!("{v:?}"), "TOKEN=<redacted>");
    }
}
