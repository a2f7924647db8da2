//! Execution epochs and the execution record captured at launch
//! (docs/refresh-contract.md §1, §2).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Digest, ServerLabel};

/// Which code can act now: one per launch of a server process, a ULID, created by the
/// supervisor, never by the server.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ExecutionEpoch(ulid::Ulid);

impl ExecutionEpoch {
    /// An epoch from a launch time (unix ms) and 80 random bits, both passed in so that
    /// the caller owns time and randomness.
    pub fn new(unix_ms: u64, random: u128) -> Self {
        Self(ulid::Ulid::from_parts(unix_ms, random))
    }

    /// The launch time the epoch was made at (unix ms).
    pub fn unix_ms(&self) -> u64 {
        self.0.timestamp_ms()
    }
}

impl fmt::Display for ExecutionEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for ExecutionEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch {}", self.0)
    }
}

impl FromStr for ExecutionEpoch {
    type Err = ulid::DecodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ulid::Ulid::from_string(s).map(Self)
    }
}

impl TryFrom<String> for ExecutionEpoch {
    type Error = ulid::DecodeError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ExecutionEpoch> for String {
    fn from(e: ExecutionEpoch) -> Self {
        e.to_string()
    }
}

/// A file (or a directory hashed as a tree) and its digest at launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// The absolute path.
    pub path: PathBuf,
    /// Its digest when the epoch began.
    pub digest: Digest,
}

/// Whether the record ties the running code to files the host hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Pinning {
    /// The code that runs is covered by the digests.
    Pinned,
    /// The server's own code (its entry file, its script) is hashed, but not everything it
    /// runs. Said as a note, not an alarm: what is covered and what is not.
    Partly {
        /// What the digests cover, in words: "the entry file server.js".
        covered: String,
        /// What they do not, and how to cover it: "the code it loads: there is no lockfile
        /// ...".
        uncovered: String,
    },
    /// The digests prove less than they seem; `reason` says why.
    Unpinned { reason: String },
}

/// The OS sandbox a launch runs in (issue 16): what it cannot see, where it may write, how it
/// reaches the network. The profile, not the tool's version: a changed profile is a new
/// identity, a bubblewrap upgrade is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sandbox {
    /// The mechanism: "bubblewrap" (Linux) or "sandbox-exec" (macOS).
    pub tool: String,
    /// Paths it cannot see (credential stores, the Postern home, the session bus's directory),
    /// as the policy names them: those that exist at launch are hidden.
    pub hidden: Vec<PathBuf>,
    /// Where it may write (its working directory, configured caches); besides these only a
    /// private temp directory, emptied with the launch.
    pub writable: Vec<PathBuf>,
    /// Its way to the network, in words: "only through the egress broker".
    pub network: String,
}

/// What the supervisor observed when it launched a server (refresh-contract §2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionRecord {
    /// The configured label.
    pub server_label: ServerLabel,
    /// This launch's epoch.
    pub epoch: ExecutionEpoch,
    /// The command, program resolved to an absolute path.
    pub launch_command: Vec<String>,
    /// The program that runs, after following symlinks.
    pub executable: Artifact,
    /// `#!` scripts on the way to the real interpreter, outermost first.
    pub wrappers: Vec<Artifact>,
    /// The entry file, when the program is an interpreter.
    pub entry: Option<Artifact>,
    /// Lockfiles found in the working directory.
    pub lockfiles: Vec<Artifact>,
    /// User-configured identity paths, then the interpreter's environment when it has one
    /// (a Python virtual environment).
    pub extra_paths: Vec<Artifact>,
    /// The interpreter's version line, when there is an interpreter.
    pub runtime: Option<String>,
    /// The resolved working directory.
    pub working_directory: PathBuf,
    /// The names (never the values) of the environment the process gets, sorted.
    pub env_names: Vec<String>,
    /// The values of the variables that change what code loads (`NODE_OPTIONS`, `PYTHONPATH`,
    /// `LD_PRELOAD`, ...; `NAME=value`, sorted): part of the identity. Records written before
    /// this field have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loader_env: Vec<String>,
    /// The OS sandbox it runs in (issue 16), part of the identity: a changed profile is a new
    /// identity. `None`: unconfined (and every record written before confinement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// Pinned or not, and why not.
    pub pinning: Pinning,
    /// The process id (for operators; pids are reused).
    pub pid: u32,
    /// Launch time, unix ms.
    pub started_at_ms: i64,
}

impl ExecutionRecord {
    /// Every hashed artifact, in a fixed order: executable, wrappers, entry, lockfiles,
    /// extra paths.
    pub fn artifacts(&self) -> impl Iterator<Item = &Artifact> {
        std::iter::once(&self.executable)
            .chain(&self.wrappers)
            .chain(&self.entry)
            .chain(&self.lockfiles)
            .chain(&self.extra_paths)
    }

    /// One digest over everything that makes up the identity (not the epoch, pid or
    /// time): two records with equal identity digests ran the same code as far as the
    /// host can tell.
    pub fn identity_digest(&self) -> Digest {
        let mut text = String::new();
        let mut line = |k: &str, v: &str| {
            text.push_str(k);
            text.push('\t');
            text.push_str(v);
            text.push('\n');
        };
        for word in &self.launch_command {
            line("argv", word);
        }
        for a in self.artifacts() {
            line(&a.path.to_string_lossy(), &a.digest.to_string());
        }
        line("runtime", self.runtime.as_deref().unwrap_or(""));
        line("cwd", &self.working_directory.to_string_lossy());
        for name in &self.env_names {
            line("env", name);
        }
        for value in &self.loader_env {
            line("loader", value);
        }
        // Absent for an unconfined launch, so records from before confinement keep their
        // identity.
        if let Some(sandbox) = &self.sandbox {
            line("sandbox", &sandbox.tool);
            for path in &sandbox.hidden {
                line("hidden", &path.to_string_lossy());
            }
            for path in &sandbox.writable {
                line("writable", &path.to_string_lossy());
            }
            line("network", &sandbox.network);
        }
        Digest::of(text.as_bytes())
    }

    /// The artifacts whose digest differs in `newer` (or that only one record has).
    pub fn changed_artifacts(&self, newer: &ExecutionRecord) -> Vec<PathBuf> {
        let old: std::collections::BTreeMap<_, _> =
            self.artifacts().map(|a| (&a.path, a.digest)).collect();
        let new: std::collections::BTreeMap<_, _> =
            newer.artifacts().map(|a| (&a.path, a.digest)).collect();
        let mut changed: Vec<PathBuf> = new
            .iter()
            .filter(|(path, digest)| old.get(*path) != Some(digest))
            .map(|(path, _)| (*path).clone())
            .collect();
        changed.extend(
            old.keys()
                .filter(|p| !new.contains_key(*p))
                .map(|p| (*p).clone()),
        );
        changed
    }
}

/// What the host does when a running server's identity artifacts change
/// (refresh-contract §6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Keep the running process; report that the artifacts are newer.
    #[default]
    Manual,
    /// Restart the server: the old epoch ends, a new one begins.
    OnChange,
}

impl FromStr for RestartPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "manual" => Ok(Self::Manual),
            "on-change" => Ok(Self::OnChange),
            other => Err(format!(
                "restart policy is `manual` or `on-change`, not {other:?}"
            )),
        }
    }
}

impl fmt::Display for RestartPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Manual => "manual",
            Self::OnChange => "on-change",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(entry_bytes: &[u8], epoch: u128) -> ExecutionRecord {
        let artifact = |p: &str, b: &[u8]| Artifact {
            path: p.into(),
            digest: Digest::of(b),
        };
        ExecutionRecord {
            server_label: "inventory".parse().expect("label"),
            epoch: ExecutionEpoch::new(1_700_000_000_000, epoch),
            launch_command: vec!["/usr/bin/node".into(), "dist/server.js".into()],
            executable: artifact("/usr/bin/node", b"node"),
            wrappers: vec![],
            entry: Some(artifact("/w/dist/server.js", entry_bytes)),
            lockfiles: vec![artifact("/w/package-lock.json", b"lock")],
            extra_paths: vec![],
            runtime: Some("v22.14.0".into()),
            working_directory: "/w".into(),
            env_names: vec!["PATH".into()],
            loader_env: vec![],
            sandbox: None,
            pinning: Pinning::Pinned,
            pid: 48192,
            started_at_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn identity_ignores_epoch_and_pid_but_not_code() {
        let a = record(b"v1", 1);
        let mut same_code = record(b"v1", 2);
        same_code.pid = 1;
        assert_ne!(a.epoch, same_code.epoch);
        assert_eq!(a.identity_digest(), same_code.identity_digest());
        let rebuilt = record(b"v2", 3);
        assert_ne!(a.identity_digest(), rebuilt.identity_digest());
        assert_eq!(
            a.changed_artifacts(&rebuilt),
            [PathBuf::from("/w/dist/server.js")]
        );
    }

    #[test]
    fn epochs_round_trip_as_ulid_text() {
        let e = ExecutionEpoch::new(1_700_000_000_000, 42);
        assert_eq!(e.to_string().len(), 26);
        assert_eq!(e.to_string().parse::<ExecutionEpoch>().expect("parse"), e);
        let json = serde_json::to_string(&e).expect("json");
        assert_eq!(
            serde_json::from_str::<ExecutionEpoch>(&json).expect("back"),
            e
        );
    }
}
