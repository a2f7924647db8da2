//! The journals and the audit log from the window: the Sessions timeline over a window, pages
//! of the Activity and Sessions journals, one audit record for a clicked mark, and a full
//! verification of the log for the Integrity view. Every read is the engine's
//! (`postern_engine::journal`, `postern_engine::audit::verify`) on its own read-only
//! connection, off the async runtime's threads.

use postern_engine::EngineError;
use postern_engine::audit::{AnchorCheck, AuditError};
use postern_engine::journal::{
    ActivityFilter, ActivityRow, AuditEntry, SessionFilter, SessionRow, Timeline, TimelineQuery,
};
use serde::Serialize;
use ts_rs::TS;

use std::sync::Arc;

use crate::Desk;
use crate::commands::{CommandError, ErrorCode, blocking, running_home};

/// The timeline of a window: one lane per agent session, its epochs as bands, its marks (or,
/// when they do not fit, their counts per bucket). Zoom and pan are this query again over
/// another window.
pub async fn timeline(desk: &Arc<Desk>, query: TimelineQuery) -> Result<Timeline, CommandError> {
    let home = running_home(desk)?;
    blocking(move || postern_engine::journal::timeline(&home, &query).map_err(failed)).await
}

/// A page of the Activity journal, newest first.
pub async fn activity(
    desk: &Arc<Desk>,
    filter: ActivityFilter,
) -> Result<Vec<ActivityRow>, CommandError> {
    let home = running_home(desk)?;
    blocking(move || postern_engine::journal::activity(&home, &filter).map_err(failed)).await
}

/// A page of the Sessions journal, newest first.
pub async fn sessions_journal(
    desk: &Arc<Desk>,
    filter: SessionFilter,
) -> Result<Vec<SessionRow>, CommandError> {
    let home = running_home(desk)?;
    blocking(move || postern_engine::journal::sessions(&home, &filter).map_err(failed)).await
}

/// Audit record `seq`: its header, and its body while the vault is unlocked (the engine
/// decides; arguments shown by their shape). `null` when there is no such record.
pub async fn audit_entry(desk: &Arc<Desk>, seq: u64) -> Result<Option<AuditEntry>, CommandError> {
    let desk = Arc::clone(desk);
    blocking(move || {
        let shell = &desk.shell;
        let secrets = shell.secrets().ok_or_else(CommandError::no_engine)?;
        shell
            .with_engine(|engine| engine.audit_entry(seq, Some(&*secrets)))
            .ok_or_else(CommandError::no_engine)?
            .map_err(failed)
    })
    .await
}

/// What a full verification of the audit log found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(
    tag = "state",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Verification {
    /// Every record checked out.
    Verified {
        /// Records verified.
        #[ts(type = "number")]
        records: u64,
        /// The last record verified, `SEQ:HASH`.
        head: Option<String>,
        /// How the anchor in the keychain was checked.
        anchor: AnchorView,
        /// Whether every body was opened too.
        bodies_opened: bool,
        /// Why bodies were not opened, when they were not.
        key_note: Option<String>,
    },
    /// A record failed: the first bad one.
    Failed {
        /// Its sequence number.
        #[ts(type = "number")]
        seq: u64,
        /// The stable code (`audit_chain_broken`, `audit_log_truncated`, ...).
        code: String,
        /// What is wrong there.
        reason: String,
    },
}

/// How the anchor was checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum AnchorView {
    /// The log reaches the keychain's anchor, `SEQ:HASH`, and has its hash there.
    Checked {
        /// The anchor.
        head: String,
    },
    /// The anchor is that of an empty log.
    Empty,
    /// No keychain to ask: truncation and rollback were not checked.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// Verifies the whole audit log: structure, chain hashes and the keychain's anchor, and with
/// `openBodies` every body (slower: one key agreement per record). Read-only; the engine
/// keeps appending meanwhile.
pub async fn verify_audit(
    desk: &Arc<Desk>,
    open_bodies: bool,
) -> Result<Verification, CommandError> {
    let desk = Arc::clone(desk);
    blocking(move || {
        let shell = &desk.shell;
        let secrets = shell.secrets().ok_or_else(CommandError::no_engine)?;
        let report = shell
            .with_engine(|engine| engine.verify_audit(&*secrets, open_bodies))
            .ok_or_else(CommandError::no_engine)?;
        verification(report)
    })
    .await
}

fn verification(
    report: Result<postern_engine::audit::VerifyReport, AuditError>,
) -> Result<Verification, CommandError> {
    match report {
        Ok(report) => Ok(Verification::Verified {
            records: report.records,
            head: report.head.map(|h| h.to_string()),
            anchor: match report.anchor {
                AnchorCheck::Checked(head) => AnchorView::Checked {
                    head: head.to_string(),
                },
                AnchorCheck::Empty => AnchorView::Empty,
                AnchorCheck::Unavailable(reason) => AnchorView::Unavailable { reason },
            },
            bodies_opened: report.bodies_opened,
            key_note: report.key_note,
        }),
        Err(e @ (AuditError::Verification { .. } | AuditError::Quarantined { .. })) => {
            let (seq, reason) = match &e {
                AuditError::Verification { seq, reason, .. }
                | AuditError::Quarantined { seq, reason } => (*seq, reason.clone()),
                _ => unreachable!("matched above"),
            };
            Ok(Verification::Failed {
                seq,
                code: e.code().to_owned(),
                reason,
            })
        }
        Err(e) => Err(CommandError::new(
            ErrorCode::Failed,
            format!("{} ({})", e, e.code()),
        )),
    }
}

fn failed(e: EngineError) -> CommandError {
    CommandError::new(ErrorCode::Failed, e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing::{ask, invoke, running_desk, stop, wait_for};

    /// The head record's sequence number, from the engine's status.
    fn head(desk: &crate::Desk) -> u64 {
        let status = desk.shell().with_engine(|e| e.status().unwrap()).unwrap();
        let head = status.audit.head.unwrap_or_default();
        head.split(':').next().unwrap().parse().unwrap_or(0)
    }

    #[test]
    fn a_denial_opens_as_its_audit_record_and_the_log_verifies() {
        let (desk, _surface, _home) = running_desk();
        let before = head(&desk);
        let verdict = ask(&desk, "now");
        let listed = invoke(&desk, "approvals", json!({})).unwrap();
        let id = listed[0]["card"]["id"].clone();
        invoke(
            &desk,
            "answer",
            json!({"id": id, "reply": {"reply": "deny"}}),
        )
        .unwrap();
        drop(verdict);
        // The audit writer commits in the background.
        wait_for(|| head(&desk) > before);

        let seq = head(&desk);
        let entry = invoke(&desk, "audit_entry", json!({ "seq": seq })).unwrap();
        assert_eq!(entry["seq"], seq, "{entry}");
        assert_eq!(entry["problem"], json!(null), "{entry}");
        assert_eq!(entry["body"]["state"], "opened", "{entry}");
        // The log keeps where the person answered.
        let denied = crate::testing::audit_event(&desk, "approval_denied");
        assert_eq!(denied["by"], "window", "{denied}");
        assert_eq!(
            invoke(&desk, "audit_entry", json!({"seq": 999_999})).unwrap(),
            json!(null)
        );

        // Locked, the engine keeps bodies sealed.
        invoke(&desk, "lock", json!({})).unwrap();
        let sealed = invoke(&desk, "audit_entry", json!({ "seq": seq })).unwrap();
        assert_eq!(sealed["body"]["state"], "sealed", "{sealed}");
        invoke(
            &desk,
            "unlock",
            json!({"proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap();

        let verified = invoke(&desk, "verify_audit", json!({"openBodies": true})).unwrap();
        assert_eq!(verified["state"], "verified", "{verified}");
        assert_eq!(verified["bodiesOpened"], true, "{verified}");
        assert!(verified["records"].as_u64().unwrap() >= seq, "{verified}");
        stop(&desk);
    }

    #[test]
    fn an_empty_journal_has_an_empty_timeline() {
        let (desk, _surface, _home) = running_desk();
        let timeline = invoke(&desk, "timeline", json!({"query": {}})).unwrap();
        assert_eq!(timeline["lanes"], json!([]), "{timeline}");
        let sessions = invoke(&desk, "sessions_journal", json!({"filter": {}})).unwrap();
        assert_eq!(sessions, json!([]));
        stop(&desk);
    }
}
