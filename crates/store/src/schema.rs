//! What may run inside Postern's own writes: nothing another process put in the files.
//!
//! A process of the user can open `postern.db` and change its schema. A trigger runs its
//! statements inside the engine's transactions (an audit record deleted as it is inserted, a
//! binding put back as it is removed); an index can refuse the engine's rows (a partial unique
//! index on the audit log's `kind` fails the commit of every later record of that kind: review
//! 14, N1, a narrowing kept from the log); so can a table's text changed by an `ALTER TABLE`
//! (a column added with a `CHECK`, a `NOT NULL` generated column, a foreign key to nothing) or
//! rewritten with `writable_schema` (review 15, R3).
//!
//! Postern's schema has neither triggers nor views, so every connection runs with both switched
//! off and with the schema untrusted ([`harden`]); and the schema the files hold is compared with
//! the one the migrations make ([`repair`]): a table of Postern's whose text is not the
//! migrations' is made again from them, its rows copied; a table named like one of the other
//! file's (which would shadow it: the journals' statements name no schema) is dropped; indexes,
//! triggers and views Postern did not make are dropped, its own missing or changed indexes made
//! again. Other tables are left: they change none of Postern's statements.
//!
//! [`Store::write_repairing`] and [`LogWriter::append`] run a write that failed once more after
//! a repair that changed something, in the transaction that repaired the indexes, so nothing can
//! be planted between the two. Each step of a repair is a savepoint of its own: one that fails
//! (a name taken by an object of another kind) is said, and the others still happen.

use std::sync::OnceLock;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, TransactionBehavior};

#[cfg(doc)]
use crate::LogWriter;
use crate::migrations;
use crate::{Store, StoreError};

/// The schemas every connection has: the database and its attached journals.
pub(crate) const SCHEMAS: &[&str] = &["main", "journal"];

/// What a failed write repairs before it is tried again: the database only (the audit log and
/// the configuration live there; the journals are rebuilt from the log, and a step held up on
/// their file must not hold up a commit).
pub(crate) const MAIN: &[&str] = &["main"];

/// An index, trigger or view: its schema, type, name and SQL (`None` for SQLite's own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Object {
    schema: &'static str,
    kind: String,
    name: String,
    sql: Option<String>,
}

/// A table of Postern's: its schema, name, SQL and columns.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    schema: &'static str,
    name: String,
    sql: String,
    columns: Vec<String>,
}

/// What the migrations make.
#[derive(Debug)]
struct Expected {
    tables: Vec<Table>,
    objects: Vec<Object>,
}

/// What a repair did, a line each, and what it could not do.
#[derive(Debug, Default)]
pub(crate) struct Repairs {
    done: Vec<String>,
    failed: Vec<String>,
}

impl Repairs {
    /// Whether it changed the schema (a write that failed is worth trying again).
    pub(crate) fn changed(&self) -> bool {
        !self.done.is_empty()
    }

    /// Every line: what was done, then what could not be.
    pub(crate) fn lines(self) -> Vec<String> {
        let mut lines = self.done;
        lines.extend(self.failed);
        lines
    }

    fn extend(&mut self, other: Repairs) {
        self.done.extend(other.done);
        self.failed.extend(other.failed);
    }

    /// Runs `step` in a savepoint: kept and said as `done` when it succeeds, undone and said
    /// as failed when it does not.
    fn step(
        &mut self,
        conn: &Connection,
        done: String,
        step: impl FnOnce() -> rusqlite::Result<()>,
    ) {
        let outcome = conn
            .execute_batch("SAVEPOINT postern_repair")
            .and_then(|()| step())
            .and_then(|()| conn.execute_batch("RELEASE postern_repair"));
        match outcome {
            Ok(()) => self.done.push(done),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK TO postern_repair; RELEASE postern_repair");
                self.failed
                    .push(format!("could not repair the database ({done}): {e}"));
            }
        }
    }
}

/// Switches off what Postern's schema never uses and a planted one would: triggers and views,
/// and functions named by the schema that are not safe anywhere (`trusted_schema` off). The
/// defensive flag keeps this connection itself from editing the schema's text.
pub(crate) fn harden(conn: &Connection) -> Result<(), StoreError> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    Ok(())
}

/// Repairs the `schemas` of `conn` (outside any transaction): its tables in a transaction of
/// their own, then its indexes, triggers and views in `then`'s, whose writes follow in it.
pub(crate) fn repair<T>(
    conn: &Connection,
    schemas: &[&'static str],
    then: impl FnOnce(&Repairs) -> Result<Option<T>, StoreError>,
) -> Result<(Repairs, Option<T>), StoreError> {
    let mut repairs = repair_tables(conn, schemas)?;
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    repairs.extend(repair_objects(conn, schemas)?);
    let value = then(&repairs)?;
    tx.commit()?;
    Ok((repairs, value))
}

/// Makes again each table of Postern's whose text is not the migrations', and drops a table
/// named like one of another schema's. Foreign keys are off meanwhile (outside a transaction
/// only): the old table is renamed aside and dropped once its rows are copied, and neither may
/// touch the rows that refer to it (a credential's bindings would go with it).
fn repair_tables(conn: &Connection, schemas: &[&'static str]) -> Result<Repairs, StoreError> {
    let expected = expected()?;
    let found = tables(conn, schemas)?;
    let mut repairs = Repairs::default();
    let differs = |t: &Table| {
        expected
            .tables
            .iter()
            .find(|e| e.schema == t.schema && e.name == t.name)
            .filter(|e| e.sql != t.sql)
    };
    let shadows = |t: &Table| {
        !expected
            .tables
            .iter()
            .any(|e| e.schema == t.schema && e.name == t.name)
            && expected.tables.iter().any(|e| e.name == t.name)
    };
    if !found.iter().any(|t| differs(t).is_some() || shadows(t)) {
        return Ok(repairs);
    }
    conn.pragma_update(None, "foreign_keys", false)?;
    conn.pragma_update(None, "legacy_alter_table", true)?;
    let outcome = (|| {
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        for table in &found {
            let (schema, name) = (table.schema, quoted(&table.name));
            if shadows(table) {
                repairs.step(
                    conn,
                    format!(
                        "a table named like one of Postern's in another file was removed: {}",
                        table.name
                    ),
                    || conn.execute_batch(&format!("DROP TABLE \"{schema}\".{name}")),
                );
            } else if let Some(ours) = differs(table) {
                let aside = quoted(&format!("{}__not_postern", table.name));
                let columns = ours
                    .columns
                    .iter()
                    .map(|c| quoted(c))
                    .collect::<Vec<_>>()
                    .join(", ");
                repairs.step(
                    conn,
                    format!(
                        "Postern's table, changed, made again with its rows: {}",
                        table.name
                    ),
                    || {
                        conn.execute_batch(&format!(
                            "DROP TABLE IF EXISTS \"{schema}\".{aside};
                             ALTER TABLE \"{schema}\".{name} RENAME TO {aside};
                             {create};
                             INSERT INTO \"{schema}\".{name} ({columns})
                                 SELECT {columns} FROM \"{schema}\".{aside};
                             DROP TABLE \"{schema}\".{aside};",
                            create = in_schema(&ours.sql, "TABLE ", schema),
                        ))
                    },
                );
            }
        }
        tx.commit()
    })();
    conn.pragma_update(None, "legacy_alter_table", false)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    outcome?;
    Ok(repairs)
}

/// Drops every index, trigger and view in `schemas` that the migrations do not make, and makes
/// again those they make that are missing or changed (inside the caller's transaction).
fn repair_objects(conn: &Connection, schemas: &[&'static str]) -> Result<Repairs, StoreError> {
    let expected = &expected()?.objects;
    let found = objects(conn, schemas)?;
    let mut repairs = Repairs::default();
    // SQLite's own indexes (a primary key's, a UNIQUE column's) go with their table.
    for object in found
        .iter()
        .filter(|o| !expected.contains(o) && o.sql.is_some())
    {
        repairs.step(
            conn,
            format!(
                "not made by Postern, removed from the database: {} {}",
                object.kind, object.name
            ),
            || {
                conn.execute_batch(&format!(
                    "DROP {} IF EXISTS \"{}\".{}",
                    object.kind.to_uppercase(),
                    object.schema,
                    quoted(&object.name)
                ))
            },
        );
    }
    // The migrations make indexes only.
    for object in expected
        .iter()
        .filter(|o| schemas.contains(&o.schema) && !found.contains(o))
    {
        let Some(sql) = &object.sql else { continue };
        repairs.step(
            conn,
            format!(
                "Postern's, missing or changed, made again: {} {}",
                object.kind, object.name
            ),
            || conn.execute_batch(&in_schema(sql, "INDEX ", object.schema)),
        );
    }
    Ok(repairs)
}

/// `sql` (a `CREATE` of `kind` as SQLite keeps it, without its schema's name) made in `schema`.
fn in_schema(sql: &str, kind: &str, schema: &str) -> String {
    match sql.split_once(kind) {
        Some((head, tail)) => format!("{head}{kind}\"{schema}\".{tail}"),
        None => sql.to_owned(),
    }
}

/// `name` as an SQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The tables of `schemas` in `conn`'s files (SQLite's own left out), with their columns.
fn tables(conn: &Connection, schemas: &[&'static str]) -> Result<Vec<Table>, StoreError> {
    let mut tables = Vec::new();
    for &schema in schemas {
        let mut stmt = conn.prepare(&format!(
            "SELECT name, sql FROM \"{schema}\".sqlite_schema
             WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
        })?;
        for row in rows {
            let (name, sql) = row?;
            let columns = conn
                .prepare("SELECT name FROM pragma_table_info(?1, ?2)")?
                .query_map([name.as_str(), schema], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            tables.push(Table {
                schema,
                name,
                sql: sql.unwrap_or_default(),
                columns,
            });
        }
    }
    Ok(tables)
}

/// The indexes, triggers and views of `schemas` in `conn`'s files, in a fixed order.
fn objects(conn: &Connection, schemas: &[&'static str]) -> Result<Vec<Object>, StoreError> {
    let mut objects = Vec::new();
    for &schema in schemas {
        let mut stmt = conn.prepare(&format!(
            "SELECT type, name, sql FROM \"{schema}\".sqlite_schema
             WHERE type IN ('index', 'trigger', 'view') ORDER BY type, name"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok(Object {
                schema,
                kind: row.get(0)?,
                name: row.get(1)?,
                sql: row.get(2)?,
            })
        })?;
        for row in rows {
            objects.push(row?);
        }
    }
    Ok(objects)
}

/// What the migrations make, read once from an in-memory database brought up to date.
fn expected() -> Result<&'static Expected, StoreError> {
    static EXPECTED: OnceLock<Expected> = OnceLock::new();
    if let Some(expected) = EXPECTED.get() {
        return Ok(expected);
    }
    let mut conn = Connection::open_in_memory()?;
    migrations::apply(&mut conn)?;
    conn.execute("ATTACH DATABASE ':memory:' AS journal", [])?;
    migrations::apply_journals(&mut conn)?;
    let expected = Expected {
        tables: tables(&conn, SCHEMAS)?,
        objects: objects(&conn, SCHEMAS)?,
    };
    Ok(EXPECTED.get_or_init(|| expected))
}

impl Store {
    /// Repairs the database's and the journals' schema (see the module docs); what it did,
    /// and could not do, one line each, empty when nothing was amiss.
    pub fn repair_schema(&self) -> Result<Vec<String>, StoreError> {
        Ok(repair(&self.conn, SCHEMAS, |_| Ok(None::<()>))?.0.lines())
    }

    /// Runs `op` in one immediate transaction. When it fails and a repair of the database's
    /// schema changes something, runs it once more, in the transaction that repaired the
    /// indexes, and queues what was repaired as configuration changes (the engine records
    /// them) in the same transaction.
    pub(crate) fn write_repairing<T>(
        &self,
        op: impl Fn(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let failed = {
            let tx =
                rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            match op(self) {
                Ok(value) => {
                    tx.commit()?;
                    return Ok(value);
                }
                Err(e) => e,
            }
        };
        let (_, value) = repair(&self.conn, MAIN, |repairs| {
            if !repairs.changed() {
                return Ok(None);
            }
            for line in repairs.done.iter().chain(&repairs.failed) {
                self.note_config_change(line, None)?;
            }
            op(self).map(Some)
        })?;
        value.ok_or(failed)
    }
}

#[cfg(test)]
mod tests {
    use postern_domain::credential::Injection;
    use postern_domain::{CredentialName, ServerLabel};
    use rusqlite::params;

    use crate::Store;

    /// A store in a new home, its database's path, and a connection of another process's.
    fn store() -> (tempfile::TempDir, Store, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(crate::DB_FILE);
        let store = Store::open_file(&path).expect("open");
        (dir, store, path)
    }

    /// Runs `sql` on a connection of its own, as another process of the user does.
    fn planted(path: &std::path::Path, sql: &str) {
        let conn = rusqlite::Connection::open(path).expect("open");
        crate::attach_journals(&conn, path).expect("attach");
        conn.execute_batch(sql).expect("plant");
    }

    fn insert_meta(store: &Store, key: &str) -> rusqlite::Result<usize> {
        store.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, 'v')",
            params![key],
        )
    }

    /// The credential `api`, added and bound to `inventory`.
    fn bound(store: &Store) -> (CredentialName, ServerLabel) {
        let name: CredentialName = "api".parse().expect("name");
        let env = Injection::Env { var: "API".into() };
        store.add_credential(&name, &env, &[], false).expect("add");
        let label: ServerLabel = "inventory".parse().expect("label");
        store.bind(&label, &name).expect("bind");
        (name, label)
    }

    fn ends_with(repaired: &[String], what: &str) -> usize {
        repaired.iter().filter(|r| r.ends_with(what)).count()
    }

    #[test]
    fn a_database_of_postern_s_own_needs_no_repair() {
        let (_dir, store, _) = store();
        assert_eq!(store.repair_schema().expect("repair"), Vec::<String>::new());
    }

    /// A trigger planted in the file never runs in Postern's writes.
    #[test]
    fn a_planted_trigger_does_not_run() {
        let (_dir, store, path) = store();
        planted(
            &path,
            "CREATE TRIGGER planted BEFORE INSERT ON meta
             BEGIN SELECT RAISE(ABORT, 'refused by a planted trigger'); END;",
        );
        insert_meta(&store, "a").expect("the trigger does not run");
        let repaired = store.repair_schema().expect("repair");
        assert_eq!(
            repaired,
            ["not made by Postern, removed from the database: trigger planted"]
        );
    }

    /// An index planted to refuse some rows is removed, after which they are written; one of
    /// Postern's dropped or replaced is made again; a step that cannot be done (a name taken
    /// by a table) is said, and the others are still done.
    #[test]
    fn planted_and_missing_indexes_are_repaired() {
        let (_dir, store, path) = store();
        planted(
            &path,
            r#"CREATE UNIQUE INDEX "plan""ted" ON meta (value) WHERE key LIKE 'n%';
             DROP INDEX audit_log_engine_started;
             CREATE INDEX audit_log_engine_started ON audit_log (time);
             CREATE INDEX journal.planted_too ON journal_sessions (server);
             DROP INDEX journal.journal_activity_time;
             CREATE TABLE journal.journal_activity_time (x);"#,
        );
        insert_meta(&store, "n1").expect("first");
        insert_meta(&store, "n2").expect_err("refused by the planted index");
        let repaired = store.repair_schema().expect("repair");
        assert_eq!(repaired.len(), 5, "{repaired:?}");
        assert_eq!(ends_with(&repaired, r#"index plan"ted"#), 1, "{repaired:?}");
        assert_eq!(ends_with(&repaired, "index planted_too"), 1);
        assert_eq!(
            ends_with(&repaired, " index audit_log_engine_started"),
            2,
            "dropped, made again: {repaired:?}"
        );
        assert!(
            repaired[4].starts_with(
                "could not repair the database (Postern's, missing or changed, made again: \
                 index journal_activity_time)"
            ),
            "{repaired:?}"
        );
        insert_meta(&store, "n2").expect("written after the repair");
        assert_eq!(
            store.repair_schema().expect("again").len(),
            1,
            "only the failure"
        );
    }

    /// A table of Postern's changed by another process (a column added with a check that
    /// refuses some rows) is made again from the migrations with all its rows, and the rows
    /// that refer to it stay (a credential's bindings); a table of its own named like one of the
    /// journals' (which the journals' statements would read instead) is removed.
    #[test]
    fn a_changed_table_is_made_again_with_its_rows_and_a_shadowing_one_removed() {
        let (_dir, store, path) = store();
        let (name, label) = bound(&store);
        insert_meta(&store, "kept").expect("a row");
        planted(
            &path,
            "ALTER TABLE meta ADD COLUMN planted INTEGER CHECK (key NOT LIKE 'n%');
             ALTER TABLE credentials ADD COLUMN planted TEXT;
             CREATE TABLE main.journal_meta (key TEXT PRIMARY KEY, value INTEGER);",
        );
        insert_meta(&store, "n1").expect_err("refused by the planted check");
        let repaired = store.repair_schema().expect("repair");
        assert_eq!(
            ends_with(&repaired, "made again with its rows: meta"),
            1,
            "{repaired:?}"
        );
        assert_eq!(
            ends_with(&repaired, "made again with its rows: credentials"),
            1
        );
        assert_eq!(
            ends_with(&repaired, "another file was removed: journal_meta"),
            1
        );
        assert_eq!(repaired.len(), 3, "{repaired:?}");
        insert_meta(&store, "n1").expect("written after the repair");
        assert_eq!(
            store.meta("kept").expect("meta").as_deref(),
            Some("v"),
            "rows kept"
        );
        assert_eq!(store.bindings(&label).expect("bindings").len(), 1);
        assert_eq!(store.repair_schema().expect("again"), Vec::<String>::new());
        // The foreign key holds on the table made again.
        assert!(store.remove_credential(&name).expect("remove"));
        assert!(store.bindings(&label).expect("bindings").is_empty());
    }

    /// An unbind whose narrowing cannot be queued (an index planted on the queue) is made once
    /// the index is removed, and what was removed is queued before it (review 15, R4).
    #[test]
    fn an_unbind_refused_by_a_planted_index_is_made_after_the_repair() {
        let (_dir, store, path) = store();
        let (name, label) = bound(&store);
        store.take_config_changes().expect("taken");
        planted(
            &path,
            "CREATE INDEX planted ON pending_config_changes (
                json(CASE WHEN narrowing IS NOT NULL THEN 'not json' END)
             );",
        );
        assert!(store.unbind(&label, &name).expect("unbound"));
        assert!(store.bindings(&label).expect("bindings").is_empty());
        assert_eq!(
            store.taken_changes(),
            [
                "not made by Postern, removed from the database: index planted",
                "unbound credential 'api' from server 'inventory'"
            ],
        );
    }
}
