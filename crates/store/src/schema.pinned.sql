-- main.approved_baselines
CREATE TABLE approved_baselines (
        server      TEXT PRIMARY KEY NOT NULL,
        record      TEXT NOT NULL,          -- JSON ExecutionRecord
        catalog     TEXT NOT NULL,          -- JSON Catalog
        approved_at INTEGER NOT NULL        -- unix milliseconds
    ) STRICT;
-- main.audit_log
CREATE TABLE audit_log (
        seq    INTEGER PRIMARY KEY NOT NULL,   -- the header's sequence number
        time   INTEGER NOT NULL,               -- copied from the header: unix ms
        kind   TEXT NOT NULL,                  -- copied from the header: event kind
        header BLOB NOT NULL,                  -- frozen header bytes (postern-audit)
        sealed BLOB NOT NULL,                  -- body sealed to the log's public key
        hash   BLOB NOT NULL                   -- chain hash, 32 bytes
    ) STRICT;
-- main.credentials
CREATE TABLE credentials (
        name       TEXT PRIMARY KEY NOT NULL,
        injection  TEXT NOT NULL,          -- JSON of postern_domain::Injection
        hosts      TEXT NOT NULL,          -- JSON array of host names
        every_use  INTEGER NOT NULL,
        version    INTEGER NOT NULL,
        created_at INTEGER NOT NULL,       -- unix milliseconds
        rotated_at INTEGER
    ) STRICT;
-- main.every_use
CREATE TABLE every_use (
        target TEXT PRIMARY KEY NOT NULL,  -- JSON of a SettingTarget (serde_json::to_string)
        level  TEXT NOT NULL               -- confirm (off is no row)
    ) STRICT;
-- main.meta
CREATE TABLE meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    ) STRICT;
-- main.pending_config_changes
CREATE TABLE pending_config_changes (
        id     INTEGER PRIMARY KEY,
        at     INTEGER NOT NULL,           -- unix milliseconds
        what   TEXT NOT NULL,              -- a description without environment values
        server TEXT                        -- the label, when the change is about one server
    , narrowing TEXT) STRICT;
-- main.server_credentials
CREATE TABLE server_credentials (
        server     TEXT NOT NULL,
        credential TEXT NOT NULL REFERENCES credentials(name) ON DELETE CASCADE,
        PRIMARY KEY (server, credential)
    ) STRICT, WITHOUT ROWID;
-- main.servers
CREATE TABLE servers (
        label      TEXT PRIMARY KEY NOT NULL,
        command    TEXT NOT NULL,          -- JSON array of strings
        cwd        TEXT,                   -- absolute path or NULL
        env        TEXT NOT NULL,          -- JSON array of [name, value]
        created_at INTEGER NOT NULL        -- unix milliseconds
    , identity_paths TEXT NOT NULL DEFAULT '[]', restart TEXT NOT NULL DEFAULT 'manual', self_reloading INTEGER NOT NULL DEFAULT 0, pass_methods TEXT NOT NULL DEFAULT '[]', confinement TEXT NOT NULL DEFAULT 'confined', writable TEXT NOT NULL DEFAULT '[]') STRICT;
-- main.settings
CREATE TABLE settings (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL                -- JSON
    ) STRICT;
-- journal.journal_activity
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
        result_seq  INTEGER,
        authority   TEXT,
        grant       TEXT,
        approval    TEXT
     ) STRICT;
-- journal.journal_activity_buckets
CREATE TABLE journal_activity_buckets (
        session INTEGER NOT NULL,              -- journal_sessions.id
        span    INTEGER NOT NULL,              -- bucket width, ms (one of a fixed set)
        start   INTEGER NOT NULL,              -- unix ms, a multiple of span
        calls   INTEGER NOT NULL,              -- Activity rows (refusals included)
        refused INTEGER NOT NULL,              -- of which refused before forwarding
        grants  INTEGER NOT NULL,              -- grants issued
        PRIMARY KEY (session, span, start)
     ) STRICT, WITHOUT ROWID;
-- journal.journal_approvals
CREATE TABLE journal_approvals (
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
-- journal.journal_credential_uses
CREATE TABLE journal_credential_uses (
        credential TEXT NOT NULL,
        server     TEXT NOT NULL,
        host       TEXT NOT NULL,
        uses       INTEGER NOT NULL DEFAULT 0,  -- requests the broker put the value in
        leaks      INTEGER NOT NULL DEFAULT 0,  -- requests refused: not a host of the credential
        first      INTEGER NOT NULL,            -- unix ms of the first record
        last       INTEGER NOT NULL,            -- unix ms of the last record
        last_epoch TEXT,                        -- the execution epoch of the last record
        PRIMARY KEY (credential, server, host)
     ) STRICT;
-- journal.journal_grants
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
        seq         INTEGER NOT NULL,          -- seq of the approval_granted record
        ended_seq   INTEGER
     ) STRICT;
-- journal.journal_meta
CREATE TABLE journal_meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value INTEGER NOT NULL
     ) STRICT;
-- journal.journal_session_epochs
CREATE TABLE journal_session_epochs (
        session    INTEGER NOT NULL,            -- journal_sessions.id
        epoch      TEXT NOT NULL,
        seq        INTEGER NOT NULL,            -- first record naming it
        first_time INTEGER,
        last_time  INTEGER,
        PRIMARY KEY (session, epoch)
     ) STRICT, WITHOUT ROWID;
-- journal.journal_sessions
CREATE TABLE journal_sessions (
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
-- main.audit_log_engine_started
CREATE INDEX audit_log_engine_started ON audit_log(seq) WHERE kind = 'engine_started';
-- main.sqlite_autoindex_approved_baselines_1
-- SQLite's own;
-- main.sqlite_autoindex_credentials_1
-- SQLite's own;
-- main.sqlite_autoindex_every_use_1
-- SQLite's own;
-- main.sqlite_autoindex_meta_1
-- SQLite's own;
-- main.sqlite_autoindex_servers_1
-- SQLite's own;
-- main.sqlite_autoindex_settings_1
-- SQLite's own;
-- journal.journal_activity_asked
CREATE INDEX journal_activity_asked ON journal_activity(time)
        WHERE approval IS NOT NULL;
-- journal.journal_activity_decision_time
CREATE INDEX journal_activity_decision_time ON journal_activity(decision, time);
-- journal.journal_activity_epoch_time
CREATE INDEX journal_activity_epoch_time ON journal_activity(epoch, time);
-- journal.journal_activity_pending
CREATE INDEX journal_activity_pending ON journal_activity(session, call)
        WHERE result_seq IS NULL;
-- journal.journal_activity_refused
CREATE INDEX journal_activity_refused ON journal_activity(time)
        WHERE outcome = 'refused';
-- journal.journal_activity_refused_session
CREATE INDEX journal_activity_refused_session ON journal_activity(session, time)
        WHERE outcome = 'refused';
-- journal.journal_activity_result
CREATE INDEX journal_activity_result ON journal_activity(result_seq);
-- journal.journal_activity_server_time
CREATE INDEX journal_activity_server_time ON journal_activity(server, time);
-- journal.journal_activity_session_time
CREATE INDEX journal_activity_session_time ON journal_activity(session, time);
-- journal.journal_activity_time
CREATE INDEX journal_activity_time ON journal_activity(time);
-- journal.journal_activity_tool_time
CREATE INDEX journal_activity_tool_time ON journal_activity(tool, time);
-- journal.journal_approvals_open
CREATE INDEX journal_approvals_open ON journal_approvals(session, tool)
        WHERE activity IS NULL;
-- journal.journal_approvals_session_requested
CREATE INDEX journal_approvals_session_requested
        ON journal_approvals(session, requested);
-- journal.journal_grants_session_ended
CREATE INDEX journal_grants_session_ended ON journal_grants(session, ended);
-- journal.journal_grants_session_issued
CREATE INDEX journal_grants_session_issued ON journal_grants(session, issued);
-- journal.journal_sessions_server
CREATE INDEX journal_sessions_server ON journal_sessions(server);
-- journal.journal_sessions_status
CREATE INDEX journal_sessions_status ON journal_sessions(status);
-- journal.sqlite_autoindex_journal_approvals_1
-- SQLite's own;
-- journal.sqlite_autoindex_journal_credential_uses_1
-- SQLite's own;
-- journal.sqlite_autoindex_journal_grants_1
-- SQLite's own;
-- journal.sqlite_autoindex_journal_meta_1
-- SQLite's own;
-- journal.sqlite_autoindex_journal_sessions_1
-- SQLite's own;
