//! Writing the journals: each audit event, plaintext, becomes journal rows (see the parent
//! module for the tables).
//!
//! What changes with nearly every event (when a session and an epoch were last seen, the
//! per-span call counts) is gathered in memory and written once per transaction, in
//! [`Projector::save`]: a batch of many calls costs one row update per session, epoch and
//! bucket it touched, not one per call; an Activity row is written there too, once, with its
//! result when that came in the same transaction (no update of a row just inserted). What it
//! looks up again and again (a session's journal id, the epochs it already named, the Activity
//! row a result completes) it keeps in memory ([`Known`]) while the row is in use, and asks the
//! database only when that has forgotten.

use std::collections::{BTreeMap, HashMap, HashSet};

use postern_domain::decision::Authority;
use postern_domain::{
    AgentIdentity, AnswerChannel, ApprovalId, AuditEvent, CallOutcome, ExecutionEpoch, Grant,
};
use rusqlite::{OptionalExtension, Transaction, params};

use super::journal_meta;
use crate::StoreError;

mod rows;
mod tally;
use rows::{Answer, Used, answered, credential_used, insert_grant, open_approval};

/// Writes journal rows for events, tracking how far it got and the current engine run.
#[derive(Debug)]
pub(crate) struct Projector {
    seq: i64,
    run: i64,
    pending: Pending,
    known: Known,
}

/// Updates gathered during a transaction, written by [`Projector::save`].
#[derive(Debug, Default)]
struct Pending {
    /// Journal session id -> the latest record time naming it, and counts to add.
    sessions: BTreeMap<i64, SessionTally>,
    /// (journal session id, epoch) -> the latest record time naming the epoch in it.
    epochs: BTreeMap<(i64, String), i64>,
    /// (journal session id, span, start) -> counts to add.
    buckets: BTreeMap<(i64, i64, i64), Counts>,
    /// Activity rows not written yet, by seq (their results filled in as they come).
    activity: BTreeMap<i64, ActivityRow>,
}

/// An Activity row as it will be inserted.
#[derive(Debug)]
struct ActivityRow {
    time: i64,
    session: i64,
    server: String,
    epoch: Option<String>,
    tool: String,
    call: String,
    decision: String,
    outcome: Option<String>,
    duration_ms: Option<i64>,
    result_seq: Option<i64>,
    authority: Option<String>,
    grant: Option<String>,
    approval: Option<String>,
}

/// What a transaction adds to a session's row.
#[derive(Debug, Clone, Copy, Default)]
struct SessionTally {
    /// The latest record time naming it.
    last_time: i64,
    /// Intents (forwarded calls).
    calls: i64,
    /// Calls refused before forwarding.
    denied: i64,
    /// Results other than `ok`.
    failed: i64,
    /// Approval requests raised.
    approvals: i64,
}

/// A session's count [`SessionTally`] gathers.
#[derive(Debug, Clone, Copy)]
enum Tally {
    Calls,
    Denied,
    Failed,
    Approvals,
}

/// Rows the projector looked up or wrote, kept so that the next event naming them does not
/// ask the database again. A hint only: whatever it has forgotten (after a failed
/// transaction, a restart, a session that ended) is read from the tables, which stay the
/// truth. It forgets a session when the session ends, and everything at an engine start.
#[derive(Debug, Default)]
struct Known {
    /// (engine run, the engine's session number) -> journal session id.
    ids: HashMap<(i64, u64), i64>,
    /// Journal session id -> what is known of it.
    sessions: HashMap<i64, KnownSession>,
}

#[derive(Debug, Default)]
struct KnownSession {
    /// Epochs it has a `journal_session_epochs` row for.
    epochs: HashSet<String>,
    /// Call id (its JSON text) -> the seq of the newest Activity row of that id waiting for
    /// its result.
    open: HashMap<String, i64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    calls: i64,
    refused: i64,
    grants: i64,
}

impl Projector {
    pub(crate) fn load(conn: &rusqlite::Connection) -> Result<Self, StoreError> {
        Ok(Projector {
            seq: journal_meta(conn, "seq")?,
            run: journal_meta(conn, "run")?,
            pending: Pending::default(),
            known: Known::default(),
        })
    }

    /// Empties the journals (inside `tx`).
    pub(crate) fn cleared(tx: &Transaction<'_>) -> Result<Self, StoreError> {
        tx.execute_batch(
            "DELETE FROM journal_activity;
             DELETE FROM journal_activity_buckets;
             DELETE FROM journal_session_epochs;
             DELETE FROM journal_grants;
             DELETE FROM journal_approvals;
             DELETE FROM journal_credential_uses;
             DELETE FROM journal_sessions;",
        )?;
        Ok(Projector {
            seq: 0,
            run: 0,
            pending: Pending::default(),
            known: Known::default(),
        })
    }

    /// Where it stands before a transaction, for [`Projector::restore`] should it fail.
    pub(crate) fn checkpoint(&self) -> (i64, i64) {
        (self.seq, self.run)
    }

    /// Back to `checkpoint` after a failed transaction: what it gathered and learned in it
    /// is dropped (the rows it learned of were rolled back), the rest forgotten too.
    pub(crate) fn restore(&mut self, (seq, run): (i64, i64)) {
        self.seq = seq;
        self.run = run;
        self.pending = Pending::default();
        self.known = Known::default();
    }

    pub(crate) fn seq(&self) -> i64 {
        self.seq
    }

    /// Writes what was gathered in this transaction and how far the journals go (inside
    /// `tx`, before it commits).
    pub(crate) fn save(&mut self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        self.flush(tx)?;
        let mut stmt = tx.prepare_cached(
            "INSERT INTO journal_meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?;
        stmt.execute(params!["seq", self.seq])?;
        stmt.execute(params!["run", self.run])?;
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
                self.known = Known::default();
            }
            AuditEvent::EngineStopped { reason } => {
                tx.execute(
                    "UPDATE journal_sessions SET status = 'ended', ended = ?1, reason = ?2,
                                                 last_time = max(coalesce(last_time, ?1), ?1)
                     WHERE status = 'running'",
                    params![time, format!("engine stopped: {reason}")],
                )?;
            }
            AuditEvent::SessionStarted {
                session,
                server,
                client,
                agent,
            } => self.on_session_started(
                tx,
                at,
                *session,
                server.as_str(),
                client.as_deref(),
                agent.as_ref(),
            )?,
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
                self.known.forget(self.run, *session, id);
            }
            AuditEvent::ServerStarted { session, record } => {
                let id = self.session(tx, at, *session, record.server_label.as_str())?;
                self.epoch_used(tx, id, &record.epoch, at)?;
            }
            AuditEvent::ServerReplaced {
                session,
                server,
                old_epoch,
                new_epoch,
                ..
            } => {
                // The old epoch ends here; the new one, when already known, starts here.
                let id = self.session(tx, at, *session, server.as_str())?;
                self.epoch_seen(id, old_epoch, time);
                if let Some(epoch) = new_epoch {
                    self.epoch_used(tx, id, epoch, at)?;
                }
            }
            AuditEvent::ArtifactsChanged {
                session,
                server,
                epoch,
                ..
            }
            | AuditEvent::CatalogRefreshed {
                session,
                server,
                epoch,
                ..
            }
            | AuditEvent::CatalogPresented {
                session,
                server,
                epoch,
                ..
            }
            | AuditEvent::CredentialReleased {
                session,
                server,
                epoch,
                ..
            }
            | AuditEvent::CredentialWithheld {
                session,
                server,
                epoch,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                self.epoch_seen(id, epoch, time);
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
                let named = self.named(tx, at, *session, server.as_str(), tool, call)?;
                self.on_intent(tx, at, named, epoch, authority.as_ref())?;
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
                let named = self.named(tx, at, *session, server.as_str(), tool, call)?;
                self.on_result(tx, at, named, epoch, outcome, *duration_ms)?;
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
                let named = self.named(tx, at, *session, server.as_str(), tool, call)?;
                self.on_denied(tx, at, named, epoch.as_ref(), code)?;
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
                approval,
                session,
                server,
                epoch,
                tool,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                self.epoch_seen(id, epoch, time);
                self.tally(id, time, Tally::Approvals);
                tx.prepare_cached(
                    "INSERT INTO journal_approvals (approval, session, tool, requested, seq)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (approval) DO NOTHING",
                )?
                .execute(params![approval.to_string(), id, tool, time, seq])?;
            }
            AuditEvent::ApprovalGranted {
                approval,
                grant: None,
                by,
                ..
            } => answered(tx, at, approval, Answer::Granted(None), *by)?,
            AuditEvent::ApprovalDenied { approval, by, .. } => {
                answered(tx, at, approval, Answer::Denied, *by)?;
            }
            AuditEvent::ApprovalExpired { approval, code, .. } => {
                answered(tx, at, approval, Answer::Expired(code), None)?;
            }
            AuditEvent::ApprovalGranted {
                approval,
                session,
                grant: Some(grant),
                by,
                ..
            } => self.on_granted(tx, at, approval, *session, grant, *by)?,
            AuditEvent::GrantEnded { grant, reason } => {
                // The first end is the one that counts: a grant does not end twice.
                tx.prepare_cached(
                    "UPDATE journal_grants SET ended = ?2, reason = ?3, ended_seq = ?4
                     WHERE grant = ?1 AND ended IS NULL",
                )?
                .execute(params![grant.to_string(), time, reason, seq])?;
            }
            // Refusals that reach the agent are `authorization_denied` records, already
            // journaled; the vault's state is in the log alone.
            AuditEvent::VaultLocked { .. }
            | AuditEvent::VaultUnlocked
            | AuditEvent::ProofRefused { .. }
            | AuditEvent::ConfigTampered { .. }
            | AuditEvent::ConfigChanged { .. } => {}
            AuditEvent::CredentialSubstituted {
                server,
                epoch,
                credentials,
                host,
            } => credential_used(tx, time, server, *epoch, credentials, host, Used::Sent)?,
            AuditEvent::CredentialLeakAttempt {
                server,
                epoch,
                credentials,
                host,
            } => credential_used(tx, time, server, *epoch, credentials, host, Used::Refused)?,
        }
        self.seq = seq;
        Ok(())
    }

    /// A session opened: its row, with the agent that asked for it.
    fn on_session_started(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        session: u64,
        server: &str,
        client: Option<&str>,
        agent: Option<&AgentIdentity>,
    ) -> Result<(), StoreError> {
        let cwd = agent
            .and_then(|a| a.cwd.as_ref())
            .map(|c| c.display().to_string());
        let agent = agent.map(|a| format!("{} (pid {})", a.chain_text(), a.pid));
        tx.prepare_cached(
            "INSERT INTO journal_sessions
                (id, run, session, server, client, agent, cwd, started, status, last_time)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?8)
             ON CONFLICT (run, session) DO UPDATE SET client = excluded.client,
                agent = excluded.agent, cwd = excluded.cwd,
                last_time = max(coalesce(last_time, excluded.last_time), excluded.last_time)",
        )?
        .execute(params![
            at.seq,
            self.run,
            session as i64,
            server,
            client,
            agent,
            cwd,
            at.time
        ])?;
        Ok(())
    }

    /// A call forwarded: its Activity row, open for its result, on the authority it went on.
    fn on_intent(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        named: Named<'_>,
        epoch: &ExecutionEpoch,
        authority: Option<&Authority>,
    ) -> Result<(), StoreError> {
        let id = named.session;
        self.epoch_used(tx, id, epoch, at)?;
        let decision = match authority {
            Some(Authority::Observed) => "observed",
            Some(Authority::Grant(_) | Authority::Admitted) | None => "allowed",
        };
        let (authority, grant) = match authority {
            Some(Authority::Grant(grant)) => (Some("grant"), Some(grant.to_string())),
            Some(Authority::Observed) => (Some("observed"), None),
            Some(Authority::Admitted) => (Some("admitted"), None),
            None => (None, None),
        };
        // The call that raised the approval which gave this grant is its first use in the
        // session.
        let approval = match &grant {
            Some(grant) => open_approval(tx, id, named.tool, "grant = ?3", grant)?,
            None => None,
        };
        let epoch = epoch.to_string();
        self.insert_activity(
            tx,
            at,
            Call {
                epoch: Some(&epoch),
                decision,
                refused: false,
                authority,
                grant: grant.as_deref(),
                approval: approval.as_deref(),
                named,
            },
        )?;
        self.known
            .session(id)
            .open
            .insert(named.call.to_string(), at.seq);
        self.tally(id, at.time, Tally::Calls);
        Ok(())
    }

    /// A call's result: it completes the call's open Activity row (a result with no intent
    /// on record gets a row of its own: shown, never hidden).
    fn on_result(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        named: Named<'_>,
        epoch: &ExecutionEpoch,
        outcome: &CallOutcome,
        duration_ms: u64,
    ) -> Result<(), StoreError> {
        let id = named.session;
        self.epoch_seen(id, epoch, at.time);
        let row = match self.open_row(tx, named)? {
            Some(row) => row,
            None => {
                let epoch = epoch.to_string();
                self.insert_activity(
                    tx,
                    at,
                    Call {
                        epoch: Some(&epoch),
                        decision: "no_intent",
                        refused: false,
                        authority: None,
                        grant: None,
                        approval: None,
                        named,
                    },
                )?;
                at.seq
            }
        };
        let outcome = serde_json::to_value(outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "unknown".into());
        let failed = outcome != "ok";
        if let Some(unwritten) = self.pending.activity.get_mut(&row) {
            unwritten.outcome = Some(outcome);
            unwritten.duration_ms = Some(duration_ms as i64);
            unwritten.result_seq = Some(at.seq);
        } else {
            tx.prepare_cached(
                "UPDATE journal_activity SET outcome = ?2, duration_ms = ?3, result_seq = ?4
                 WHERE seq = ?1",
            )?
            .execute(params![row, outcome, duration_ms as i64, at.seq])?;
        }
        if failed {
            self.tally(id, at.time, Tally::Failed);
        }
        Ok(())
    }

    /// The seq of the newest Activity row of `named`'s call still waiting for its result:
    /// known from its intent, else among the rows this transaction has not written yet, else
    /// in the table.
    fn open_row(
        &mut self,
        tx: &Transaction<'_>,
        named: Named<'_>,
    ) -> Result<Option<i64>, StoreError> {
        let id = named.session;
        let call = named.call.to_string();
        let known = self
            .known
            .sessions
            .get_mut(&id)
            .and_then(|s| s.open.remove(&call));
        let unwritten = || {
            self.pending.activity.iter().rev().find_map(|(seq, row)| {
                (row.session == id && row.call == call && row.result_seq.is_none()).then_some(*seq)
            })
        };
        match known.or_else(unwritten) {
            Some(row) => Ok(Some(row)),
            None => Ok(tx
                .prepare_cached(
                    "SELECT seq FROM journal_activity
                     WHERE session = ?1 AND call = ?2 AND result_seq IS NULL
                     ORDER BY seq DESC LIMIT 1",
                )?
                .query_row(params![id, call], |r| r.get(0))
                .optional()?),
        }
    }

    /// A call refused before it was forwarded: a complete Activity row, tied to the approval
    /// request whose answer (or its absence) refused it.
    fn on_denied(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        named: Named<'_>,
        epoch: Option<&ExecutionEpoch>,
        code: &str,
    ) -> Result<(), StoreError> {
        let id = named.session;
        if let Some(epoch) = epoch {
            self.epoch_seen(id, epoch, at.time);
        }
        let epoch = epoch.map(ToString::to_string);
        // A refusal a person's answer (or its absence) decided: the oldest request of this
        // tool in the session that ended with this code and no call yet.
        let approval = match code {
            "approval_denied" | "approval_timeout" | "approval_expired" => {
                open_approval(tx, id, named.tool, "code = ?3", code)?
            }
            _ => None,
        };
        self.insert_activity(
            tx,
            at,
            Call {
                epoch: epoch.as_deref(),
                decision: code,
                refused: true,
                authority: None,
                grant: None,
                approval: approval.as_deref(),
                named,
            },
        )?;
        self.tally(id, at.time, Tally::Denied);
        Ok(())
    }

    /// An approval answered with a grant: the grant's row, counted in its session's buckets.
    fn on_granted(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        approval: &ApprovalId,
        session: u64,
        grant: &Grant,
        by: Option<AnswerChannel>,
    ) -> Result<(), StoreError> {
        let id = self.session(tx, at, session, grant.server_label.as_str())?;
        insert_grant(tx, at.seq, id, grant)?;
        answered(
            tx,
            at,
            approval,
            Answer::Granted(Some(&grant.id.to_string())),
            by,
        )?;
        self.count(
            id,
            grant.issued_at as i64,
            Counts {
                grants: 1,
                ..Counts::default()
            },
        );
        Ok(())
    }

    /// The call a record names, in its journal session (opened if the log has none yet).
    fn named<'a>(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        session: u64,
        server: &'a str,
        tool: &'a str,
        call: &'a serde_json::Value,
    ) -> Result<Named<'a>, StoreError> {
        Ok(Named {
            session: self.session(tx, at, session, server)?,
            server,
            tool,
            call,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct At {
    seq: i64,
    time: i64,
}

/// The call a record names, in the journal session it belongs to.
#[derive(Clone, Copy)]
struct Named<'a> {
    session: i64,
    server: &'a str,
    tool: &'a str,
    call: &'a serde_json::Value,
}

/// An Activity row's columns.
struct Call<'a> {
    named: Named<'a>,
    epoch: Option<&'a str>,
    /// `allowed`, `observed`, `no_intent`, or the refusal code.
    decision: &'a str,
    /// Refused before forwarding (an `authorization_denied` record).
    refused: bool,
    /// `grant`, `observed` or `admitted` for a call that went through on that authority.
    authority: Option<&'a str>,
    /// The grant it went under.
    grant: Option<&'a str>,
    /// The approval request it raised.
    approval: Option<&'a str>,
}

fn latest<K: Ord>(map: &mut BTreeMap<K, i64>, key: K, time: i64) {
    let entry = map.entry(key).or_insert(time);
    *entry = (*entry).max(time);
}
