//! What the journal tests share: a log written through the audit writer, rebuilt from its
//! opened records and compared.

#![allow(dead_code, reason = "each test file uses its own part")]

use postern_audit::rand_core::{TryCryptoRng, TryRng};
use postern_audit::{Chain, EventKind, OpeningKey, SealedRecord, UnixMillis};
use postern_domain::{
    Artifact, AuditEvent, Digest, ExecutionEpoch, ExecutionRecord, Pinning, ServerLabel,
};
use postern_store::{
    ActivityFilter, Append, JournalWriter, LogWriter, Opened, SessionFilter, Store, StoreError,
    TimelineQuery,
};

/// A deterministic "random" source, so that sealed records are reproducible.
pub struct Counter(u8);

impl TryRng for Counter {
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

impl TryCryptoRng for Counter {}

pub fn label(name: &str) -> ServerLabel {
    name.parse().expect("label")
}

pub fn epoch(n: u128) -> ExecutionEpoch {
    ExecutionEpoch::new(1_700_000_000_000, n)
}

/// A pinned launch of `server` at `epoch`: one binary, nothing else.
pub fn record(server: &str, epoch: ExecutionEpoch) -> Box<ExecutionRecord> {
    let path = "/usr/bin/server";
    Box::new(ExecutionRecord {
        server_label: label(server),
        epoch,
        launch_command: vec![path.into()],
        executable: Artifact {
            path: path.into(),
            digest: Digest::of(path.as_bytes()),
        },
        wrappers: vec![],
        entry: None,
        lockfiles: vec![],
        extra_paths: vec![],
        runtime: None,
        working_directory: "/work".into(),
        env_names: vec![],
        loader_env: vec![],
        sandbox: None,
        pinning: Pinning::Pinned,
        pid: 100,
        started_at_ms: 0,
    })
}

/// A log written through the audit writer, record `i` (1-based) at time `i * 1000`.
pub struct Log {
    dir: tempfile::TempDir,
    /// The journals' connection that projected the batches.
    pub journals: JournalWriter,
    pub store: Store,
    pub key: OpeningKey,
    pub events: Vec<AuditEvent>,
    pub records: Vec<SealedRecord>,
}

impl Log {
    /// Seals `events` and appends them in `batches` (consecutive ranges covering them all),
    /// as the writer would commit them.
    pub fn write(events: Vec<AuditEvent>, batches: &[std::ops::Range<usize>]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = LogWriter::open(dir.path()).expect("writer");
        let mut journals = JournalWriter::open(dir.path()).expect("journals");
        let key = OpeningKey::from_bytes([5; 32]);
        let mut chain = Chain::genesis(key.recipient());
        let mut rng = Counter(0);
        let records: Vec<SealedRecord> = events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let body = serde_json::to_vec(e).expect("json");
                let time = UnixMillis::new((i as i64 + 1) * 1000);
                let kind = EventKind::parse(e.kind()).expect("kind");
                chain.append(time, kind, &body, &mut rng).expect("seal")
            })
            .collect();
        assert_eq!(batches.last().map(|b| b.end), Some(events.len()));
        for range in batches {
            let batch: Vec<Append<'_>> = range
                .clone()
                .map(|i| Append {
                    record: &records[i],
                    event: &events[i],
                })
                .collect();
            writer.append(&batch).expect("append");
            journals.project_appended(&batch).expect("journals");
        }
        let store = Store::open(dir.path()).expect("store");
        Log {
            dir,
            journals,
            store,
            key,
            events,
            records,
        }
    }

    /// The home directory holding the database.
    pub fn home(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Rebuilds the journals from the opened log and checks they come out exactly as the
    /// writer projected them: every journal table, row by row, and what the queries return.
    pub fn rebuild_identically(&mut self) {
        let filter = SessionFilter::default();
        let sessions = self.store.sessions(&filter).expect("sessions");
        let activity = self
            .store
            .activity(&ActivityFilter::default())
            .expect("activity");
        let timeline = self
            .store
            .timeline(&TimelineQuery::default())
            .expect("timeline");
        let tables = dump(self.home());
        let key = &self.key;
        let opened = self.records.iter().map(|r| {
            let o = r.open(key).expect("opens");
            Ok::<_, StoreError>(Opened {
                seq: o.header().seq(),
                time: o.header().time(),
                event: serde_json::from_slice(o.body()).expect("event"),
            })
        });
        self.journals.clear().expect("cleared");
        assert_eq!(
            self.journals.project(opened).expect("rebuild"),
            self.records.len() as u64
        );
        assert_eq!(dump(self.home()), tables);
        assert_eq!(self.store.sessions(&filter).expect("sessions"), sessions);
        assert_eq!(
            self.store
                .activity(&ActivityFilter::default())
                .expect("activity"),
            activity
        );
        assert_eq!(
            self.store
                .timeline(&TimelineQuery::default())
                .expect("timeline"),
            timeline
        );
    }
}

/// Every row of every journal table, as text, in primary-key order.
pub fn dump(home: &std::path::Path) -> Vec<(String, Vec<String>)> {
    let conn = rusqlite::Connection::open(home.join(postern_store::JOURNAL_FILE)).expect("sqlite");
    [
        ("journal_sessions", "id"),
        ("journal_session_epochs", "session, epoch"),
        ("journal_activity", "seq"),
        ("journal_activity_buckets", "session, span, start"),
        ("journal_grants", "grant"),
        ("journal_approvals", "approval"),
    ]
    .into_iter()
    .map(|(table, key)| {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY {key}"))
            .expect("prepare");
        let columns = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let values = (0..columns)
                    .map(|i| Ok(format!("{:?}", r.get_ref(i)?)))
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(values.join("|"))
            })
            .expect("query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("rows");
        (table.to_owned(), rows)
    })
    .collect()
}
