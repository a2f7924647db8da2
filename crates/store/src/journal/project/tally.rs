//! What the projector gathers in memory during a transaction and writes once in it: the
//! sessions' and epochs' last times, the per-span counts, the Activity rows.

use postern_domain::ExecutionEpoch;
use rusqlite::{OptionalExtension, Transaction, params};

use super::super::SPANS;
use super::{
    ActivityRow, At, Call, Counts, Known, KnownSession, Projector, SessionTally, Tally, latest,
};
use crate::StoreError;

impl Projector {
    /// The journal id of `session` in the current run, opening a row if the log has none yet;
    /// the session was seen at `at`.
    pub(super) fn session(
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
    pub(super) fn seen(&mut self, session: i64, time: i64) -> &mut SessionTally {
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
    pub(super) fn tally(&mut self, session: i64, time: i64, what: Tally) {
        let tally = self.seen(session, time);
        match what {
            Tally::Calls => tally.calls += 1,
            Tally::Denied => tally.denied += 1,
            Tally::Failed => tally.failed += 1,
            Tally::Approvals => tally.approvals += 1,
        }
    }

    /// Session `session` uses `epoch` (first named by record `at` unless it already did).
    pub(super) fn epoch_used(
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
    pub(super) fn epoch_seen(&mut self, session: i64, epoch: &ExecutionEpoch, time: i64) {
        latest(&mut self.pending.epochs, (session, epoch.to_string()), time);
    }

    /// Adds to the buckets of every span that hold `time`.
    pub(super) fn count(&mut self, session: i64, time: i64, counts: Counts) {
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
    pub(super) fn insert_activity(
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
    pub(super) fn flush(&mut self, tx: &Transaction<'_>) -> Result<(), StoreError> {
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
    pub(super) fn session(&mut self, id: i64) -> &mut KnownSession {
        self.sessions.entry(id).or_default()
    }

    /// Forgets session `session` of run `run` (journal id `id`), which ended.
    pub(super) fn forget(&mut self, run: i64, session: u64, id: i64) {
        self.ids.remove(&(run, session));
        self.sessions.remove(&id);
    }
}
