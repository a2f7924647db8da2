//! The SQLite files in a Postern home: `postern.db` (servers, settings, credentials' names,
//! the audit log) and beside it `postern-journals.db` (the journals projected from the log,
//! attached to every connection as the schema `journal`): WAL mode, versioned migrations,
//! and typed access to what the engine keeps. Only this crate touches SQLite.
//!
//! The journals have a file of their own so that writing them never adds to what an audit
//! commit has to carry to the disk: each file has its write-ahead log, and a commit's fsync
//! takes only its own file's pages. They are projected on their own connection, beside the
//! appends, at `synchronous=NORMAL` (they are rebuilt from the log whenever they are found
//! behind it).

pub mod audit;
mod baselines;
mod credentials;
pub mod journal;
mod migrations;
mod schema;
mod servers;
mod settings;

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

pub use audit::{Append, JournalWriter, LogWriter, Opened, StoredRecord};
pub use journal::{
    ActivityFilter, ActivityRow, Agent, Asked, Band, Bucket, Complete, GrantLife, GrantRow,
    JournalDifference, JournalSnapshot, Lane, Mark, MarkKind, SessionFilter, SessionName,
    SessionRow, Timeline, TimelineQuery, Wait,
};
pub use servers::{AddOutcome, ConfigChange};

/// The file name of the database inside a Postern home.
pub const DB_FILE: &str = "postern.db";

/// The file name of the journals' database beside it (for [`DB_FILE`]; a database opened at
/// another path has its journals at [`journal_path`] of it).
pub const JOURNAL_FILE: &str = "postern-journals.db";

/// Where the journals of the database at `db` are kept: beside it, `<stem>-journals.db`.
pub fn journal_path(db: &Path) -> std::path::PathBuf {
    let stem = db.file_stem().map_or_else(
        || std::borrow::Cow::Borrowed("postern"),
        |s| s.to_string_lossy(),
    );
    db.with_file_name(format!("{stem}-journals.db"))
}

/// Attaches the journals' file of the database at `db` to `conn` as the schema `journal`, as
/// every connection Postern opens has it (for tests and tools that open `db` themselves).
pub fn attach_journals(conn: &Connection, db: &Path) -> rusqlite::Result<()> {
    conn.execute(
        "ATTACH DATABASE ?1 AS journal",
        [journal_path(db).to_string_lossy()],
    )
    .map(drop)
}

/// An open Postern database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
}

/// What went wrong talking to the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database was written by a newer Postern.
    #[error(
        "the database is at schema version {found}, newer than this Postern knows ({known}); upgrade Postern"
    )]
    TooNew { found: i64, known: i64 },
    /// A stored row no longer parses (edited by hand, or corrupted).
    #[error("stored row for {what} is invalid: {why}")]
    Corrupt { what: String, why: String },
    /// A value to store has no JSON form (a map with non-string keys, a failing
    /// `Serialize` impl).
    #[error("{what} cannot be stored: {why}")]
    Unencodable { what: String, why: String },
}

/// How hard a connection's commits wait for the disk.
#[derive(Debug, Clone, Copy)]
enum Sync {
    /// WAL + NORMAL: durable at the next checkpoint; a power cut may lose the last commits.
    Normal,
    /// WAL + FULL: every commit is fsynced before it returns (the audit writer).
    Full,
}

impl Sync {
    fn pragma(self) -> &'static str {
        match self {
            Sync::Normal => "NORMAL",
            Sync::Full => "FULL",
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database in `home` and brings its schema up to date.
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        Self::open_file(&home.join(DB_FILE))
    }

    /// Opens a database at an explicit path.
    pub fn open_file(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, Sync::Normal)
    }

    fn open_with(path: &Path, sync: Sync) -> Result<Self, StoreError> {
        let mut conn = Connection::open(path)?;
        schema::harden(&conn)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", sync.pragma())?;
        if let Sync::Full = sync {
            // On Apple's systems fsync() leaves the write in the drive's cache, where a power
            // cut can still lose it; F_FULLFSYNC flushes the cache (Rust's own `sync_data`
            // does the same there). An audited call's intent must outlive a power cut before
            // the call goes out, as it does on Linux, where SQLite ignores this setting.
            conn.pragma_update(None, "fullfsync", "ON")?;
        }
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // What is deleted or overwritten is zeroed in the file, not left in free space: a
        // server's plain environment value moved into the keychain must not stay readable
        // in `postern.db` (see `forget_deleted` for the WAL's copies). The cost is small:
        // the audit log only appends, and a journal UPDATE rewrites a page that is written
        // anyway; freed pages are written as zeros.
        conn.pragma_update(None, "secure_delete", "ON")?;
        migrations::apply(&mut conn)?;
        // Attached after the migrations, so that theirs never name the journals' tables.
        attach_journals(&conn, path)?;
        conn.pragma_update(Some("journal"), "journal_mode", "WAL")?;
        conn.pragma_update(Some("journal"), "synchronous", Sync::Normal.pragma())?;
        conn.pragma_update(Some("journal"), "secure_delete", "ON")?;
        migrations::apply_journals(&mut conn)?;
        Ok(Self { conn })
    }

    /// Another connection to the same database, for a long read that must not hold this
    /// one.
    pub fn reader(&self) -> Result<Self, StoreError> {
        let path = self.conn.path().ok_or_else(|| StoreError::Corrupt {
            what: "the database".into(),
            why: "it has no file to open again".into(),
        })?;
        Self::open_file(Path::new(path))
    }

    /// Copies the write-ahead log into the database file and truncates it to nothing, so
    /// that no older version of a page (a value since deleted or overwritten, which
    /// `secure_delete` zeroed in the current one) stays in `postern.db-wal`. Waits for the
    /// busy timeout for other connections' reads to finish; returns `false` when one still
    /// holds an older snapshot (the log is then only partly copied, and truncated at a later
    /// checkpoint).
    pub fn forget_deleted(&self) -> Result<bool, StoreError> {
        let busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        Ok(busy == 0)
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_creates_a_wal_database_at_the_latest_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        assert_eq!(store.schema_version().expect("version"), migrations::LATEST);
        let mode: String = store
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .expect("mode");
        assert_eq!(mode, "wal");
        drop(store);
        // Reopening an up-to-date database is a no-op, not an error.
        Store::open(dir.path()).expect("reopen");
    }

    #[test]
    fn journals_kept_in_the_database_move_to_their_own_file_to_be_rebuilt_from_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut conn = Connection::open(dir.path().join(DB_FILE)).expect("raw open");
            migrations::apply_until(&mut conn, migrations::JOURNALS_MOVED - 1).expect("old");
            conn.execute_batch(
                "INSERT INTO journal_sessions (id, run, session, server, started, status)
                     VALUES (2, 1, 1, 'time', 2000, 'running');
                 INSERT INTO meta (key, value) VALUES ('journal.seq', '7'), ('journal.run', '1');",
            )
            .expect("an older Postern's journals");
        }
        let store = Store::open(dir.path()).expect("open");
        let left: i64 = store
            .conn
            .query_row(
                "SELECT (SELECT count(*) FROM main.sqlite_master WHERE name LIKE 'journal%')
                      + (SELECT count(*) FROM main.meta WHERE key LIKE 'journal.%')",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(left, 0, "postern.db keeps no journal table or key");
        // Behind the log: the engine rebuilds them from it (with the opening key).
        assert_eq!(store.journal_seq().expect("seq"), 0);
        assert!(
            store
                .sessions(&SessionFilter::default())
                .expect("sessions")
                .is_empty()
        );
        let version: i64 = store
            .conn
            .pragma_query_value(Some("journal"), "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, migrations::JOURNAL_LATEST);
        assert!(dir.path().join(JOURNAL_FILE).exists());
    }

    #[test]
    fn a_database_from_a_newer_postern_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(Store::open(dir.path()).expect("open"));
        let conn = Connection::open(dir.path().join(DB_FILE)).expect("raw open");
        conn.pragma_update(None, "user_version", 999).expect("bump");
        drop(conn);
        let err = Store::open(dir.path()).expect_err("must refuse");
        assert!(
            matches!(err, StoreError::TooNew { found: 999, .. }),
            "{err}"
        );
    }
}
