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

use super::{SPANS, journal_meta};
use crate::StoreError;

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

    /// The journal id of `session` in the current run, opening a row if the log has none yet;
    /// the session was seen at `at`.
    fn session(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        session: u64,
        server: &str,
    ) -> Result<i64, StoreError> {
        let found: Option<i64> = match self.known.ids.get(&(self.run, session)) {
            Some(id) => Some(*id),
            None => tx
                .prepare_cached("SELECT id FROM journal_sessions WHERE run = ?1 AND session = ?2")?
                .query_row(params![self.run, session as i64], |r| r.get(0))
                .optional()?,
        };
        let id = match found {
            Some(id) => id,
            None => {
                tx.prepare_cached(
                    "INSERT INTO journal_sessions (id, run, session, server, started, status, last_time)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?5)",
                )?
                .execute(params![at.seq, self.run, session as i64, server, at.time])?;
                at.seq
            }
        };
        self.known.ids.insert((self.run, session), id);
        self.seen(id, at.time);
        Ok(id)
    }

    /// Session `session` (a journal id) is named by a record at `time`: what this transaction
    /// adds to its row.
    fn seen(&mut self, session: i64, time: i64) -> &mut SessionTally {
        let tally = self
            .pending
            .sessions
            .entry(session)
            .or_insert(SessionTally {
                last_time: time,
                ..SessionTally::default()
            });
        tally.last_time = tally.last_time.max(time);
        tally
    }

    /// Counts one more of `what` in session `session`'s row, named at `time`.
    fn tally(&mut self, session: i64, time: i64, what: Tally) {
        let tally = self.seen(session, time);
        match what {
            Tally::Calls => tally.calls += 1,
            Tally::Denied => tally.denied += 1,
            Tally::Failed => tally.failed += 1,
            Tally::Approvals => tally.approvals += 1,
        }
    }

    /// Session `session` uses `epoch` (first named by record `at` unless it already did).
    fn epoch_used(
        &mut self,
        tx: &Transaction<'_>,
        session: i64,
        epoch: &ExecutionEpoch,
        at: At,
    ) -> Result<(), StoreError> {
        let epoch = epoch.to_string();
        if !self.known.session(session).epochs.contains(&epoch) {
            tx.prepare_cached(
                "INSERT OR IGNORE INTO journal_session_epochs
                    (session, epoch, seq, first_time, last_time)
                 VALUES (?1, ?2, ?3, ?4, ?4)",
            )?
            .execute(params![session, epoch, at.seq, at.time])?;
            self.known.session(session).epochs.insert(epoch.clone());
        }
        latest(&mut self.pending.epochs, (session, epoch), at.time);
        Ok(())
    }

    /// A record at `time` names `epoch` in session `session` (extends a known epoch only).
    fn epoch_seen(&mut self, session: i64, epoch: &ExecutionEpoch, time: i64) {
        latest(&mut self.pending.epochs, (session, epoch.to_string()), time);
    }

    /// Adds to the buckets of every span that hold `time`.
    fn count(&mut self, session: i64, time: i64, counts: Counts) {
        for span in SPANS {
            let start = time - time.rem_euclid(span);
            let total = self
                .pending
                .buckets
                .entry((session, span, start))
                .or_default();
            total.calls += counts.calls;
            total.refused += counts.refused;
            total.grants += counts.grants;
        }
    }

    /// One Activity row (written at [`Projector::save`]), counted in its session's buckets. A
    /// refusal is recorded complete (`refused`, its own result).
    fn insert_activity(
        &mut self,
        tx: &Transaction<'_>,
        at: At,
        call: Call<'_>,
    ) -> Result<(), StoreError> {
        let refused = call.refused;
        self.pending.activity.insert(
            at.seq,
            ActivityRow {
                time: at.time,
                session: call.named.session,
                server: call.named.server.to_owned(),
                epoch: call.epoch.map(str::to_owned),
                tool: call.named.tool.to_owned(),
                call: call.named.call.to_string(),
                decision: call.decision.to_owned(),
                outcome: refused.then(|| "refused".to_owned()),
                duration_ms: None,
                result_seq: refused.then_some(at.seq),
                authority: call.authority.map(str::to_owned),
                grant: call.grant.map(str::to_owned),
                approval: call.approval.map(str::to_owned),
            },
        );
        if let Some(approval) = call.approval {
            tx.prepare_cached("UPDATE journal_approvals SET activity = ?2 WHERE approval = ?1")?
                .execute(params![approval, at.seq])?;
        }
        self.count(
            call.named.session,
            at.time,
            Counts {
                calls: 1,
                refused: i64::from(refused),
                grants: 0,
            },
        );
        Ok(())
    }

    /// Writes the gathered Activity rows, times and counts.
    fn flush(&mut self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        let pending = std::mem::take(&mut self.pending);
        let mut activity = tx.prepare_cached(
            "INSERT INTO journal_activity
                (seq, time, session, server, epoch, tool, call, decision, outcome, duration_ms,
                 result_seq, authority, grant, approval)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )?;
        for (seq, row) in pending.activity {
            activity.execute(params![
                seq,
                row.time,
                row.session,
                row.server,
                row.epoch,
                row.tool,
                row.call,
                row.decision,
                row.outcome,
                row.duration_ms,
                row.result_seq,
                row.authority,
                row.grant,
                row.approval,
            ])?;
        }
        let mut sessions = tx.prepare_cached(
            "UPDATE journal_sessions SET last_time = max(coalesce(last_time, ?2), ?2),
                calls = calls + ?3, denied = denied + ?4, failed = failed + ?5,
                approvals = approvals + ?6
             WHERE id = ?1",
        )?;
        for (id, t) in pending.sessions {
            sessions.execute(params![
                id,
                t.last_time,
                t.calls,
                t.denied,
                t.failed,
                t.approvals
            ])?;
        }
        let mut epochs = tx.prepare_cached(
            "UPDATE journal_session_epochs SET last_time = max(coalesce(last_time, ?3), ?3)
             WHERE session = ?1 AND epoch = ?2",
        )?;
        for ((session, epoch), time) in pending.epochs {
            epochs.execute(params![session, epoch, time])?;
        }
        let mut buckets = tx.prepare_cached(
            "INSERT INTO journal_activity_buckets (session, span, start, calls, refused, grants)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (session, span, start) DO UPDATE SET
                calls = calls + excluded.calls, refused = refused + excluded.refused,
                grants = grants + excluded.grants",
        )?;
        for ((session, span, start), c) in pending.buckets {
            buckets.execute(params![session, span, start, c.calls, c.refused, c.grants])?;
        }
        Ok(())
    }
}

impl Known {
    fn session(&mut self, id: i64) -> &mut KnownSession {
        self.sessions.entry(id).or_default()
    }

    /// Forgets session `session` of run `run` (journal id `id`), which ended.
    fn forget(&mut self, run: i64, session: u64, id: i64) {
        self.ids.remove(&(run, session));
        self.sessions.remove(&id);
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
enum Answer<'a> {
    /// A person approved, with the grant it gave, if any.
    Granted(Option<&'a str>),
    /// A person denied.
    Denied,
    /// Nobody answered: the code the call got.
    Expired(&'a str),
}

/// The approval request answered in record `at`: how, the grant it gave, and where the person
/// answered (`by`). The first answer is the one that counts.
fn answered(
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
fn open_approval(
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
enum Used {
    /// Put the value in (a host of the credential).
    Sent,
    /// Refused it (another host).
    Refused,
}

/// Counts one request of `server` toward `host` for each of `credentials`.
fn credential_used(
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
