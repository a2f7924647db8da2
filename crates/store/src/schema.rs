//! What may run inside Postern's own writes: nothing another process put in the files.
//!
//! A process of the user can open `postern.db` and add to its schema. A trigger runs its
//! statements inside the engine's transactions (an audit record deleted as it is inserted, a
//! binding put back as it is removed), and an index can refuse the engine's rows (a partial
//! unique index on the audit log's `kind` fails the commit of every later record of that kind:
//! review 14, N1, a narrowing kept from the log). Postern's schema has neither triggers nor
//! views, so every connection runs with both switched off and with the schema untrusted
//! ([`harden`]); and the indexes, triggers and views the files hold are compared with the ones
//! the migrations make ([`repair`]): what Postern did not make is dropped, what it made and is
//! missing or changed is made again. The audit log's writer repairs at its open and again
//! when a commit fails, and retries the commit once when something was repaired.
//!
//! Tables are not compared: one Postern did not make changes none of its statements, and a
//! table of Postern's rewritten in place (`PRAGMA writable_schema`) is the same class as a
//! database put back, which the seal and the audit log's anchor answer.

use std::sync::OnceLock;

use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::StoreError;
use crate::migrations;

/// The schemas every connection has: the database and its attached journals.
const SCHEMAS: [&str; 2] = ["main", "journal"];

/// An index, trigger or view: its schema, type, name and SQL (`None` for SQLite's own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Object {
    schema: &'static str,
    kind: String,
    name: String,
    sql: Option<String>,
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

/// Drops every index, trigger and view in `conn`'s files that the migrations do not make, and
/// makes again those they make that are missing or changed. Returns what it did, one line
/// each (for the audit log's `config_tampered`); empty when the schema is Postern's own.
pub(crate) fn repair(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let expected = expected()?;
    let found = objects(conn)?;
    let mut done = Vec::new();
    for object in found.iter().filter(|o| !expected.contains(o)) {
        // SQLite's own indexes (a primary key's, a UNIQUE column's) go with their table.
        if object.sql.is_none() {
            continue;
        }
        conn.execute_batch(&format!(
            "DROP {} IF EXISTS \"{}\".\"{}\"",
            object.kind.to_uppercase(),
            object.schema,
            object.name.replace('"', "\"\"")
        ))?;
        done.push(format!(
            "not made by Postern, removed from the database: {} {}",
            object.kind, object.name
        ));
    }
    // The migrations make indexes only. Each is made again in the schema it belongs to:
    // SQLite keeps its SQL without the schema's name.
    for object in expected.iter().filter(|o| !found.contains(o)) {
        let Some((head, tail)) = object
            .sql
            .as_deref()
            .and_then(|sql| sql.split_once("INDEX "))
        else {
            continue;
        };
        conn.execute_batch(&format!("{head}INDEX \"{}\".{tail}", object.schema))?;
        done.push(format!(
            "Postern's, missing or changed, made again: {} {}",
            object.kind, object.name
        ));
    }
    Ok(done)
}

/// The indexes, triggers and views of `conn`'s files, in a fixed order.
fn objects(conn: &Connection) -> Result<Vec<Object>, StoreError> {
    let mut objects = Vec::new();
    for schema in SCHEMAS {
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
fn expected() -> Result<&'static [Object], StoreError> {
    static EXPECTED: OnceLock<Vec<Object>> = OnceLock::new();
    if let Some(objects) = EXPECTED.get() {
        return Ok(objects);
    }
    let mut conn = Connection::open_in_memory()?;
    migrations::apply(&mut conn)?;
    conn.execute("ATTACH DATABASE ':memory:' AS journal", [])?;
    migrations::apply_journals(&mut conn)?;
    let objects = objects(&conn)?;
    Ok(EXPECTED.get_or_init(|| objects))
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use crate::Store;

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

    #[test]
    fn a_database_of_postern_s_own_needs_no_repair() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        assert_eq!(store.repair_schema().expect("repair"), Vec::<String>::new());
    }

    /// A trigger planted in the file never runs in Postern's writes.
    #[test]
    fn a_planted_trigger_does_not_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(crate::DB_FILE);
        let store = Store::open_file(&path).expect("open");
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
    /// Postern's dropped or replaced is made again.
    #[test]
    fn planted_and_missing_indexes_are_repaired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(crate::DB_FILE);
        let store = Store::open_file(&path).expect("open");
        planted(
            &path,
            "CREATE UNIQUE INDEX planted ON meta (value) WHERE key LIKE 'n%';
             DROP INDEX audit_log_engine_started;
             CREATE INDEX audit_log_engine_started ON audit_log (time);
             CREATE INDEX journal.planted_too ON journal_sessions (server);",
        );
        insert_meta(&store, "n1").expect("first");
        insert_meta(&store, "n2").expect_err("refused by the planted index");
        let repaired = store.repair_schema().expect("repair");
        assert_eq!(repaired.len(), 4, "{repaired:?}");
        assert!(repaired.iter().any(|r| r.ends_with(" index planted")));
        assert!(repaired.iter().any(|r| r.ends_with(" index planted_too")));
        let ours = repaired
            .iter()
            .filter(|r| r.ends_with(" index audit_log_engine_started"));
        assert_eq!(ours.count(), 2, "dropped, made again: {repaired:?}");
        insert_meta(&store, "n2").expect("written after the repair");
        assert_eq!(store.repair_schema().expect("again"), Vec::<String>::new());
    }
}
