//! The audit log table, the connection that appends to it, and the one that projects it into
//! the journals.
//!
//! Rows hold what `postern-audit` produces (frozen header bytes, sealed body, chain hash) plus
//! copies of the header's sequence number, time and kind as plain columns for indexes. The
//! copies are a convenience: verification reads the header bytes, and checks the copies agree.
//!
//! [`LogWriter`] is the one connection that appends: each batch of records is ONE transaction
//! committed with `synchronous=FULL` (group commit: it returns once the batch is on disk, one
//! fsync for the batch). The batches' journal rows follow in transactions of their own, in the
//! journals' file, on a [`JournalWriter`] (a second connection): nobody waits for them, nothing
//! fsyncs their commits (`synchronous=NORMAL`), and the journals are rebuilt from the log
//! whenever they are found behind it (at start, or at the next unlock). Reads
//! ([`Store::audit_records`], [`Store::audit_head`], [`Store::meta`]) work on any connection,
//! while the engine writes (WAL).

use std::path::Path;

use postern_audit::{RawRecord, SealedRecord, Seq, UnixMillis};
use postern_domain::AuditEvent;
use rusqlite::{OptionalExtension, params};

use crate::journal::Projector;
use crate::{DB_FILE, Store, StoreError, Sync};

/// The meta key holding the log's recipient (public) key, base64.
pub const META_RECIPIENT: &str = "audit.recipient";

/// The connection that appends to the audit log (see the module docs).
#[derive(Debug)]
pub struct LogWriter {
    store: Store,
    /// What [`LogWriter::append`] repaired in the schema, one line each, until taken.
    repaired: Vec<String>,
}

/// The connection that writes the journals: projects what [`LogWriter`] appended, or a
/// rebuild's opened records (see the module docs).
#[derive(Debug)]
pub struct JournalWriter {
    store: Store,
    projector: Projector,
}

/// One record to append and the plaintext event it seals (for the journals).
#[derive(Debug, Clone, Copy)]
pub struct Append<'a> {
    /// The sealed record, as `postern_audit::Chain::append` made it.
    pub record: &'a SealedRecord,
    /// The event in the clear, projected into the journals after the record is stored
    /// ([`JournalWriter::project_appended`]).
    pub event: &'a AuditEvent,
}

/// A stored row, borrowed while a read is in progress.
#[derive(Debug, Clone, Copy)]
pub struct StoredRecord<'a> {
    /// The `seq` column.
    pub seq: i64,
    /// The `time` column (unix ms).
    pub time: i64,
    /// The `kind` column.
    pub kind: &'a str,
    /// The header bytes.
    pub header: &'a [u8],
    /// The sealed body bytes.
    pub sealed: &'a [u8],
    /// The chain hash bytes.
    pub hash: &'a [u8],
}

/// An opened event, fed to [`JournalWriter::project`] when the journals are rebuilt.
#[derive(Debug, Clone)]
pub struct Opened {
    /// Its record's sequence number.
    pub seq: Seq,
    /// Its record's time.
    pub time: UnixMillis,
    /// The event.
    pub event: AuditEvent,
}

impl LogWriter {
    /// Opens the database in `home` for appending (creating it and migrating as needed).
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        Self::open_file(&home.join(DB_FILE))
    }

    /// Opens a database file for appending.
    pub fn open_file(path: &Path) -> Result<Self, StoreError> {
        let store = Store::open_with(path, Sync::Full)?;
        // The log and its metadata are in none of Postern's foreign keys: off, a key another
        // process plants on them (on a table no repair can drop) is not enforced (review 18,
        // S1, S2).
        store.conn.pragma_update(None, "foreign_keys", false)?;
        Ok(LogWriter {
            store,
            repaired: Vec::new(),
        })
    }

    /// [`Store::repair_schema`] on this connection (at the log's open).
    pub fn repair_schema(&self) -> Result<Vec<String>, StoreError> {
        self.store.repair_schema()
    }

    /// What the appends since the last call repaired in the database's schema, one line each
    /// (nothing, almost always).
    pub fn take_repaired(&mut self) -> Vec<String> {
        std::mem::take(&mut self.repaired)
    }

    /// Read access on this same connection.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Appends `batch` (consecutive records, continuing the stored chain) in one durable
    /// transaction: on `Ok` it is on disk; on error nothing is stored. The journals are left
    /// to [`JournalWriter::project_appended`].
    ///
    /// When the commit fails, the database's schema is repaired (`crate::schema`: what a
    /// process of the user planted to refuse some records, review 14, N1) and, if that changed
    /// anything, the batch is appended in the repair's transaction, so that nothing is planted
    /// again between them. What was repaired is kept for [`LogWriter::take_repaired`], whether
    /// the batch was then appended or not.
    pub fn append(&mut self, batch: &[Append<'_>]) -> Result<(), StoreError> {
        let failed = {
            let tx = self.store.conn.transaction()?;
            match insert(&tx, batch).and_then(|()| Ok(tx.commit()?)) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            }
        };
        let conn = &self.store.conn;
        let (repairs, again) = crate::schema::repair(conn, crate::schema::MAIN, |repairs| {
            Ok(repairs
                .found()
                .then(|| crate::schema::in_savepoint(conn, || insert(conn, batch))))
        })?;
        self.repaired.extend(repairs.lines());
        again.unwrap_or(Err(failed))
    }

    /// Sets a meta value (its own transaction, durable).
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.store.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }
}

impl JournalWriter {
    /// Opens the database in `home` for writing the journals (creating it and migrating as
    /// needed).
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        Self::open_file(&home.join(DB_FILE))
    }

    /// Opens a database file for writing the journals.
    pub fn open_file(path: &Path) -> Result<Self, StoreError> {
        let store = Store::open_with(path, Sync::Normal)?;
        // One plan per statement, whatever its parameters: without this, a cached projection
        // statement on a table with partial indexes is recompiled whenever its bound values
        // change (the planner re-checks which partial indexes they imply), which was a sixth of
        // the writer's time under load. This connection's statements name their partial
        // indexes' conditions literally, so their plans do not need the values.
        store.conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        let projector = Projector::load(&store.conn)?;
        Ok(JournalWriter { store, projector })
    }

    /// Read access on this same connection.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Projects a batch [`LogWriter::append`] stored into the journals, in one transaction
    /// of the journals' file alone, which nothing fsyncs (`synchronous=NORMAL`: its
    /// checkpoints put it on disk; a crash before that leaves the journals behind the log,
    /// which the next start rebuilds). A [`LogWriter`] may append meanwhile: the two files'
    /// writes do not wait for each other. Events the journals already hold (a catch-up read
    /// them from the log) are skipped. On error the journals are as they were.
    pub fn project_appended(&mut self, batch: &[Append<'_>]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let saved = self.projector.checkpoint();
        let result = self.project_appended_tx(batch);
        if result.is_err() {
            self.projector.restore(saved);
        }
        result
    }

    /// Projects already-stored events (opened with the key) into the journals, in one
    /// transaction; they must continue after [`Store::journal_seq`] (those before are
    /// skipped). Returns how many events were projected.
    pub fn project<E: From<StoreError>>(
        &mut self,
        events: impl IntoIterator<Item = Result<Opened, E>>,
    ) -> Result<u64, E> {
        let saved = self.projector.checkpoint();
        let result = self.project_tx(events);
        if result.is_err() {
            self.projector.restore(saved);
        }
        result
    }

    /// Empties the journals (one transaction): a rebuild projects every event from the
    /// first record after this.
    pub fn clear(&mut self) -> Result<(), StoreError> {
        let saved = self.projector.checkpoint();
        let result = (|| {
            let tx = self.store.conn.transaction()?;
            self.projector = Projector::cleared(&tx)?;
            self.projector.save(&tx)?;
            tx.commit()?;
            Ok(())
        })();
        if result.is_err() {
            self.projector.restore(saved);
        }
        result
    }

    fn project_appended_tx(&mut self, batch: &[Append<'_>]) -> Result<(), StoreError> {
        let tx = self.store.conn.transaction()?;
        for item in batch {
            let header = item.record.header();
            let seq = to_i64(header.seq().get())?;
            // Already in: a catch-up read it from the log.
            if seq <= self.projector.seq() {
                continue;
            }
            self.projector
                .apply(&tx, seq, header.time().as_millis(), item.event)?;
        }
        self.projector.save(&tx)?;
        tx.commit()?;
        Ok(())
    }

    fn project_tx<E: From<StoreError>>(
        &mut self,
        events: impl IntoIterator<Item = Result<Opened, E>>,
    ) -> Result<u64, E> {
        let tx = self.store.conn.transaction().map_err(StoreError::from)?;
        let mut count = 0;
        for opened in events {
            let opened = opened?;
            let seq = to_i64(opened.seq.get())?;
            if seq <= self.projector.seq() {
                continue;
            }
            self.projector
                .apply(&tx, seq, opened.time.as_millis(), &opened.event)?;
            count += 1;
        }
        self.projector.save(&tx)?;
        tx.commit().map_err(StoreError::from)?;
        Ok(count)
    }
}

impl Store {
    /// The value of a meta key.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    /// The last stored record's sequence number and hash bytes (`None`: the log is empty).
    /// Read from the row, not verified.
    pub fn audit_head(&self) -> Result<Option<(i64, Vec<u8>)>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// Streams the rows with `seq > after`, in `seq` order, to `each`; stops at its first error.
    pub fn audit_records<E: From<StoreError>>(
        &self,
        after: i64,
        each: impl FnMut(StoredRecord<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.audit_records_between(after, i64::MAX, each)
    }

    /// Streams the rows with `after < seq <= upto`, in `seq` order, to `each`.
    pub fn audit_records_between<E: From<StoreError>>(
        &self,
        after: i64,
        upto: i64,
        mut each: impl FnMut(StoredRecord<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, time, kind, header, sealed, hash FROM audit_log
                 WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
            )
            .map_err(StoreError::from)?;
        let mut rows = stmt.query([after, upto]).map_err(StoreError::from)?;
        while let Some(row) = rows.next().map_err(StoreError::from)? {
            let record = read_row(row).map_err(StoreError::from)?;
            each(record)?;
        }
        Ok(())
    }
}

impl<'a> StoredRecord<'a> {
    /// The three fields `postern-audit` verifies.
    pub fn raw(&self) -> RawRecord<'a> {
        RawRecord::new(self.header, self.sealed, self.hash)
    }
}

fn read_row<'a>(row: &'a rusqlite::Row<'a>) -> rusqlite::Result<StoredRecord<'a>> {
    let kind = row.get_ref(2)?.as_str_or_null()?.unwrap_or_default();
    Ok(StoredRecord {
        seq: row.get(0)?,
        time: row.get(1)?,
        kind,
        header: blob(row, 3)?,
        sealed: blob(row, 4)?,
        hash: blob(row, 5)?,
    })
}

/// A BLOB column, or an empty slice for any other type (which then fails verification).
fn blob<'a>(row: &'a rusqlite::Row<'a>, index: usize) -> rusqlite::Result<&'a [u8]> {
    Ok(row
        .get_ref(index)?
        .as_blob_or_null()
        .ok()
        .flatten()
        .unwrap_or_default())
}

/// Inserts `batch`'s rows (in the caller's transaction).
fn insert(conn: &rusqlite::Connection, batch: &[Append<'_>]) -> Result<(), StoreError> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO audit_log (seq, time, kind, header, sealed, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for item in batch {
        let header = item.record.header();
        insert.execute(params![
            to_i64(header.seq().get())?,
            header.time().as_millis(),
            header.kind().as_str(),
            item.record.header_bytes(),
            item.record.sealed_body().as_bytes(),
            &item.record.chain_hash().as_bytes()[..],
        ])?;
    }
    Ok(())
}

fn to_i64(seq: u64) -> Result<i64, StoreError> {
    i64::try_from(seq).map_err(|_| StoreError::Corrupt {
        what: "audit log".into(),
        why: format!("sequence number {seq} does not fit SQLite's integers"),
    })
}

#[cfg(test)]
mod tests {
    use postern_audit::{Chain, EventKind, OpeningKey};
    use postern_domain::ServerLabel;

    use super::*;

    struct Counter(u8);
    impl postern_audit::rand_core::TryRng for Counter {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(u32::from(self.0))
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(u64::from(self.0))
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            self.0 = self.0.wrapping_add(1);
            dst.fill(self.0);
            Ok(())
        }
    }
    impl postern_audit::rand_core::TryCryptoRng for Counter {}

    fn event(n: u64) -> AuditEvent {
        AuditEvent::ConfigChanged {
            what: format!("change {n}"),
            server: Some("time".parse::<ServerLabel>().expect("label")),
            narrowing: None,
        }
    }

    /// The log's commits wait for the disk itself, not its cache (macOS's F_FULLFSYNC, which
    /// SQLite ignores elsewhere); the journals' connection and the others keep the cheaper
    /// syncs.
    #[test]
    fn the_audit_writer_syncs_through_the_drive_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pragma = |conn: &rusqlite::Connection, schema: &str, name: &str| -> i64 {
            conn.pragma_query_value(Some(schema), name, |row| row.get(0))
                .expect("pragma")
        };
        let writer = LogWriter::open(dir.path()).expect("writer");
        assert_eq!(pragma(&writer.store.conn, "main", "synchronous"), 2, "FULL");
        assert_eq!(pragma(&writer.store.conn, "main", "fullfsync"), 1);
        let journals = JournalWriter::open(dir.path()).expect("journals");
        for schema in ["main", "journal"] {
            let sync = pragma(&journals.store.conn, schema, "synchronous");
            assert_eq!(sync, 1, "NORMAL ({schema})");
        }
        assert_eq!(pragma(&journals.store.conn, "main", "fullfsync"), 0);
        let store = Store::open(dir.path()).expect("store");
        assert_eq!(pragma(&store.conn, "main", "synchronous"), 1, "NORMAL");
        assert_eq!(pragma(&store.conn, "main", "fullfsync"), 0);
    }

    /// `n` events sealed onto a new chain, and the key that opens them.
    fn sealed(n: u64) -> (OpeningKey, Vec<AuditEvent>, Vec<SealedRecord>) {
        let key = OpeningKey::from_bytes([3; 32]);
        let mut chain = Chain::genesis(key.recipient());
        let mut rng = Counter(0);
        let events: Vec<AuditEvent> = (1..=n).map(event).collect();
        let records = events
            .iter()
            .map(|e| {
                let kind = EventKind::parse(e.kind()).expect("kind");
                let body = serde_json::to_vec(e).expect("json");
                chain
                    .append(UnixMillis::new(1000), kind, &body, &mut rng)
                    .expect("append")
            })
            .collect();
        (key, events, records)
    }

    fn appends<'a>(events: &'a [AuditEvent], records: &'a [SealedRecord]) -> Vec<Append<'a>> {
        records
            .iter()
            .zip(events)
            .map(|(record, event)| Append { record, event })
            .collect()
    }

    /// A log in a new home, three records sealed for it and the first appended.
    fn one_of_three_appended() -> (
        tempfile::TempDir,
        LogWriter,
        Vec<AuditEvent>,
        Vec<SealedRecord>,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = LogWriter::open(dir.path()).expect("open");
        let (_, events, records) = sealed(3);
        writer
            .append(&appends(&events, &records)[..1])
            .expect("first");
        (dir, writer, events, records)
    }

    /// A batch refused by an index planted on the log is appended once the store removed it,
    /// and says so, while another process holds the journals' file (review 16, F3: the repair
    /// takes the database's lock only); a batch refused for another reason is not.
    #[test]
    fn a_batch_refused_by_a_planted_index_is_appended_after_the_repair() {
        let (dir, mut writer, events, records) = one_of_three_appended();
        let batch = appends(&events, &records);
        let path = dir.path().join(DB_FILE);
        rusqlite::Connection::open(&path)
            .expect("open")
            .execute_batch(
                "CREATE INDEX planted ON audit_log (json(CASE WHEN seq > 1 THEN 'no' END));",
            )
            .expect("plant");
        let other = rusqlite::Connection::open(crate::journal_path(&path)).expect("open");
        other
            .execute_batch(
                "BEGIN IMMEDIATE; INSERT INTO journal_meta (key, value) VALUES ('held', 1);",
            )
            .expect("hold the journals");
        writer
            .append(&batch[1..2])
            .expect("appended after the repair");
        assert_eq!(
            writer.take_repaired(),
            ["not made by Postern, removed from the database: index planted"]
        );
        writer.append(&batch[1..2]).expect_err("a repeated number");
        assert_eq!(writer.take_repaired(), Vec::<String>::new());
        other.execute_batch("ROLLBACK").expect("let go");
    }

    /// What the store repaired to append the second of three records after another process
    /// ran `plants` on the database, each on a connection of its own (with `writable_schema`
    /// allowed, and the schema's change made known to other connections after them).
    fn repaired_to_append_after(plants: &[&str]) -> Vec<String> {
        repaired_and_written_after(plants).0
    }

    /// [`repaired_to_append_after`], with the log's writer (its store to read).
    fn repaired_and_written_after(plants: &[&str]) -> (Vec<String>, LogWriter, tempfile::TempDir) {
        let (dir, mut writer, events, records) = one_of_three_appended();
        let batch = appends(&events, &records);
        let path = dir.path().join(DB_FILE);
        for plant in plants
            .iter()
            .chain(&["CREATE TABLE changed (x); DROP TABLE changed;"])
        {
            rusqlite::Connection::open(&path)
                .expect("open")
                .execute_batch(plant)
                .expect("plant");
        }
        writer
            .append(&batch[1..2])
            .expect("appended after the repair");
        (writer.take_repaired(), writer, dir)
    }

    /// What a repair says of the log's table made again, and of its index with it.
    const REMADE: &str = "Postern's table, changed, made again with its rows: audit_log";
    const REMADE_INDEX: &str =
        "Postern's, missing or changed, made again: index audit_log_engine_started";

    /// Review 17, N1: the log's table renamed to another case of its name and given a check.
    #[test]
    fn a_table_renamed_to_another_case_is_made_again() {
        let repaired = repaired_to_append_after(&["ALTER TABLE audit_log RENAME TO moved;
             ALTER TABLE moved RENAME TO AUDIT_LOG;
             ALTER TABLE AUDIT_LOG ADD COLUMN planted INTEGER CHECK (seq <= 1);"]);
        assert!(
            repaired
                .contains(&"Postern's table, changed, made again with its rows: audit_log".into()),
            "{repaired:?}"
        );
    }

    /// Review 17, N2, and review 18, S1: a foreign key to the log's `kind` (which is not
    /// unique, so SQLite refuses every insert there while it enforces the key), on a table of
    /// another's or on a virtual table's own, which no repair may drop: the log's connection
    /// does not enforce foreign keys, and the repair at the log's open removes what it can.
    #[test]
    fn a_foreign_key_to_the_log_does_not_refuse_its_records() {
        let repaired = repaired_to_append_after(&[
            "CREATE TABLE planted (k TEXT REFERENCES AUDIT_LOG (kind) DEFERRABLE INITIALLY DEFERRED);
             CREATE VIRTUAL TABLE words USING fts5(x);
             ALTER TABLE words_content ADD COLUMN k TEXT REFERENCES audit_log (kind);",
        ]);
        assert_eq!(repaired, Vec::<String>::new());
    }

    #[test]
    fn the_repair_at_the_log_s_open_removes_a_table_with_a_foreign_key_to_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(DB_FILE);
        drop(LogWriter::open(dir.path()).expect("open"));
        rusqlite::Connection::open(&path)
            .expect("open")
            .execute_batch("CREATE TABLE planted (k TEXT REFERENCES AUDIT_LOG (kind));")
            .expect("plant");
        let writer = LogWriter::open(dir.path()).expect("open");
        assert_eq!(
            writer.repair_schema().expect("repair"),
            [
                "a table Postern did not make, named like one of its own or referring to one, \
              was removed: planted"
            ]
        );
    }

    /// Review 17, N3: a virtual table of a module this SQLite lacks, which no statement can
    /// read or drop, neither fails the repair nor holds the name a table is put aside under.
    #[test]
    fn a_virtual_table_of_an_unknown_module_does_not_stop_the_repair() {
        let repaired = repaired_to_append_after(&["ALTER TABLE audit_log ADD COLUMN planted INTEGER CHECK (seq <= 1);
             PRAGMA writable_schema = ON;
             INSERT INTO sqlite_schema VALUES ('table', 'audit_log__not_postern',
                 'audit_log__not_postern', 0, 'CREATE VIRTUAL TABLE audit_log__not_postern USING nope(x)');
             INSERT INTO sqlite_schema VALUES ('table', 'elsewhere', 'elsewhere', 0,
                 'CREATE VIRTUAL TABLE elsewhere USING nope(x)');
             PRAGMA writable_schema = OFF;"]);
        assert_eq!(repaired, [REMADE, REMADE_INDEX]);
    }

    /// Review 17, N4: a row the log's table refuses (its `STRICT` taken away, a row of another
    /// type put in) is kept aside, the rest copied.
    #[test]
    fn rows_that_do_not_fit_a_table_made_again_are_kept_aside() {
        let (repaired, writer, _dir) = repaired_and_written_after(&[
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_schema SET sql = replace(sql, ') STRICT', ', CHECK (seq <= 1))')
                 WHERE name = 'audit_log';
             PRAGMA writable_schema = OFF;",
            "INSERT INTO audit_log VALUES (0, 'not a time', 'planted', x'', x'', x'');",
        ]);
        let aside =
            format!("{REMADE} (1 rows that do not fit it kept aside in audit_log__not_postern)");
        assert_eq!(repaired, [aside.as_str(), REMADE_INDEX]);
        // Only that row (review 18, S3: no copy of what was copied back stays in the file).
        let kept: Vec<i64> = writer
            .store()
            .conn
            .prepare("SELECT seq FROM audit_log__not_postern")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("kept");
        assert_eq!(kept, [0]);
    }

    #[test]
    fn batches_append_in_one_transaction_and_read_back_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = LogWriter::open(dir.path()).expect("open");
        let mut journals = JournalWriter::open(dir.path()).expect("journals");
        let (key, events, records) = sealed(5);
        let batch = appends(&events, &records);
        writer.append(&batch[..3]).expect("first batch");
        journals
            .project_appended(&batch[..3])
            .expect("first journals");
        writer.append(&batch[3..]).expect("second batch");
        journals
            .project_appended(&batch[3..])
            .expect("second journals");
        // A batch that does not continue the chain (a repeated seq) stores nothing.
        writer.append(&batch[4..]).expect_err("duplicate seq");

        let reader = Store::open(dir.path()).expect("reader");
        let (seq, hash) = reader.audit_head().expect("head").expect("some");
        assert_eq!(seq, 5);
        assert_eq!(hash, records[4].chain_hash().as_bytes());
        let mut raws = Vec::new();
        reader
            .audit_records(0, |r| {
                assert_eq!(r.kind, "config_changed");
                raws.push((r.header.to_vec(), r.sealed.to_vec(), r.hash.to_vec()));
                Ok::<(), StoreError>(())
            })
            .expect("read");
        let verified = postern_audit::verify(
            raws.iter().map(|(h, s, c)| RawRecord::new(h, s, c)),
            Some(records[4].head()),
            Some(&key),
        )
        .expect("verifies");
        assert_eq!(verified.records, 5);
        assert_eq!(reader.journal_seq().expect("journal seq"), 5);
    }

    #[test]
    fn an_append_goes_on_while_the_journals_are_being_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = LogWriter::open(dir.path()).expect("open");
        let (_, events, records) = sealed(2);
        let batch = appends(&events, &records);
        // The journals' connection in the middle of a transaction (their thread projecting).
        let journals = Store::open(dir.path()).expect("journals' connection");
        journals
            .conn
            .execute_batch("BEGIN; INSERT INTO journal_meta (key, value) VALUES ('busy', 1);")
            .expect("a journal transaction");
        // With the journals in the log's file this waited out the busy timeout and failed.
        writer
            .append(&batch)
            .expect("the append does not wait for the journals");
        journals.conn.execute_batch("ROLLBACK").expect("rollback");
        assert_eq!(
            writer.store().audit_head().expect("head").map(|h| h.0),
            Some(2)
        );
    }
}
