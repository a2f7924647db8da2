//! The one SQLite file in a Postern home (`postern.db`): WAL mode, versioned migrations,
//! and typed access to what the engine keeps (servers, settings, the audit log and the
//! journals projected from it). Only this crate touches SQLite.

pub mod audit;
mod baselines;
mod credentials;
pub mod journal;
mod migrations;
mod servers;
mod settings;

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

pub use audit::{Append, AuditWriter, Opened, StoredRecord};
pub use journal::{
    ActivityFilter, ActivityRow, Agent, Asked, Band, Bucket, Complete, GrantLife, GrantRow, Lane,
    Mark, MarkKind, SessionFilter, SessionName, SessionRow, Timeline, TimelineQuery, Wait,
};
pub use servers::AddOutcome;

/// The file name of the database inside a Postern home.
pub const DB_FILE: &str = "postern.db";

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
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", sync.pragma())?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // What is deleted or overwritten is zeroed in the file, not left in free space: a
        // server's plain environment value moved into the keychain must not stay readable
        // in `postern.db` (see `forget_deleted` for the WAL's copies). The cost is small:
        // the audit log only appends, and a journal UPDATE rewrites a page that is written
        // anyway; freed pages are written as zeros.
        conn.pragma_update(None, "secure_delete", "ON")?;
        migrations::apply(&mut conn)?;
        Ok(Self { conn })
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
