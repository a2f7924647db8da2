//! Launches numbered per server: "launch 7" of `inventory` is the seventh execution epoch of
//! that label the audit log knows of.
//!
//! The number is derived from the journal (`journal_session_epochs` joined with
//! `journal_sessions.server`), not kept in a table of its own written at launch, because the
//! journal is a projection of the audit log: it survives an engine restart (it is in
//! `postern-journals.db`), and a journal rebuilt from the log holds the same epochs, so every launch
//! keeps its number; a table of its own would be a second record of launches that the log
//! does not vouch for and that a rebuild could not restore. Epochs are ULIDs made at launch
//! from the launch time, so their text order is launch order: a launch's number is one more
//! than the count of its server's epochs before it, which is right even before the audit
//! writer has committed the launch's own `server_started` record.

use std::collections::HashMap;

use postern_domain::{ExecutionEpoch, ServerLabel};
use rusqlite::params;

use crate::{Store, StoreError};

impl Store {
    /// Which launch of `server` `epoch` is: 1 for the first epoch of that label the journal
    /// holds, counting launches in every agent session and every engine run.
    pub fn launch_number(
        &self,
        server: &ServerLabel,
        epoch: ExecutionEpoch,
    ) -> Result<u32, StoreError> {
        self.launch_of(server.as_str(), &epoch.to_string())
    }

    /// [`Store::launch_number`] of an epoch as the journal spells it.
    pub(crate) fn launch_of(&self, server: &str, epoch: &str) -> Result<u32, StoreError> {
        let before: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(DISTINCT e.epoch) FROM journal_session_epochs e
                 JOIN journal_sessions s ON s.id = e.session
                 WHERE s.server = ?1 AND e.epoch < ?2",
            )?
            .query_row(params![server, epoch], |r| r.get(0))?;
        Ok(u32::try_from(before).unwrap_or(u32::MAX - 1) + 1)
    }

    /// The journal ids of the running sessions of the newest engine run (the one writing
    /// the log, when an engine runs), by the engine's session number and server: the number
    /// Activity, the timeline and `postern sessions` show for the session the engine numbers
    /// `#3`. A session whose `session_started` record is not committed yet is not there.
    ///
    /// Until the running engine's own `engine_started` record is committed (its first, one
    /// group commit after it opened the log) the newest run is the previous one, whose
    /// sessions are over unless it crashed: a session of a crashed run with the same number
    /// and server may be found for that moment.
    pub fn current_run_sessions(&self) -> Result<HashMap<(u64, String), i64>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT session, server, id FROM journal_sessions
             WHERE run = (SELECT coalesce(max(seq), 0) FROM audit_log
                          WHERE kind = 'engine_started')
               AND status = 'running'",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(((r.get::<_, i64>(0)? as u64, r.get(1)?), r.get(2)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
