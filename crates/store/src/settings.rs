//! The `settings` and `every_use` tables: how the engine is set up to decide.
//!
//! - `settings`: engine settings by key, each value stored as JSON (the session approval
//!   mode, and whatever the engine adds later). The store does not know the keys; the
//!   engine owns their meaning and types.
//! - `every_use`: per-call approval settings, one row per target that is not
//!   [`EveryUse::Off`]. The target is the canonical JSON of its [`SettingTarget`]
//!   (`serde_json::to_string`), so the same target is always the same key.

use postern_domain::decision::{EveryUse, EveryUseSetting, SettingTarget};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Store, StoreError};

impl Store {
    /// The setting stored under `key`, if any. A stored value that does not parse as a `T`
    /// is [`StoreError::Corrupt`].
    pub fn setting<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        let value: Option<String> = self
            .conn
            .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
            .query_row([key], |r| r.get(0))
            .optional()?;
        value
            .map(|text| {
                serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                    what: format!("setting {key:?}"),
                    why: e.to_string(),
                })
            })
            .transpose()
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn set_setting<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        let text = serde_json::to_string(value).map_err(|e| StoreError::Unencodable {
            what: format!("setting {key:?}"),
            why: e.to_string(),
        })?;
        self.conn
            .prepare_cached(
                "INSERT INTO settings (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![key, text])?;
        Ok(())
    }

    /// Every every-use setting that is not off, ordered by target (tools, then servers,
    /// then credentials; by name within each).
    pub fn every_use(&self) -> Result<Vec<EveryUseSetting>, StoreError> {
        let rows = self
            .conn
            .prepare_cached("SELECT target, level FROM every_use")?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        // An `off` row is never written (off removes the row): one found was written behind
        // Postern's back, and counts as no setting (the seal's check then puts a sealed one
        // back).
        let mut settings = rows
            .into_iter()
            .map(|(target, level)| parse_every_use(&target, level))
            .filter(|s| !matches!(s, Ok(s) if s.level == EveryUse::Off))
            .collect::<Result<Vec<_>, _>>()?;
        settings.sort_by(|a, b| a.target.cmp(&b.target));
        Ok(settings)
    }

    /// Sets the every-use level of a target; [`EveryUse::Off`] removes the setting.
    pub fn set_every_use(&self, setting: &EveryUseSetting) -> Result<(), StoreError> {
        let target = target_key(&setting.target)?;
        match setting.level {
            EveryUse::Off => {
                self.conn
                    .prepare_cached("DELETE FROM every_use WHERE target = ?1")?
                    .execute([target])?;
            }
            level @ EveryUse::Confirm => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO every_use (target, level) VALUES (?1, ?2)
                         ON CONFLICT (target) DO UPDATE SET level = excluded.level",
                    )?
                    .execute(params![target, level_text(level)?])?;
            }
        }
        Ok(())
    }
}

/// The canonical key of a target: its JSON, fields in declaration order.
fn target_key(target: &SettingTarget) -> Result<String, StoreError> {
    serde_json::to_string(target).map_err(|e| StoreError::Unencodable {
        what: format!("every-use target {target:?}"),
        why: e.to_string(),
    })
}

/// A level as serde spells it (`off`, `confirm`).
fn level_text(level: EveryUse) -> Result<String, StoreError> {
    match serde_json::to_value(level) {
        Ok(serde_json::Value::String(text)) => Ok(text),
        other => Err(StoreError::Unencodable {
            what: format!("every-use level {level:?}"),
            why: format!("serializes as {other:?}, not a string"),
        }),
    }
}

fn parse_every_use(target: &str, level: String) -> Result<EveryUseSetting, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt {
        what: format!("every-use setting {target}"),
        why,
    };
    Ok(EveryUseSetting {
        target: serde_json::from_str(target).map_err(|e| corrupt(format!("target: {e}")))?,
        level: serde_json::from_value(serde_json::Value::String(level))
            .map_err(|e| corrupt(format!("level: {e}")))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use postern_domain::decision::SessionMode;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        (dir, store)
    }

    fn tool(server: &str, tool: &str) -> SettingTarget {
        SettingTarget::Tool {
            server: server.parse().expect("label"),
            tool: tool.into(),
        }
    }

    fn confirm(target: SettingTarget) -> EveryUseSetting {
        EveryUseSetting {
            target,
            level: EveryUse::Confirm,
        }
    }

    #[test]
    fn settings_round_trip_replace_and_survive_reopening() {
        let (dir, store) = store();
        assert_eq!(
            store.setting::<SessionMode>("session_mode").expect("get"),
            None
        );
        store
            .set_setting("session_mode", &SessionMode::Observe)
            .expect("set");
        store
            .set_setting("approval_timeout_ms", &90_000u64)
            .expect("set");
        store
            .set_setting("session_mode", &SessionMode::Prompt)
            .expect("replace");
        drop(store);

        let store = Store::open(dir.path()).expect("reopen");
        assert_eq!(
            store.setting("session_mode").expect("get"),
            Some(SessionMode::Prompt)
        );
        assert_eq!(
            store.setting::<u64>("approval_timeout_ms").expect("get"),
            Some(90_000)
        );
        let stored: String = store
            .conn
            .query_row(
                "SELECT value FROM settings WHERE key = 'session_mode'",
                [],
                |r| r.get(0),
            )
            .expect("raw");
        assert_eq!(stored, "\"prompt\"");
    }

    #[test]
    fn a_setting_that_no_longer_parses_is_corrupt() {
        let (_dir, store) = store();
        store
            .conn
            .execute(
                "INSERT INTO settings (key, value) VALUES ('session_mode', '\"sometimes\"'), ('t', '{')",
                [],
            )
            .expect("raw insert");
        for key in ["session_mode", "t"] {
            let err = store
                .setting::<SessionMode>(key)
                .expect_err("must not parse");
            assert!(
                matches!(&err, StoreError::Corrupt { what, .. } if what.contains(key)),
                "{err}"
            );
        }
    }

    #[test]
    fn every_use_settings_round_trip_sorted_and_off_deletes() {
        let (_dir, store) = store();
        assert!(store.every_use().expect("list").is_empty());
        let credential = SettingTarget::Credential {
            name: "github".into(),
        };
        let server = SettingTarget::Server {
            server: "deploy".parse().expect("label"),
        };
        for target in [
            credential.clone(),
            tool("time", "get_time"),
            server.clone(),
            tool("deploy", "ship"),
        ] {
            store.set_every_use(&confirm(target)).expect("set");
        }
        // Setting the same target again replaces it rather than adding a row.
        store
            .set_every_use(&confirm(server.clone()))
            .expect("again");
        assert_eq!(
            store.every_use().expect("list"),
            vec![
                confirm(tool("deploy", "ship")),
                confirm(tool("time", "get_time")),
                confirm(server.clone()),
                confirm(credential.clone()),
            ]
        );
        let key: String = store
            .conn
            .query_row(
                "SELECT target FROM every_use WHERE level = 'confirm' AND target LIKE '%github%'",
                [],
                |r| r.get(0),
            )
            .expect("raw");
        assert_eq!(key, r#"{"on":"credential","name":"github"}"#);

        for target in [server, tool("time", "get_time"), tool("never", "set")] {
            store
                .set_every_use(&EveryUseSetting {
                    target,
                    level: EveryUse::Off,
                })
                .expect("off");
        }
        assert_eq!(
            store.every_use().expect("list"),
            vec![confirm(tool("deploy", "ship")), confirm(credential)]
        );
        let rows: i64 = store
            .conn
            .query_row("SELECT count(*) FROM every_use", [], |r| r.get(0))
            .expect("count");
        assert_eq!(rows, 2);
    }

    #[test]
    fn an_every_use_row_that_no_longer_parses_is_corrupt() {
        let (_dir, store) = store();
        store
            .set_every_use(&confirm(tool("time", "get_time")))
            .expect("set");
        store
            .conn
            .execute("UPDATE every_use SET level = 'always'", [])
            .expect("raw update");
        let err = store.every_use().expect_err("bad level");
        assert!(
            matches!(&err, StoreError::Corrupt { why, .. } if why.starts_with("level")),
            "{err}"
        );
        store
            .conn
            .execute(
                "UPDATE every_use SET level = 'confirm', target = '{\"on\":\"moon\"}'",
                [],
            )
            .expect("raw update");
        let err = store.every_use().expect_err("bad target");
        assert!(
            matches!(&err, StoreError::Corrupt { why, .. } if why.starts_with("target")),
            "{err}"
        );
    }
}
