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
    // 3: the audit log (the truth), small key/value metadata, and the journals projected
    // from the log (rebuildable from it with the opening key; see journal.rs).
    "CREATE TABLE meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    ) STRICT;
     CREATE TABLE audit_log (
        seq    INTEGER PRIMARY KEY NOT NULL,   -- the header's sequence number
        time   INTEGER NOT NULL,               -- copied from the header: unix ms
        kind   TEXT NOT NULL,                  -- copied from the header: event kind
        header BLOB NOT NULL,                  -- frozen header bytes (postern-audit)
        sealed BLOB NOT NULL,                  -- body sealed to the log's public key
        hash   BLOB NOT NULL                   -- chain hash, 32 bytes
    ) STRICT;
     CREATE INDEX audit_log_time ON audit_log(time);
     CREATE INDEX audit_log_kind ON audit_log(kind);
     CREATE TABLE journal_sessions (
        id       INTEGER PRIMARY KEY NOT NULL, -- seq of the record that opened it
        run      INTEGER NOT NULL,             -- seq of its engine run's engine_started record
        session  INTEGER NOT NULL,             -- the engine's session number within the run
        server   TEXT NOT NULL,
        client   TEXT,
        started  INTEGER NOT NULL,             -- unix ms
        ended    INTEGER,                      -- unix ms; NULL while running or interrupted
        status   TEXT NOT NULL,                -- running | ended | interrupted
        reason   TEXT,
        calls    INTEGER NOT NULL DEFAULT 0,   -- intents (forwarded calls)
        denied   INTEGER NOT NULL DEFAULT 0,   -- calls refused before forwarding
        failed   INTEGER NOT NULL DEFAULT 0,   -- results other than ok
        UNIQUE (run, session)
    ) STRICT;
     CREATE INDEX journal_sessions_server ON journal_sessions(server);
     CREATE INDEX journal_sessions_status ON journal_sessions(status);
     CREATE TABLE journal_session_epochs (
        session INTEGER NOT NULL,              -- journal_sessions.id
        epoch   TEXT NOT NULL,
        seq     INTEGER NOT NULL,              -- first record naming it
        PRIMARY KEY (session, epoch)
    ) STRICT, WITHOUT ROWID;
     CREATE TABLE journal_activity (
        seq         INTEGER PRIMARY KEY NOT NULL, -- seq of the intent or refusal record
        time        INTEGER NOT NULL,
        session     INTEGER NOT NULL,             -- journal_sessions.id
        server      TEXT NOT NULL,
        epoch       TEXT,
        tool        TEXT NOT NULL,
        call        TEXT NOT NULL,                -- the JSON-RPC id, as JSON
        decision    TEXT NOT NULL,                -- allowed, or the refusal code
        outcome     TEXT,                         -- NULL until the result is recorded
        duration_ms INTEGER,
        result_seq  INTEGER
    ) STRICT;
     CREATE INDEX journal_activity_session ON journal_activity(session);
     CREATE INDEX journal_activity_server ON journal_activity(server);
     CREATE INDEX journal_activity_epoch ON journal_activity(epoch);
     CREATE INDEX journal_activity_tool ON journal_activity(tool);
     CREATE INDEX journal_activity_decision ON journal_activity(decision);
     CREATE INDEX journal_activity_time ON journal_activity(time);
     CREATE INDEX journal_activity_pending ON journal_activity(session, call)
        WHERE result_seq IS NULL;",
    // 4: configuration changes waiting for the engine to record them in the audit log (the
    // CLI edits configuration whether or not an engine runs; the engine is the log's only
    // writer, so it drains this table at start and when the CLI pokes it).
    "CREATE TABLE pending_config_changes (
        id     INTEGER PRIMARY KEY,
        at     INTEGER NOT NULL,           -- unix milliseconds
        what   TEXT NOT NULL,              -- a description without environment values
        server TEXT                        -- the label, when the change is about one server
    ) STRICT;",
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
