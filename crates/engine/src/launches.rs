//! Launches numbered per server ("launch 7 · started 21:09"), for every view that shows an
//! execution epoch to a person: status, the Permissions page, the approval card.
//!
//! The numbers come from the journal ([`Store::launch_number`], which says why the journal
//! and not a table of their own). They are read only while the audit log is being written:
//! otherwise the journal misses this run's launches, and every new one would count as the
//! one after the last journaled, so the views show the epoch without a number instead.
//!
//! Live sessions get their journal id here the same way: the number Activity and the
//! timeline show for them.

use std::sync::Mutex;

use postern_domain::{ExecutionEpoch, ServerLabel};
use postern_store::Store;

use crate::AuditState;
use crate::api::{JournalIds, Launches};

/// The numbers of `launches` (server and epoch), when the audit log is `ready`.
pub(crate) fn numbered<'a>(
    store: &Mutex<Store>,
    audit: &AuditState,
    launches: impl IntoIterator<Item = (&'a ServerLabel, ExecutionEpoch)>,
) -> Launches {
    if !matches!(audit, AuditState::Ready) {
        return Launches::new();
    }
    let Ok(store) = store.lock() else {
        return Launches::new();
    };
    let mut numbers = Launches::new();
    for (server, epoch) in launches {
        if numbers.contains_key(&epoch) {
            continue;
        }
        match store.launch_number(server, epoch) {
            Ok(n) => {
                numbers.insert(epoch, n);
            }
            Err(e) => tracing::warn!(%server, %epoch, "cannot number the launch: {e}"),
        }
    }
    numbers
}

/// The journal ids of this engine's running sessions, by session number and server (see
/// [`Store::current_run_sessions`]), when the audit log is `ready`: the one session number
/// every view shows. Empty otherwise (the journal lacks this run).
pub(crate) fn journal_ids(store: &Mutex<Store>, audit: &AuditState) -> JournalIds {
    if !matches!(audit, AuditState::Ready) {
        return JournalIds::new();
    }
    let Ok(store) = store.lock() else {
        return JournalIds::new();
    };
    store.current_run_sessions().unwrap_or_else(|e| {
        tracing::warn!("cannot read the sessions' journal ids: {e}");
        JournalIds::new()
    })
}
