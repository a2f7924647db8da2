//! One audit record opened for a clicked mark: its header, whether it links to the record
//! before it, and its body opened with the audit key (or why it stays sealed).

use postern_audit::{ChainHash, Head, Opener, OpeningKey, RawRecord, Seq, Verifier};
use postern_store::StoreError;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::{ActivityRow, AgentName, activity_row, reader};
use crate::audit::{open_record, redacted};
use crate::{EngineError, Home};

/// One audit record, for a clicked mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its sequence number.
    #[ts(type = "number")]
    pub seq: u64,
    /// Its time, unix ms (from the clear header).
    #[ts(type = "number")]
    pub time: i64,
    /// Its event kind (from the clear header).
    pub kind: String,
    /// The header's format version.
    pub version: u8,
    /// Its chain hash, hex.
    pub hash: String,
    /// What is wrong with the record as stored, checked against the previous record only
    /// (the header, the seq, the link to the previous hash): `null` when nothing is. The
    /// Integrity view's full verification is what vouches for the whole log.
    pub problem: Option<String>,
    /// The event, when it could be opened.
    pub body: AuditBody,
    /// The call the record is about (its intent, refusal or result), as the Activity
    /// journal has it: known even while the body stays sealed.
    pub call: Option<ActivityRow>,
    /// The agent session the record names, by its journal id (the event's own `session` is
    /// the engine's number within its run, which starts again with each run).
    pub session: Option<EntrySession>,
}

/// The session an audit record names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct EntrySession {
    /// The journal session id: the number the app and `postern sessions` show.
    #[ts(type = "number")]
    pub id: i64,
    /// The server label.
    pub server: String,
    /// Its agent.
    pub agent: AgentName,
}

/// A record's body: opened (tool-call arguments shown by their shape only), or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum AuditBody {
    /// The event, as JSON, its `arguments` replaced by their shape.
    Opened {
        #[ts(type = "unknown")]
        event: serde_json::Value,
    },
    /// Not opened, and why (the vault is locked, the key is not in the keychain, ...).
    Sealed { reason: String },
}

/// Audit record `seq` of the home's log (`None`: no such record), its body opened with the
/// opening `key`, or, when there is none, not opened and why (`Err(why not)`).
pub fn audit_entry(
    home: &Home,
    seq: u64,
    key: Result<OpeningKey, String>,
) -> Result<Option<AuditEntry>, EngineError> {
    let Ok(wanted) = i64::try_from(seq) else {
        return Ok(None);
    };
    let store = reader(home)?;
    let mut previous: Option<Vec<u8>> = None;
    let mut found: Option<Row> = None;
    store.audit_records_between((wanted - 2).max(0), wanted, |row| {
        if row.seq == wanted {
            found = Some(Row {
                time: row.time,
                kind: row.kind.to_owned(),
                header: row.header.to_vec(),
                sealed: row.sealed.to_vec(),
                hash: row.hash.to_vec(),
            });
        } else {
            previous = Some(row.hash.to_vec());
        }
        Ok::<(), StoreError>(())
    })?;
    let Some(row) = found else {
        return Ok(None);
    };
    let raw = RawRecord::new(&row.header, &row.sealed, &row.hash);
    let header = postern_audit::Header::decode(&row.header).ok();
    let problem = check(seq, previous.as_deref(), raw, &row);
    let body = match key {
        Err(why) => AuditBody::Sealed { reason: why },
        Ok(key) => {
            match open_record(raw, &key, &mut Opener::default()).and_then(|o| redacted(&o.event)) {
                Ok(event) => AuditBody::Opened { event },
                Err(e) => AuditBody::Sealed {
                    reason: e.to_string(),
                },
            }
        }
    };
    let call = store.activity_of_record(wanted)?.map(activity_row);
    let session = match (&call, &body) {
        (Some(call), _) => Some(EntrySession {
            id: call.session,
            server: call.server.clone(),
            agent: call.agent.clone(),
        }),
        (None, AuditBody::Opened { event }) => {
            match event.get("session").and_then(|s| s.as_u64()) {
                Some(number) => store
                    .session_of_record(wanted, number)?
                    .map(|s| EntrySession {
                        id: s.id,
                        server: s.server,
                        agent: AgentName {
                            client: s.agent.client,
                            process: s.agent.process,
                            cwd: s.agent.cwd,
                        },
                    }),
                None => None,
            }
        }
        (None, AuditBody::Sealed { .. }) => None,
    };
    Ok(Some(AuditEntry {
        seq,
        time: header.as_ref().map_or(row.time, |h| h.time().as_millis()),
        kind: header
            .as_ref()
            .map_or(row.kind.clone(), |h| h.kind().as_str().to_owned()),
        version: header.as_ref().map_or(0, |h| h.version()),
        hash: ChainHash::from_slice(&row.hash)
            .map_or_else(|_| "(malformed)".to_owned(), |h| h.to_string()),
        problem,
        body,
        call,
        session,
    }))
}

/// A stored audit row, owned.
struct Row {
    time: i64,
    kind: String,
    header: Vec<u8>,
    sealed: Vec<u8>,
    hash: Vec<u8>,
}

/// Verifies one record against the previous one's hash (the audit crate's verifier, resumed
/// there), and that the index columns agree with its header.
fn check(seq: u64, previous: Option<&[u8]>, raw: RawRecord<'_>, row: &Row) -> Option<String> {
    let mut verifier = match (seq, previous) {
        (1, _) => Verifier::new(),
        (_, Some(hash)) => match ChainHash::from_slice(hash) {
            Ok(hash) => Verifier::resume(Head::new(Seq::new(seq - 1), hash)),
            Err(e) => return Some(format!("the previous record's hash is malformed: {e}")),
        },
        (_, None) => return Some(format!("record {} is missing", seq - 1)),
    };
    if let Err(e) = verifier.push(raw) {
        return Some(format!("{} ({})", e, e.code()));
    }
    match postern_audit::Header::decode(&row.header) {
        Ok(h) if h.time().as_millis() == row.time && h.kind().as_str() == row.kind => None,
        Ok(_) => Some("the time or kind column disagrees with the record's header".into()),
        Err(e) => Some(e.to_string()),
    }
}
