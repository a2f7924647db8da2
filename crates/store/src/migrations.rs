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
    // 7: the timeline (journal/timeline.rs). When each session and each of its epochs was
    // last seen, per-session call counts rolled up by fixed time spans (so a wide window is
    // drawn from a few rows, not a million), the grant_ended record of each grant, and
    // Activity indexes that serve a filter, a time range and the newest-first order at once
    // (each index ends in the rowid, so `(column, time)` is `(column, time, seq)`).
    //
    // Rows written before this version get their times from the log's clear `time` column
    // and from the Activity rows; the exact values (an epoch is also seen in records that are
    // only in the sealed log, such as the server_replaced that ended it) come back when the
    // journals are rebuilt from the log (`postern audit rebuild-journals`).
    "ALTER TABLE journal_sessions ADD COLUMN last_time INTEGER;      -- unix ms, last record of it
     ALTER TABLE journal_session_epochs ADD COLUMN first_time INTEGER; -- unix ms, first record naming it
     ALTER TABLE journal_session_epochs ADD COLUMN last_time INTEGER;  -- unix ms, last record naming it
     ALTER TABLE journal_grants ADD COLUMN ended_seq INTEGER;         -- seq of the grant_ended record
     CREATE TABLE journal_activity_buckets (
        session INTEGER NOT NULL,              -- journal_sessions.id
        span    INTEGER NOT NULL,              -- bucket width, ms (one of a fixed set)
        start   INTEGER NOT NULL,              -- unix ms, a multiple of span
        calls   INTEGER NOT NULL,              -- Activity rows (refusals included)
        refused INTEGER NOT NULL,              -- of which refused before forwarding
        grants  INTEGER NOT NULL,              -- grants issued
        PRIMARY KEY (session, span, start)
     ) STRICT, WITHOUT ROWID;

     DROP INDEX journal_activity_session;
     DROP INDEX journal_activity_server;
     DROP INDEX journal_activity_epoch;
     DROP INDEX journal_activity_tool;
     DROP INDEX journal_activity_decision;
     CREATE INDEX journal_activity_session_time ON journal_activity(session, time);
     CREATE INDEX journal_activity_server_time ON journal_activity(server, time);
     CREATE INDEX journal_activity_epoch_time ON journal_activity(epoch, time);
     CREATE INDEX journal_activity_tool_time ON journal_activity(tool, time);
     CREATE INDEX journal_activity_decision_time ON journal_activity(decision, time);
     CREATE INDEX journal_activity_refused ON journal_activity(time)
        WHERE outcome = 'refused';
     CREATE INDEX journal_activity_refused_session ON journal_activity(session, time)
        WHERE outcome = 'refused';
     CREATE INDEX journal_grants_session_issued ON journal_grants(session, issued);
     CREATE INDEX journal_grants_session_ended ON journal_grants(session, ended);
     DROP INDEX journal_grants_session;

     UPDATE journal_session_epochs SET first_time = coalesce(
        (SELECT time FROM audit_log WHERE audit_log.seq = journal_session_epochs.seq),
        (SELECT min(time) FROM journal_activity a
          WHERE a.session = journal_session_epochs.session
            AND a.epoch = journal_session_epochs.epoch),
        (SELECT started FROM journal_sessions s WHERE s.id = journal_session_epochs.session),
        0);
     UPDATE journal_session_epochs SET last_time = max(first_time,
        coalesce((SELECT max(time) FROM journal_activity a
                   WHERE a.session = journal_session_epochs.session
                     AND a.epoch = journal_session_epochs.epoch), first_time),
        coalesce((SELECT max(l.time) FROM journal_activity a
                   JOIN audit_log l ON l.seq = a.result_seq
                   WHERE a.session = journal_session_epochs.session
                     AND a.epoch = journal_session_epochs.epoch), first_time));
     UPDATE journal_sessions SET last_time = max(started, coalesce(ended, started),
        coalesce((SELECT max(last_time) FROM journal_session_epochs e
                   WHERE e.session = journal_sessions.id), started),
        coalesce((SELECT max(time) FROM journal_activity a
                   WHERE a.session = journal_sessions.id), started));
     INSERT INTO journal_activity_buckets (session, span, start, calls, refused, grants)
        SELECT session, span, start, sum(calls), sum(refused), sum(grants) FROM (
            SELECT a.session, spans.span, a.time - a.time % spans.span AS start,
                   1 AS calls, a.outcome IS 'refused' AS refused, 0 AS grants
            FROM journal_activity a, (SELECT 60000 AS span UNION ALL SELECT 600000
                UNION ALL SELECT 3600000 UNION ALL SELECT 21600000
                UNION ALL SELECT 86400000) spans
            UNION ALL
            SELECT g.session, spans.span, g.issued - g.issued % spans.span, 0, 0, 1
            FROM journal_grants g, (SELECT 60000 AS span UNION ALL SELECT 600000
                UNION ALL SELECT 3600000 UNION ALL SELECT 21600000
                UNION ALL SELECT 86400000) spans)
        GROUP BY session, span, start;",
    // 8: per server, the launch and catalog a human last approved a call under (baselines.rs):
    // what the next approval card is compared with, kept across engine restarts.
    "CREATE TABLE approved_baselines (
        server      TEXT PRIMARY KEY NOT NULL,
        record      TEXT NOT NULL,          -- JSON ExecutionRecord
        catalog     TEXT NOT NULL,          -- JSON Catalog
        approved_at INTEGER NOT NULL        -- unix milliseconds
    ) STRICT;",
    // 9: methods the gate does not know that a server's agents may send it all the same
    // (gateway method.rs; each is still decided and journaled).
    "ALTER TABLE servers ADD COLUMN pass_methods TEXT NOT NULL DEFAULT '[]';  -- JSON array of method names",
    // 10: who, under what and by whom, in the journals (issue 18 item 8): the agent's working
    // directory on its session; on each allowed call its authority (a grant, observe mode, an
    // admitted run) and grant, and the approval request it raised; and every approval request
    // with its answer, which the timeline draws as the time the agent waited for a person.
    //
    // Rows written before this version have none of these (NULL, no approvals): they come
    // back when the journals are rebuilt from the log (`postern audit rebuild-journals`).
    "ALTER TABLE journal_sessions ADD COLUMN cwd TEXT;        -- the agent's working directory, for display
     ALTER TABLE journal_activity ADD COLUMN authority TEXT;  -- grant | observed | admitted; NULL when refused
     ALTER TABLE journal_activity ADD COLUMN grant TEXT;      -- the grant it went under
     ALTER TABLE journal_activity ADD COLUMN approval TEXT;   -- the approval request it raised
     CREATE INDEX journal_activity_asked ON journal_activity(time)
        WHERE approval IS NOT NULL;
     CREATE INDEX journal_activity_result ON journal_activity(result_seq);  -- a result's call
     CREATE TABLE journal_approvals (
        approval  TEXT PRIMARY KEY NOT NULL,  -- the approval id (a ULID)
        session   INTEGER NOT NULL,           -- journal_sessions.id
        tool      TEXT NOT NULL,
        requested INTEGER NOT NULL,           -- unix ms of the approval_requested record
        seq       INTEGER NOT NULL,           -- its seq
        answered  INTEGER,                    -- unix ms of the answer; NULL while open
        answer    TEXT,                       -- granted | denied | expired
        code      TEXT,                       -- what the call got when not granted
        grant     TEXT,                       -- the grant it gave, if any
        answer_seq INTEGER,                   -- seq of the answer's record
        activity  INTEGER                     -- journal_activity.seq of the call that raised it
     ) STRICT;
     CREATE INDEX journal_approvals_session_requested ON journal_approvals(session, requested);
     CREATE INDEX journal_approvals_open ON journal_approvals(session, tool)
        WHERE activity IS NULL;",
    // 11: where a person answered each approval request (the approval window, the tray, a
    // terminal), from the answer's audit record. Rows written before this version, and
    // answers whose records predate the field, have none (NULL: "you", not where).
    "ALTER TABLE journal_approvals ADD COLUMN channel TEXT;  -- window | tray | terminal",
    // 12: where each credential went through the egress broker (issue 15): per credential,
    // server and host, the requests it put the value in and the requests refused because the
    // placeholder was headed there, with the first and last time. A projection of the
    // `credential_substituted` and `credential_leak_attempt` records; older records come in
    // when the journals are rebuilt from the log.
    "CREATE TABLE journal_credential_uses (
        credential TEXT NOT NULL,
        server     TEXT NOT NULL,
        host       TEXT NOT NULL,
        uses       INTEGER NOT NULL DEFAULT 0,  -- requests the broker put the value in
        leaks      INTEGER NOT NULL DEFAULT 0,  -- requests refused: not a host of the credential
        first      INTEGER NOT NULL,            -- unix ms of the first record
        last       INTEGER NOT NULL,            -- unix ms of the last record
        last_epoch TEXT,                        -- the execution epoch of the last record
        PRIMARY KEY (credential, server, host)
     ) STRICT;",
    // 13: confinement (issue 16): whether a server's launches run in the OS sandbox, and where
    // a confined launch may write besides its directory. Servers configured before are
    // confined from now on.
    "ALTER TABLE servers ADD COLUMN confinement TEXT NOT NULL DEFAULT 'confined';  -- confined | unconfined
     ALTER TABLE servers ADD COLUMN writable TEXT NOT NULL DEFAULT '[]';           -- JSON array of paths",
    // 14: the log's own indexes (issue 17): each group commit wrote a page of each to the WAL
    // before its calls could go. Nothing reads the log by time, and by kind only to find
    // `engine_started` records (the engine run a session belongs to): a partial index holds
    // those alone, and a call's records never touch it.
    "DROP INDEX audit_log_time;
     DROP INDEX audit_log_kind;
     CREATE INDEX audit_log_engine_started ON audit_log(seq) WHERE kind = 'engine_started';",
    // 15: the journals move to a file of their own (issue 17; `JOURNAL_MIGRATIONS`): their
    // pages no longer ride an audit commit's fsync, and they are written beside the appends.
    // They are rebuilt there from the log (with the opening key: at start, or at the next
    // unlock), as any journals found behind it are.
    "DROP TABLE journal_activity;
     DROP TABLE journal_activity_buckets;
     DROP TABLE journal_session_epochs;
     DROP TABLE journal_grants;
     DROP TABLE journal_approvals;
     DROP TABLE journal_credential_uses;
     DROP TABLE journal_sessions;
     DELETE FROM meta WHERE key LIKE 'journal.%';",
    // 16: what a queued change narrowed (an unbind), as JSON (`postern_domain::Narrowing`):
    // the log's record of it carries it, and the engine takes it again at the next unlock.
    "ALTER TABLE pending_config_changes ADD COLUMN narrowing TEXT;",
];

/// The schema version this build writes.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// The journals' file (attached as `journal`), versioned in its own `user_version`. Its
/// first version is where migrations 3 to 14 had brought the journal tables in
/// `postern.db`, and `journal_meta` holds how far they go (`seq`) and the current engine
/// run (`run`).
const JOURNAL_MIGRATIONS: &[&str] = &[
    // 1
    "CREATE TABLE journal.journal_meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value INTEGER NOT NULL
     ) STRICT;
     CREATE TABLE journal.journal_sessions (
        id        INTEGER PRIMARY KEY NOT NULL, -- seq of the record that opened it
        run       INTEGER NOT NULL,             -- seq of its engine run's engine_started record
        session   INTEGER NOT NULL,             -- the engine's session number within the run
        server    TEXT NOT NULL,
        client    TEXT,
        started   INTEGER NOT NULL,             -- unix ms
        ended     INTEGER,                      -- unix ms; NULL while running or interrupted
        status    TEXT NOT NULL,                -- running | ended | interrupted
        reason    TEXT,
        calls     INTEGER NOT NULL DEFAULT 0,   -- intents (forwarded calls)
        denied    INTEGER NOT NULL DEFAULT 0,   -- calls refused before forwarding
        failed    INTEGER NOT NULL DEFAULT 0,   -- results other than ok
        approved  TEXT,                         -- who admitted the session
        agent     TEXT,                         -- the agent process behind it
        approvals INTEGER NOT NULL DEFAULT 0,   -- approval requests it raised
        last_time INTEGER,                      -- unix ms of the last record naming it
        cwd       TEXT,
        UNIQUE (run, session)
     ) STRICT;
     CREATE INDEX journal.journal_sessions_server ON journal_sessions(server);
     CREATE INDEX journal.journal_sessions_status ON journal_sessions(status);
     CREATE TABLE journal.journal_session_epochs (
        session    INTEGER NOT NULL,            -- journal_sessions.id
        epoch      TEXT NOT NULL,
        seq        INTEGER NOT NULL,            -- first record naming it
        first_time INTEGER,
        last_time  INTEGER,
        PRIMARY KEY (session, epoch)
     ) STRICT, WITHOUT ROWID;
     CREATE TABLE journal.journal_activity (
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
        result_seq  INTEGER,
        authority   TEXT,
        grant       TEXT,
        approval    TEXT
     ) STRICT;
     CREATE INDEX journal.journal_activity_time ON journal_activity(time);
     CREATE INDEX journal.journal_activity_pending ON journal_activity(session, call)
        WHERE result_seq IS NULL;
     CREATE INDEX journal.journal_activity_session_time ON journal_activity(session, time);
     CREATE INDEX journal.journal_activity_server_time ON journal_activity(server, time);
     CREATE INDEX journal.journal_activity_epoch_time ON journal_activity(epoch, time);
     CREATE INDEX journal.journal_activity_tool_time ON journal_activity(tool, time);
     CREATE INDEX journal.journal_activity_decision_time ON journal_activity(decision, time);
     CREATE INDEX journal.journal_activity_refused ON journal_activity(time)
        WHERE outcome = 'refused';
     CREATE INDEX journal.journal_activity_refused_session ON journal_activity(session, time)
        WHERE outcome = 'refused';
     CREATE INDEX journal.journal_activity_asked ON journal_activity(time)
        WHERE approval IS NOT NULL;
     CREATE INDEX journal.journal_activity_result ON journal_activity(result_seq);
     CREATE TABLE journal.journal_activity_buckets (
        session INTEGER NOT NULL,              -- journal_sessions.id
        span    INTEGER NOT NULL,              -- bucket width, ms (one of a fixed set)
        start   INTEGER NOT NULL,              -- unix ms, a multiple of span
        calls   INTEGER NOT NULL,              -- Activity rows (refusals included)
        refused INTEGER NOT NULL,              -- of which refused before forwarding
        grants  INTEGER NOT NULL,              -- grants issued
        PRIMARY KEY (session, span, start)
     ) STRICT, WITHOUT ROWID;
     CREATE TABLE journal.journal_grants (
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
        seq         INTEGER NOT NULL,          -- seq of the approval_granted record
        ended_seq   INTEGER
     ) STRICT;
     CREATE INDEX journal.journal_grants_session_issued ON journal_grants(session, issued);
     CREATE INDEX journal.journal_grants_session_ended ON journal_grants(session, ended);
     CREATE TABLE journal.journal_approvals (
        approval   TEXT PRIMARY KEY NOT NULL,  -- the approval id (a ULID)
        session    INTEGER NOT NULL,           -- journal_sessions.id
        tool       TEXT NOT NULL,
        requested  INTEGER NOT NULL,           -- unix ms of the approval_requested record
        seq        INTEGER NOT NULL,           -- its seq
        answered   INTEGER,                    -- unix ms of the answer; NULL while open
        answer     TEXT,                       -- granted | denied | expired
        code       TEXT,                       -- what the call got when not granted
        grant      TEXT,                       -- the grant it gave, if any
        answer_seq INTEGER,                    -- seq of the answer's record
        activity   INTEGER,                    -- journal_activity.seq of the call that raised it
        channel    TEXT                        -- where the person answered
     ) STRICT;
     CREATE INDEX journal.journal_approvals_session_requested
        ON journal_approvals(session, requested);
     CREATE INDEX journal.journal_approvals_open ON journal_approvals(session, tool)
        WHERE activity IS NULL;
     CREATE TABLE journal.journal_credential_uses (
        credential TEXT NOT NULL,
        server     TEXT NOT NULL,
        host       TEXT NOT NULL,
        uses       INTEGER NOT NULL DEFAULT 0,  -- requests the broker put the value in
        leaks      INTEGER NOT NULL DEFAULT 0,  -- requests refused: not a host of the credential
        first      INTEGER NOT NULL,            -- unix ms of the first record
        last       INTEGER NOT NULL,            -- unix ms of the last record
        last_epoch TEXT,                        -- the execution epoch of the last record
        PRIMARY KEY (credential, server, host)
     ) STRICT;",
];

/// The journals' schema version this build writes.
pub(crate) const JOURNAL_LATEST: i64 = JOURNAL_MIGRATIONS.len() as i64;

pub(crate) fn apply(conn: &mut Connection) -> Result<(), StoreError> {
    apply_from(conn, "main", MIGRATIONS)
}

/// Brings the attached journals' file (schema `journal`) up to date.
pub(crate) fn apply_journals(conn: &mut Connection) -> Result<(), StoreError> {
    apply_from(conn, "journal", JOURNAL_MIGRATIONS)
}

fn apply_from(conn: &mut Connection, schema: &str, migrations: &[&str]) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found = version(&tx, schema, migrations.len() as i64)?;
    for (index, sql) in migrations.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(Some(schema), "user_version", index as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}

/// The schema version of `schema` in `conn`; refused when newer than `latest` (a newer
/// Postern wrote it).
pub(crate) fn version(conn: &Connection, schema: &str, latest: i64) -> Result<i64, StoreError> {
    let found: i64 = conn.pragma_query_value(Some(schema), "user_version", |row| row.get(0))?;
    if found > latest {
        return Err(StoreError::TooNew {
            found,
            known: latest,
        });
    }
    Ok(found)
}

/// The version whose migration moved the journals to their own file (tests follow journal rows
/// through the migrations before it; after it they are rebuilt from the log).
#[cfg(test)]
pub(crate) const JOURNALS_MOVED: i64 = 15;

/// Migrates `conn` up to `version` only, as an older Postern left it.
#[cfg(test)]
pub(crate) fn apply_until(conn: &mut Connection, version: i64) -> Result<(), StoreError> {
    apply_from(conn, "main", &MIGRATIONS[..version as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_before_the_journals_moved(conn: &mut Connection) -> Result<(), StoreError> {
        apply_until(conn, JOURNALS_MOVED - 1)
    }

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

        apply_before_the_journals_moved(&mut conn).expect("migrate");
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
        assert_eq!(version, JOURNALS_MOVED - 1);
    }

    #[test]
    fn calls_from_version_9_keep_their_rows_with_who_and_how_unknown() {
        let mut conn = Connection::open_in_memory().expect("open");
        for sql in &MIGRATIONS[..9] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 9)
            .expect("version");
        conn.execute_batch(
            "INSERT INTO journal_sessions (id, run, session, server, client, started, status)
                VALUES (2, 1, 1, 'time', 'claude-code 2.1.3', 2000, 'ended');
             INSERT INTO journal_activity
                (seq, time, session, server, epoch, tool, call, decision, outcome, result_seq)
                VALUES (4, 3500, 2, 'time', 'E1', 'now', '1', 'allowed', 'ok', 5);",
        )
        .expect("old rows");

        apply_before_the_journals_moved(&mut conn).expect("migrate");
        let row: (String, Option<String>, Option<String>, Option<String>) = conn
            .query_row(
                "SELECT decision, authority, grant, approval FROM journal_activity WHERE seq = 4",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .expect("row");
        assert_eq!(row, ("allowed".into(), None, None, None));
        let cwd: Option<String> = conn
            .query_row("SELECT cwd FROM journal_sessions WHERE id = 2", [], |r| {
                r.get(0)
            })
            .expect("session");
        assert_eq!(cwd, None);
        let approvals: i64 = conn
            .query_row("SELECT count(*) FROM journal_approvals", [], |r| r.get(0))
            .expect("approvals");
        assert_eq!(approvals, 0);
    }

    #[test]
    fn answers_from_version_10_keep_their_rows_with_the_channel_unknown() {
        let mut conn = Connection::open_in_memory().expect("open");
        for sql in &MIGRATIONS[..10] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 10)
            .expect("version");
        conn.execute_batch(
            "INSERT INTO journal_approvals (approval, session, tool, requested, seq, answered, answer)
                VALUES ('A', 2, 'deploy', 1000, 3, 2000, 'granted');",
        )
        .expect("old rows");

        apply_before_the_journals_moved(&mut conn).expect("migrate");
        let row: (Option<String>, Option<String>) = conn
            .query_row(
                "SELECT answer, channel FROM journal_approvals WHERE approval = 'A'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row");
        assert_eq!(row, (Some("granted".into()), None));
    }

    #[test]
    fn journal_rows_from_version_6_get_times_and_counts_from_the_log_and_the_calls() {
        let mut conn = Connection::open_in_memory().expect("open");
        for sql in &MIGRATIONS[..6] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 6)
            .expect("version");
        conn.execute_batch(
            "INSERT INTO audit_log (seq, time, kind, header, sealed, hash) VALUES
                (2, 2000, 'session_started', x'', x'', x''),
                (3, 3000, 'server_started', x'', x'', x''),
                (4, 3500, 'tool_call_intent', x'', x'', x''),
                (5, 4000, 'tool_call_intent', x'', x'', x''),
                (6, 65000, 'tool_call_result', x'', x'', x''),
                (7, 70000, 'authorization_denied', x'', x'', x'');
             INSERT INTO journal_sessions (id, run, session, server, started, status)
                VALUES (2, 1, 1, 'time', 2000, 'interrupted');
             INSERT INTO journal_session_epochs (session, epoch, seq) VALUES (2, 'E1', 3);
             INSERT INTO journal_activity
                (seq, time, session, server, epoch, tool, call, decision, outcome, result_seq)
                VALUES (4, 3500, 2, 'time', 'E1', 'now', '1', 'allowed', NULL, NULL),
                       (5, 4000, 2, 'time', 'E1', 'now', '2', 'allowed', 'ok', 6),
                       (7, 70000, 2, 'time', 'E1', 'now', '3', 'vault_locked', 'refused', 7);
             INSERT INTO journal_grants
                (grant, session, server, epoch, tools, credentials, end_kind, issued, seq)
                VALUES ('G', 2, 'time', 'E1', '{}', '[]', '{}', 61000, 3);",
        )
        .expect("old rows");

        apply_before_the_journals_moved(&mut conn).expect("migrate");
        let times: (i64, i64, i64) = conn
            .query_row(
                "SELECT e.first_time, e.last_time, s.last_time
                 FROM journal_session_epochs e JOIN journal_sessions s ON s.id = e.session",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("times");
        // First: the record that named it; last: the refusal at 70 s (after the result at
        // 65 s, which only the log's time column knows).
        assert_eq!(times, (3000, 70000, 70000));
        let minutes: Vec<(i64, i64, i64, i64)> = conn
            .prepare(
                "SELECT start, calls, refused, grants FROM journal_activity_buckets
                 WHERE span = 60000 ORDER BY start",
            )
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(minutes, vec![(0, 2, 0, 0), (60000, 1, 1, 1)]);
        // Every counting span the projector uses was filled.
        let spans: Vec<i64> = conn
            .prepare("SELECT DISTINCT span FROM journal_activity_buckets ORDER BY span")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(spans, crate::journal::SPANS);
    }
}
