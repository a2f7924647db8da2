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
    // 5: authorization. Engine settings, every-use (per-call approval) settings, and in the
    // journals: who admitted a session, which agent it was, the approvals it raised, and
    // the grants it was given.
    "CREATE TABLE settings (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL                -- JSON
    ) STRICT;
     CREATE TABLE every_use (
        target TEXT PRIMARY KEY NOT NULL,  -- JSON of a SettingTarget (serde_json::to_string)
        level  TEXT NOT NULL               -- confirm (off is no row)
    ) STRICT;
     ALTER TABLE journal_sessions ADD COLUMN approved TEXT;   -- NULL, human or observe
     ALTER TABLE journal_sessions ADD COLUMN agent TEXT;      -- chain text and pid, for display
     ALTER TABLE journal_sessions ADD COLUMN approvals INTEGER NOT NULL DEFAULT 0; -- requests raised
     CREATE TABLE journal_grants (
        grant       TEXT PRIMARY KEY NOT NULL, -- the grant id (a ULID)
        session     INTEGER NOT NULL,          -- journal_sessions.id
        server      TEXT NOT NULL,
        epoch       TEXT NOT NULL,
        tools       TEXT NOT NULL,             -- JSON of the ToolScope
        credentials TEXT NOT NULL,             -- JSON array of credential scope names
        end_kind    TEXT NOT NULL,             -- JSON of the GrantEnd
        issued      INTEGER NOT NULL,          -- unix ms
        ended       INTEGER,                   -- unix ms of the grant_ended record
        reason      TEXT,                      -- why it ended
        seq         INTEGER NOT NULL           -- seq of the approval_granted record
    ) STRICT;
     CREATE INDEX journal_grants_session ON journal_grants(session);",
    // 6: credentials, by name, without values (those live in the OS keychain), and which
    // servers they are bound to.
    "CREATE TABLE credentials (
        name       TEXT PRIMARY KEY NOT NULL,
        injection  TEXT NOT NULL,          -- JSON of postern_domain::Injection
        hosts      TEXT NOT NULL,          -- JSON array of host names
        every_use  INTEGER NOT NULL,
        version    INTEGER NOT NULL,
        created_at INTEGER NOT NULL,       -- unix milliseconds
        rotated_at INTEGER
    ) STRICT;
     CREATE TABLE server_credentials (
        server     TEXT NOT NULL,
        credential TEXT NOT NULL REFERENCES credentials(name) ON DELETE CASCADE,
        PRIMARY KEY (server, credential)
    ) STRICT, WITHOUT ROWID;",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_from_the_previous_version_keeps_its_journal_rows() {
        let mut conn = Connection::open_in_memory().expect("open");
        for sql in &MIGRATIONS[..4] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 4)
            .expect("version");
        conn.execute(
            "INSERT INTO journal_sessions (id, run, session, server, started, status, calls)
             VALUES (2, 1, 1, 'time', 2000, 'ended', 3)",
            [],
        )
        .expect("old row");

        apply(&mut conn).expect("migrate");
        let row: (i64, Option<String>, Option<String>, i64) = conn
            .query_row(
                "SELECT calls, approved, agent, approvals FROM journal_sessions WHERE id = 2",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .expect("row");
        assert_eq!(row, (3, None, None, 0));
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, LATEST);
    }
}
