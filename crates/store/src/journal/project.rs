//! Writing the journals: each audit event, plaintext, becomes journal rows (see the parent
//! module for the tables).

use postern_domain::decision::Authority;
use postern_domain::{AuditEvent, Grant};
use rusqlite::{OptionalExtension, Transaction, params};

use super::meta_int;
use crate::StoreError;

/// Writes journal rows for events, tracking how far it got and the current engine run.
#[derive(Debug, Clone)]
pub(crate) struct Projector {
    seq: i64,
    run: i64,
}

impl Projector {
    pub(crate) fn load(conn: &rusqlite::Connection) -> Result<Self, StoreError> {
        Ok(Projector {
            seq: meta_int(conn, "journal.seq")?,
            run: meta_int(conn, "journal.run")?,
        })
    }

    /// Empties the journals (inside `tx`).
    pub(crate) fn cleared(tx: &Transaction<'_>) -> Result<Self, StoreError> {
        tx.execute_batch(
            "DELETE FROM journal_activity;
             DELETE FROM journal_session_epochs;
             DELETE FROM journal_grants;
             DELETE FROM journal_sessions;",
        )?;
        Ok(Projector { seq: 0, run: 0 })
    }

    pub(crate) fn seq(&self) -> i64 {
        self.seq
    }

    pub(crate) fn save(&self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?;
        stmt.execute(params!["journal.seq", self.seq.to_string()])?;
        stmt.execute(params!["journal.run", self.run.to_string()])?;
        Ok(())
    }

    /// Projects one event (record `seq`, written at `time`).
    pub(crate) fn apply(
        &mut self,
        tx: &Transaction<'_>,
        seq: i64,
        time: i64,
        event: &AuditEvent,
    ) -> Result<(), StoreError> {
        let at = At { seq, time };
        match event {
            AuditEvent::EngineStarted { .. } => {
                tx.execute(
                    "UPDATE journal_sessions SET status = 'interrupted' WHERE status = 'running'",
                    [],
                )?;
                self.run = seq;
            }
            AuditEvent::EngineStopped { reason } => {
                tx.execute(
                    "UPDATE journal_sessions SET status = 'ended', ended = ?1, reason = ?2
                     WHERE status = 'running'",
                    params![time, format!("engine stopped: {reason}")],
                )?;
            }
            AuditEvent::SessionStarted {
                session,
                server,
                client,
                agent,
            } => {
                let agent = agent
                    .as_ref()
                    .map(|a| format!("{} (pid {})", a.chain_text(), a.pid));
                tx.prepare_cached(
                    "INSERT INTO journal_sessions (id, run, session, server, client, agent, started, status)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running')
                     ON CONFLICT (run, session) DO UPDATE SET client = excluded.client,
                                                              agent = excluded.agent",
                )?
                .execute(params![seq, self.run, *session as i64, server.as_str(), client, agent, time])?;
            }
            AuditEvent::SessionEnded {
                session,
                server,
                reason,
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                tx.prepare_cached(
                    "UPDATE journal_sessions SET status = 'ended', ended = ?2, reason = ?3
                     WHERE id = ?1",
                )?
                .execute(params![id, time, reason])?;
            }
            AuditEvent::ServerStarted { session, record } => {
                let id = self.session(tx, at, *session, record.server_label.as_str())?;
                epoch_used(tx, id, &record.epoch.to_string(), seq)?;
            }
            AuditEvent::ServerReplaced {
                session,
                server,
                new_epoch: Some(epoch),
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                epoch_used(tx, id, &epoch.to_string(), seq)?;
            }
            AuditEvent::ToolCallIntent {
                session,
                server,
                epoch,
                call,
                tool,
                authority,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                let epoch = epoch.to_string();
                epoch_used(tx, id, &epoch, seq)?;
                let decision = match authority {
                    Some(Authority::Observed) => "observed",
                    Some(Authority::Grant(_)) | None => "allowed",
                };
                insert_activity(
                    tx,
                    at,
                    id,
                    server.as_str(),
                    Some(&epoch),
                    tool,
                    call,
                    decision,
                )?;
                bump(tx, id, "calls")?;
            }
            AuditEvent::ToolCallResult {
                session,
                server,
                epoch,
                call,
                tool,
                outcome,
                duration_ms,
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                let call_text = call.to_string();
                let pending: Option<i64> = tx
                    .prepare_cached(
                        "SELECT seq FROM journal_activity
                         WHERE session = ?1 AND call = ?2 AND result_seq IS NULL
                         ORDER BY seq DESC LIMIT 1",
                    )?
                    .query_row(params![id, call_text], |r| r.get(0))
                    .optional()?;
                let row = match pending {
                    Some(row) => row,
                    None => {
                        // A result with no intent on record: shown, never hidden.
                        let epoch = epoch.to_string();
                        insert_activity(
                            tx,
                            at,
                            id,
                            server.as_str(),
                            Some(&epoch),
                            tool,
                            call,
                            "no_intent",
                        )?;
                        seq
                    }
                };
                let outcome = serde_json::to_value(outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".into());
                tx.prepare_cached(
                    "UPDATE journal_activity SET outcome = ?2, duration_ms = ?3, result_seq = ?4
                     WHERE seq = ?1",
                )?
                .execute(params![row, outcome, *duration_ms as i64, seq])?;
                if outcome != "ok" {
                    bump(tx, id, "failed")?;
                }
            }
            AuditEvent::AuthorizationDenied {
                session,
                server,
                epoch,
                call,
                tool,
                code,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                let epoch = epoch.map(|e| e.to_string());
                insert_activity(
                    tx,
                    at,
                    id,
                    server.as_str(),
                    epoch.as_deref(),
                    tool,
                    call,
                    code,
                )?;
                tx.prepare_cached(
                    "UPDATE journal_activity SET outcome = 'refused', result_seq = seq WHERE seq = ?1",
                )?
                .execute([seq])?;
                bump(tx, id, "denied")?;
            }
            AuditEvent::SessionApproved {
                session,
                server,
                by,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                tx.prepare_cached("UPDATE journal_sessions SET approved = ?2 WHERE id = ?1")?
                    .execute(params![id, by])?;
            }
            AuditEvent::ApprovalRequested {
                session, server, ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                bump(tx, id, "approvals")?;
            }
            AuditEvent::ApprovalGranted {
                session,
                grant: Some(grant),
                ..
            } => {
                let id = self.session(tx, at, *session, grant.server_label.as_str())?;
                insert_grant(tx, seq, id, grant)?;
            }
            AuditEvent::GrantEnded { grant, reason } => {
                // The first end is the one that counts: a grant does not end twice.
                tx.prepare_cached(
                    "UPDATE journal_grants SET ended = ?2, reason = ?3
                     WHERE grant = ?1 AND ended IS NULL",
                )?
                .execute(params![grant.to_string(), time, reason])?;
            }
            // Refusals that reach the agent are `authorization_denied` records, already
            // journaled; the vault's state is in the log alone.
            AuditEvent::ApprovalGranted { grant: None, .. }
            | AuditEvent::ApprovalDenied { .. }
            | AuditEvent::ApprovalExpired { .. }
            | AuditEvent::VaultLocked { .. }
            | AuditEvent::VaultUnlocked
            | AuditEvent::CredentialReleased { .. }
            | AuditEvent::CredentialWithheld { .. }
            | AuditEvent::ServerReplaced { .. }
            | AuditEvent::ArtifactsChanged { .. }
            | AuditEvent::CatalogRefreshed { .. }
            | AuditEvent::CatalogPresented { .. }
            | AuditEvent::ConfigChanged { .. } => {}
        }
        self.seq = seq;
        Ok(())
    }

    /// The journal id of `session` in the current run, opening a row if the log has none yet.
    fn session(
        &self,
        tx: &Transaction<'_>,
        at: At,
        session: u64,
        server: &str,
    ) -> Result<i64, StoreError> {
        let found: Option<i64> = tx
            .prepare_cached("SELECT id FROM journal_sessions WHERE run = ?1 AND session = ?2")?
            .query_row(params![self.run, session as i64], |r| r.get(0))
            .optional()?;
        if let Some(id) = found {
            return Ok(id);
        }
        tx.prepare_cached(
            "INSERT INTO journal_sessions (id, run, session, server, started, status)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running')",
        )?
        .execute(params![at.seq, self.run, session as i64, server, at.time])?;
        Ok(at.seq)
    }
}

#[derive(Debug, Clone, Copy)]
struct At {
    seq: i64,
    time: i64,
}

#[allow(clippy::too_many_arguments, reason = "one column each")]
fn insert_activity(
    tx: &Transaction<'_>,
    at: At,
    session: i64,
    server: &str,
    epoch: Option<&str>,
    tool: &str,
    call: &serde_json::Value,
    decision: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO journal_activity (seq, time, session, server, epoch, tool, call, decision)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        at.seq,
        at.time,
        session,
        server,
        epoch,
        tool,
        call.to_string(),
        decision
    ])?;
    Ok(())
}

/// Records a grant under journal session `session` (idempotent: a rebuild over rows that
/// survived replaces them).
fn insert_grant(
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
            reason = NULL, seq = excluded.seq",
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

fn epoch_used(tx: &Transaction<'_>, session: i64, epoch: &str, seq: i64) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO journal_session_epochs (session, epoch, seq) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![session, epoch, seq])?;
    Ok(())
}

fn bump(tx: &Transaction<'_>, session: i64, column: &'static str) -> Result<(), StoreError> {
    tx.prepare_cached(&format!(
        "UPDATE journal_sessions SET {column} = {column} + 1 WHERE id = ?1"
    ))?
    .execute([session])?;
    Ok(())
}
