//! The `approved_baselines` table: per server, the launch (its execution record) and the
//! catalog a human last approved a call under. The next approval card for that server is
//! compared with it ("code changed since the approved epoch", the catalog diff), so it is
//! kept across engine restarts: a rebuild made while Postern was down still shows as one.

use postern_domain::catalog::Catalog;
use postern_domain::{ExecutionRecord, ServerLabel};
use rusqlite::{OptionalExtension, params};

use crate::{Store, StoreError};

impl Store {
    /// The launch and catalog a human last approved a call of `server` under, if any.
    pub fn approved_baseline(
        &self,
        server: &ServerLabel,
    ) -> Result<Option<(ExecutionRecord, Catalog)>, StoreError> {
        let row: Option<(String, String)> = self
            .conn
            .prepare_cached("SELECT record, catalog FROM approved_baselines WHERE server = ?1")?
            .query_row([server.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let corrupt = |why: serde_json::Error| StoreError::Corrupt {
            what: format!("the approved baseline of '{server}'"),
            why: why.to_string(),
        };
        row.map(|(record, catalog)| {
            Ok((
                serde_json::from_str(&record).map_err(corrupt)?,
                serde_json::from_str(&catalog).map_err(corrupt)?,
            ))
        })
        .transpose()
    }

    /// Records that a human approved a call of `server` under `record` and `catalog`.
    pub fn set_approved_baseline(
        &self,
        server: &ServerLabel,
        record: &ExecutionRecord,
        catalog: &Catalog,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let unencodable = |why: serde_json::Error| StoreError::Unencodable {
            what: format!("the approved baseline of '{server}'"),
            why: why.to_string(),
        };
        let record = serde_json::to_string(record).map_err(unencodable)?;
        let catalog = serde_json::to_string(catalog).map_err(unencodable)?;
        self.conn
            .prepare_cached(
                "INSERT INTO approved_baselines (server, record, catalog, approved_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (server) DO UPDATE SET record = excluded.record,
                    catalog = excluded.catalog, approved_at = excluded.approved_at",
            )?
            .execute(params![server.as_str(), record, catalog, at_ms as i64])?;
        Ok(())
    }

    /// Every approved baseline's server and a digest of its stored row (record and catalog as
    /// stored): what the engine seals, so a row edited behind its back is told apart.
    pub fn baseline_digests(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT server, record, catalog FROM approved_baselines ORDER BY server",
            )?
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows
            .into_iter()
            .map(|(server, record, catalog)| {
                let mut bytes = record.into_bytes();
                bytes.push(0);
                bytes.extend_from_slice(catalog.as_bytes());
                (server, postern_domain::Digest::of(&bytes).to_string())
            })
            .collect())
    }

    /// Forgets `server`'s approved baseline row as stored. Returns whether there was one.
    pub fn remove_approved_baseline(&self, server: &str) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .execute("DELETE FROM approved_baselines WHERE server = ?1", [server])?
            > 0)
    }
}
