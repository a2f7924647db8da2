//! Where each credential went through the egress broker (issue 15), per server and host: the
//! requests it was put in, the requests refused because its placeholder was headed elsewhere,
//! and when. Projected from the `credential_substituted` and `credential_leak_attempt` records
//! into `journal_credential_uses` (migration 12), so a journal rebuilt from the log holds the
//! same rows.

use postern_domain::CredentialName;
use serde::Serialize;

use crate::{Store, StoreError};

/// One credential's requests from one server toward one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialUse {
    /// The server whose launches sent them.
    pub server: String,
    /// The host they were headed to.
    pub host: String,
    /// Requests the broker put the value in (a host of the credential).
    pub uses: u64,
    /// Requests refused: the placeholder was headed to a host not bound to the credential.
    pub leaks: u64,
    /// The first of them (unix ms).
    pub first_ms: i64,
    /// The last of them (unix ms).
    pub last_ms: i64,
    /// The execution epoch of the last one, when the record named it.
    pub last_epoch: Option<String>,
}

impl Store {
    /// Where `name` went, the most recent first.
    pub fn credential_uses(&self, name: &CredentialName) -> Result<Vec<CredentialUse>, StoreError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT server, host, uses, leaks, first, last, last_epoch
                 FROM journal_credential_uses WHERE credential = ?1
                 ORDER BY last DESC, server, host",
            )?
            .query_map([name.as_str()], |r| {
                Ok(CredentialUse {
                    server: r.get(0)?,
                    host: r.get(1)?,
                    uses: r.get::<_, i64>(2)?.max(0) as u64,
                    leaks: r.get::<_, i64>(3)?.max(0) as u64,
                    first_ms: r.get(4)?,
                    last_ms: r.get(5)?,
                    last_epoch: r.get(6)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use postern_audit::{Seq, UnixMillis};
    use postern_domain::{AuditEvent, ExecutionEpoch};

    use super::CredentialUse;
    use crate::{JournalWriter, Opened, StoreError};

    #[test]
    fn each_request_through_the_broker_counts_toward_its_credential_server_and_host() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = JournalWriter::open(dir.path()).expect("open");
        let (early, late) = (ExecutionEpoch::new(1_000, 1), ExecutionEpoch::new(2_000, 2));
        let event = |epoch, host: &str, leak: bool| {
            let (server, credentials, host) = (
                "api".parse().expect("label"),
                vec!["gh".to_owned()],
                host.to_owned(),
            );
            let epoch = Some(epoch);
            if leak {
                AuditEvent::CredentialLeakAttempt {
                    server,
                    epoch,
                    credentials,
                    host,
                }
            } else {
                AuditEvent::CredentialSubstituted {
                    server,
                    epoch,
                    credentials,
                    host,
                }
            }
        };
        let events = [
            event(early, "api.github.com", false),
            event(early, "api.github.com", false),
            event(late, "evil.example", true),
            event(late, "api.github.com", false),
        ];
        let opened = events.into_iter().enumerate().map(|(i, event)| {
            Ok::<_, StoreError>(Opened {
                seq: Seq::new(i as u64 + 1),
                time: UnixMillis::new(10_000 + i as i64 * 1_000),
                event,
            })
        });
        writer.project(opened).expect("projected");

        let uses = writer
            .store()
            .credential_uses(&"gh".parse().expect("name"))
            .expect("read");
        let late = Some(late.to_string());
        let row = |host: &str, uses, leaks, first_ms, last_ms| CredentialUse {
            server: "api".into(),
            host: host.into(),
            uses,
            leaks,
            first_ms,
            last_ms,
            last_epoch: late.clone(),
        };
        assert_eq!(
            uses,
            [
                row("api.github.com", 3, 0, 10_000, 13_000),
                row("evil.example", 0, 1, 12_000, 12_000),
            ]
        );
        let none = writer
            .store()
            .credential_uses(&"other".parse().expect("name"))
            .expect("read");
        assert!(none.is_empty());
    }
}
