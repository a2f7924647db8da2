//! The `servers` table: configured stdio MCP servers.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use postern_domain::{EnvVar, Narrowing, ServerConfig, ServerLabel};
use rusqlite::{OptionalExtension, params};

use crate::{Store, StoreError};

/// Whether `add_server` created a new server or replaced one with the same label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// No server had this label before.
    Added,
    /// A server with this label existed and was replaced.
    Replaced,
}

impl Store {
    /// Adds a server, replacing any existing one with the same label.
    pub fn add_server(&self, config: &ServerConfig) -> Result<AddOutcome, StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Immediate,
        )?;
        let existed = self.server(&config.label)?.is_some();
        let env: Vec<[&str; 2]> = config
            .env
            .iter()
            .map(|v| [v.name.as_str(), v.value.as_str()])
            .collect();
        self.conn.execute(
            "INSERT INTO servers (label, command, cwd, env, created_at, identity_paths, restart, self_reloading, pass_methods, confinement, writable)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT(label) DO UPDATE SET command = ?2, cwd = ?3, env = ?4, identity_paths = ?6,
                                               restart = ?7, self_reloading = ?8, pass_methods = ?9,
                                               confinement = ?10, writable = ?11",
            params![
                config.label.as_str(),
                serde_json::Value::from(config.command.clone()).to_string(),
                config.cwd.as_ref().map(|p| p.to_string_lossy().into_owned()),
                serde_json::to_string(&env).unwrap_or_default(),
                now_ms(),
                serde_json::to_string(&config.identity_paths).unwrap_or_default(),
                config.restart.to_string(),
                config.self_reloading,
                serde_json::to_string(&config.pass_methods).unwrap_or_default(),
                config.confinement.to_string(),
                serde_json::to_string(&config.writable).unwrap_or_default(),
            ],
        )?;
        let verb = if existed { "replaced" } else { "added" };
        let env_names: Vec<&str> = config.env.iter().map(|v| v.name.as_str()).collect();
        let what = format!(
            "{verb} server '{}': {:?}, restart {}, {}{}{}{}",
            config.label,
            config.command,
            config.restart,
            config.confinement,
            if config.self_reloading {
                ", self-reloading"
            } else {
                ""
            },
            if env_names.is_empty() {
                String::new()
            } else {
                format!(", env {}", env_names.join(" "))
            },
            if config.pass_methods.is_empty() {
                String::new()
            } else {
                format!(", passing {}", config.pass_methods.join(" "))
            },
        );
        self.note_config_change(&what, Some(&config.label))?;
        tx.commit()?;
        Ok(if existed {
            AddOutcome::Replaced
        } else {
            AddOutcome::Added
        })
    }

    /// Removes a server; `false` when no server had that label.
    pub fn remove_server(&self, label: &ServerLabel) -> Result<bool, StoreError> {
        self.write_repairing(|store| store.remove_server_now(label))
    }

    /// [`Store::remove_server`], in the caller's transaction.
    fn remove_server_now(&self, label: &ServerLabel) -> Result<bool, StoreError> {
        let removed = self
            .conn
            .execute("DELETE FROM servers WHERE label = ?1", [label.as_str()])?
            > 0;
        if removed {
            // Its bindings go with it: a later server of the same label is another program,
            // which must be bound again by a human.
            let unbound: Vec<String> = self
                .bindings(label)?
                .into_iter()
                .map(|c| c.name.to_string())
                .collect();
            self.conn.execute(
                "DELETE FROM server_credentials WHERE server = ?1",
                [label.as_str()],
            )?;
            let what = if unbound.is_empty() {
                format!("removed server '{label}'")
            } else {
                format!(
                    "removed server '{label}' and its credential bindings ({})",
                    unbound.join(", ")
                )
            };
            let narrowing = Narrowing::ServerRemoved {
                server: label.clone(),
            };
            self.note_narrowing(&what, Some(label), Some(&narrowing))?;
        }
        Ok(removed)
    }

    /// Configuration changes not yet recorded in the audit log, oldest first, removed from
    /// the queue as they are returned.
    pub fn take_config_changes(&self) -> Result<Vec<ConfigChange>, StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Immediate,
        )?;
        let changes = {
            let mut stmt = self.conn.prepare_cached(
                "SELECT at, what, server, narrowing FROM pending_config_changes ORDER BY id",
            )?;
            stmt.query_map([], |r| {
                let narrowing: Option<String> = r.get(3)?;
                Ok(ConfigChange {
                    at: r.get(0)?,
                    what: r.get(1)?,
                    server: r.get(2)?,
                    narrowing: narrowing.and_then(|json| serde_json::from_str(&json).ok()),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?
        };
        self.conn
            .execute("DELETE FROM pending_config_changes", [])?;
        tx.commit()?;
        Ok(changes)
    }

    /// What [`Store::take_config_changes`] takes, each as what it says.
    #[cfg(test)]
    pub(crate) fn taken_changes(&self) -> Vec<String> {
        let changes = self.take_config_changes().expect("changes");
        changes.into_iter().map(|c| c.what).collect()
    }

    /// Queues `what` for the engine to record in the audit log as a configuration change
    /// (at its next start, or now when it is told: `ControlCommand::ConfigChanged`).
    pub fn note_config_change(
        &self,
        what: &str,
        server: Option<&ServerLabel>,
    ) -> Result<(), StoreError> {
        self.note_narrowing(what, server, None)
    }

    /// [`Store::note_config_change`], for a change that narrowed authority as `narrowing`.
    pub(crate) fn note_narrowing(
        &self,
        what: &str,
        server: Option<&ServerLabel>,
        narrowing: Option<&Narrowing>,
    ) -> Result<(), StoreError> {
        let narrowing = narrowing
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Corrupt {
                what: "a narrowing".into(),
                why: e.to_string(),
            })?;
        self.conn.execute(
            "INSERT INTO pending_config_changes (at, what, server, narrowing)
             VALUES (?1, ?2, ?3, ?4)",
            params![now_ms(), what, server.map(ServerLabel::as_str), narrowing],
        )?;
        Ok(())
    }

    /// One server by label.
    pub fn server(&self, label: &ServerLabel) -> Result<Option<ServerConfig>, StoreError> {
        self.conn
            .query_row(
                "SELECT label, command, cwd, env, identity_paths, restart, self_reloading, pass_methods, confinement, writable FROM servers WHERE label = ?1",
                [label.as_str()],
                Row::read,
            )
            .optional()?
            .map(Row::into_config)
            .transpose()?
            .map(|config| self.with_credentials(config))
            .transpose()
    }

    /// Every configured server, ordered by label.
    pub fn servers(&self) -> Result<Vec<ServerConfig>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached("SELECT label, command, cwd, env, identity_paths, restart, self_reloading, pass_methods, confinement, writable FROM servers ORDER BY label")?;
        let rows = stmt
            .query_map([], Row::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|row| Row::into_config(row).and_then(|c| self.with_credentials(c)))
            .collect()
    }

    fn with_credentials(&self, mut config: ServerConfig) -> Result<ServerConfig, StoreError> {
        config.credentials = self.bindings(&config.label)?;
        Ok(config)
    }
}

struct Row {
    label: String,
    command: String,
    cwd: Option<String>,
    env: String,
    identity_paths: String,
    restart: String,
    self_reloading: bool,
    pass_methods: String,
    confinement: String,
    writable: String,
}

impl Row {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            label: row.get(0)?,
            command: row.get(1)?,
            cwd: row.get(2)?,
            env: row.get(3)?,
            identity_paths: row.get(4)?,
            restart: row.get(5)?,
            self_reloading: row.get(6)?,
            pass_methods: row.get(7)?,
            confinement: row.get(8)?,
            writable: row.get(9)?,
        })
    }

    fn into_config(self) -> Result<ServerConfig, StoreError> {
        let corrupt = |why: String| StoreError::Corrupt {
            what: format!("server {:?}", self.label),
            why,
        };
        let label: ServerLabel = self.label.parse().map_err(|e| corrupt(format!("{e}")))?;
        let command: Vec<String> =
            serde_json::from_str(&self.command).map_err(|e| corrupt(format!("command: {e}")))?;
        let env: Vec<(String, String)> =
            serde_json::from_str(&self.env).map_err(|e| corrupt(format!("env: {e}")))?;
        let env = env
            .into_iter()
            .map(|(name, value)| EnvVar { name, value })
            .collect();
        let mut config = ServerConfig::new(label, command, self.cwd.map(PathBuf::from), env)
            .map_err(|e| corrupt(format!("{e}")))?;
        config.identity_paths = serde_json::from_str(&self.identity_paths)
            .map_err(|e| corrupt(format!("identity paths: {e}")))?;
        config.restart = self.restart.parse().map_err(corrupt)?;
        config.self_reloading = self.self_reloading;
        config.pass_methods = serde_json::from_str(&self.pass_methods)
            .map_err(|e| corrupt(format!("pass methods: {e}")))?;
        config.confinement = self.confinement.parse().map_err(corrupt)?;
        config.writable = serde_json::from_str(&self.writable)
            .map_err(|e| corrupt(format!("writable paths: {e}")))?;
        Ok(config)
    }
}

/// A configuration change queued for the audit log ([`Store::take_config_changes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigChange {
    /// When it was made (unix ms).
    pub at: i64,
    /// What changed, without environment values.
    pub what: String,
    /// The server's label, when it is about one server.
    pub server: Option<String>,
    /// What it narrowed, when it narrowed authority.
    pub narrowing: Option<Narrowing>,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(label: &str, command: &[&str]) -> ServerConfig {
        let mut config = ServerConfig::new(
            label.parse().expect("label"),
            command.iter().map(|s| (*s).to_owned()).collect(),
            Some("/srv/work".into()),
            vec!["TZ=UTC".parse().expect("env")],
        )
        .expect("config");
        config.identity_paths = vec!["dist".into()];
        config.restart = postern_domain::RestartPolicy::OnChange;
        config.pass_methods = vec!["vendor/search".into()];
        config
    }

    /// A plain environment value taken out of a server's configuration (moved into the
    /// keychain) is gone from the database's files once the log is checkpointed: zeroed in
    /// the page (`secure_delete`), no older page left in the write-ahead log.
    #[test]
    fn a_value_taken_out_of_a_server_leaves_no_copy_in_the_database_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let plain = config("notes", &["node", "notes.js"]);
        let mut with = plain.clone();
        // A token as long as real ones (a JWT): what SQLite leaves of a rewritten row's old
        // cell in the page's free space holds the part of it that matters.
        let token = format!("plain-secret-value-7.{}", "x".repeat(140));
        with.env
            .insert(0, format!("NOTES_TOKEN={token}").parse().expect("env"));
        store.add_server(&with).expect("add");
        // In the database file itself, as after any checkpoint since the import.
        assert!(store.forget_deleted().expect("checkpoint"));
        let holds = |file: &str| {
            let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
            bytes
                .windows(b"plain-secret-value-7".len())
                .any(|w| w == b"plain-secret-value-7")
        };
        assert!(holds(crate::DB_FILE), "the value was written");

        store.add_server(&plain).expect("replace");
        assert!(store.forget_deleted().expect("checkpoint"));
        assert!(!holds(crate::DB_FILE), "postern.db still holds the value");
        assert!(!holds("postern.db-wal"), "the WAL still holds the value");
        assert_eq!(
            std::fs::metadata(dir.path().join("postern.db-wal"))
                .map(|m| m.len())
                .unwrap_or(0),
            0,
            "the WAL is truncated"
        );
    }

    #[test]
    fn servers_round_trip_and_survive_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let mut time = config(
            "time",
            &["uvx", "mcp-server-time", "--local-timezone", "UTC"],
        );
        time.confinement = postern_domain::Confinement::Unconfined;
        time.writable = vec!["/home/u/.cache/uv".into()];
        assert_eq!(store.add_server(&time).expect("add"), AddOutcome::Added);
        assert_eq!(
            store
                .add_server(&config("alpha", &["node", "a.js"]))
                .expect("add"),
            AddOutcome::Added
        );
        drop(store);

        let store = Store::open(dir.path()).expect("reopen");
        let all = store.servers().expect("list");
        assert_eq!(
            all.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(),
            ["alpha", "time"]
        );
        assert_eq!(all[1], time);
    }

    #[test]
    fn adding_an_existing_label_replaces_it_and_remove_reports_absence() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        store.add_server(&config("x", &["one"])).expect("add");
        assert_eq!(
            store.add_server(&config("x", &["two"])).expect("add"),
            AddOutcome::Replaced
        );
        let label: ServerLabel = "x".parse().expect("label");
        assert_eq!(
            store.server(&label).expect("get").expect("present").command,
            ["two"]
        );
        assert!(store.remove_server(&label).expect("remove"));
        assert!(!store.remove_server(&label).expect("remove again"));
        assert_eq!(store.server(&label).expect("get"), None);

        // Each change waits for the engine to record it; values of --env never appear.
        let changes = store.take_config_changes().expect("changes");
        let whats: Vec<&str> = changes.iter().map(|c| c.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "added server 'x': [\"one\"], restart on-change, confined, env TZ, passing vendor/search",
                "replaced server 'x': [\"two\"], restart on-change, confined, env TZ, passing vendor/search",
                "removed server 'x'",
            ]
        );
        assert!(changes.iter().all(|c| c.server.as_deref() == Some("x")));
        // Only the removal narrows (no seal put back may vouch for the server's rows again).
        let narrowings: Vec<_> = changes.iter().map(|c| c.narrowing.clone()).collect();
        assert_eq!(
            narrowings,
            [
                None,
                None,
                Some(Narrowing::ServerRemoved {
                    server: label.clone()
                })
            ]
        );
        assert!(store.take_config_changes().expect("drained").is_empty());
    }
}
