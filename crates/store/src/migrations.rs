//! Versioned schema migrations, tracked in SQLite's `user_version`.
//!
//! Migrations are append-only: never edit one that has shipped, add the next.

use rusqlite::Connection;

use crate::StoreError;

/// Each entry moves the schema from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: configured servers.
    "CREATE TABLE servers (
        label      TEXT PRIMARY KEY NOT NULL,
        command    TEXT NOT NULL,          -- JSON array of strings
        cwd        TEXT,                   -- absolute path or NULL
        env        TEXT NOT NULL,          -- JSON array of [name, value]
        created_at INTEGER NOT NULL        -- unix milliseconds
    ) STRICT;",
    // 2: identity paths, restart policy, self-reloading servers (refresh contract).
    "ALTER TABLE servers ADD COLUMN identity_paths TEXT NOT NULL DEFAULT '[]';  -- JSON array of paths
     ALTER TABLE servers ADD COLUMN restart TEXT NOT NULL DEFAULT 'manual';      -- manual | on-change
     ALTER TABLE servers ADD COLUMN self_reloading INTEGER NOT NULL DEFAULT 0;",
];

/// The schema version this build writes.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

pub(crate) fn apply(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > LATEST {
        return Err(StoreError::TooNew {
            found,
            known: LATEST,
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}
