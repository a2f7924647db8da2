//! The rows of grants, approvals and credential uses an event adds or completes.

use postern_domain::{AnswerChannel, ApprovalId, ExecutionEpoch, Grant};
use rusqlite::{OptionalExtension, Transaction, params};

use super::At;
use crate::StoreError;

/// Records a grant under journal session `session` (idempotent: a rebuild over rows that
/// survived replaces them).
pub(super) fn insert_grant(
    tx: &Transaction<'_>,
    seq: i64,
    session: i64,
    grant: &Grant,
) -> Result<(), StoreError> {
    let json = |what: &str, value: Result<String, serde_json::Error>| {
        value.map_err(|e| StoreError::Unencodable {
            what: format!("grant {} {what}", grant.id),
            why: e.to_string(),
        })
    };
    let tools = json("tools", serde_json::to_string(&grant.tool_scope))?;
    let credentials = json(
        "credentials",
        serde_json::to_string(&grant.credential_scope),
    )?;
    let end = json("end", serde_json::to_string(&grant.end))?;
    tx.prepare_cached(
        "INSERT INTO journal_grants
            (grant, session, server, epoch, tools, credentials, end_kind, issued, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (grant) DO UPDATE SET
            session = excluded.session, server = excluded.server, epoch = excluded.epoch,
            tools = excluded.tools, credentials = excluded.credentials,
            end_kind = excluded.end_kind, issued = excluded.issued, ended = NULL,
            reason = NULL, ended_seq = NULL, seq = excluded.seq",
    )?
    .execute(params![
        grant.id.to_string(),
        session,
        grant.server_label.as_str(),
        grant.execution_epoch.to_string(),
        tools,
        credentials,
        end,
        grant.issued_at as i64,
        seq
    ])?;
    Ok(())
}

/// How an approval request ended.
pub(super) enum Answer<'a> {
    /// A person approved, with the grant it gave, if any.
    Granted(Option<&'a str>),
    /// A person denied.
    Denied,
    /// Nobody answered: the code the call got.
    Expired(&'a str),
}

/// The approval request answered in record `at`: how, the grant it gave, and where the person
/// answered (`by`). The first answer is the one that counts.
pub(super) fn answered(
    tx: &Transaction<'_>,
    at: At,
    approval: &ApprovalId,
    answer: Answer<'_>,
    by: Option<AnswerChannel>,
) -> Result<(), StoreError> {
    let (answer, code, grant) = match answer {
        Answer::Granted(grant) => ("granted", None, grant),
        Answer::Denied => ("denied", Some("approval_denied"), None),
        Answer::Expired(code) => ("expired", Some(code), None),
    };
    tx.prepare_cached(
        "UPDATE journal_approvals SET answered = ?2, answer = ?3, code = ?4, grant = ?5,
                                      answer_seq = ?6, channel = ?7
         WHERE approval = ?1 AND answered IS NULL",
    )?
    .execute(params![
        approval.to_string(),
        at.time,
        answer,
        code,
        grant,
        at.seq,
        by.map(AnswerChannel::as_str)
    ])?;
    Ok(())
}

/// The oldest approval request of `tool` in journal session `session` that no call is linked
/// to yet and whose `condition` (on `?3`, `value`) holds: the one a call just decided came
/// from. The partial index of unlinked requests serves it.
pub(super) fn open_approval(
    tx: &Transaction<'_>,
    session: i64,
    tool: &str,
    condition: &'static str,
    value: &str,
) -> Result<Option<String>, StoreError> {
    Ok(tx
        .prepare_cached(&format!(
            "SELECT approval FROM journal_approvals
             WHERE session = ?1 AND tool = ?2 AND activity IS NULL AND {condition}
             ORDER BY requested, seq LIMIT 1"
        ))?
        .query_row(params![session, tool, value], |r| r.get(0))
        .optional()?)
}

/// What the broker did with a request carrying a credential's placeholder.
#[derive(Clone, Copy)]
pub(super) enum Used {
    /// Put the value in (a host of the credential).
    Sent,
    /// Refused it (another host).
    Refused,
}

/// Counts one request of `server` toward `host` for each of `credentials`.
pub(super) fn credential_used(
    tx: &Transaction<'_>,
    time: i64,
    server: &postern_domain::ServerLabel,
    epoch: Option<ExecutionEpoch>,
    credentials: &[String],
    host: &str,
    used: Used,
) -> Result<(), StoreError> {
    let (uses, leaks) = match used {
        Used::Sent => (1, 0),
        Used::Refused => (0, 1),
    };
    let epoch = epoch.map(|e| e.to_string());
    let mut upsert = tx.prepare_cached(
        "INSERT INTO journal_credential_uses
            (credential, server, host, uses, leaks, first, last, last_epoch)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)
         ON CONFLICT (credential, server, host) DO UPDATE SET
            uses = uses + excluded.uses,
            leaks = leaks + excluded.leaks,
            first = min(first, excluded.first),
            last = max(last, excluded.last),
            last_epoch = CASE WHEN excluded.last >= last THEN excluded.last_epoch ELSE last_epoch END",
    )?;
    for credential in credentials {
        upsert.execute(params![
            credential,
            server.as_str(),
            host,
            uses,
            leaks,
            time,
            epoch
        ])?;
    }
    Ok(())
}
