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
//! migrations' is made again from them, its rows copied; a table of another's named like one of
//! Postern's (the journals' statements name no schema, so one in the database would shadow
//! theirs) or with a foreign key to one of them (a key to the log's `kind`, which is not unique,
//! fails every insert there) is dropped; indexes, triggers and views Postern did not make are
//! dropped, its own missing or changed indexes made again. Other tables are left alone.
//!
//! [`Store::write_repairing`] and [`LogWriter::append`] run a write that failed once more after
//! a repair that found anything, in the repair's own transaction, so nothing can be changed
//! between the two, with foreign keys off (a key planted on a table the repair cannot drop,
//! such as a virtual table's own, is then not enforced: review 18, S1). The audit log's
//! connection runs with them off throughout: none of Postern's names the log or its metadata.
//! Each step of a repair is a savepoint of its own: one that fails is said, and the others
//! still happen.

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

/// A table: its schema, name, SQL and (for Postern's own) columns.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    schema: &'static str,
    name: String,
    sql: String,
    columns: Vec<Column>,
}

/// A column of one of Postern's tables: its name, declared type, and whether it is `NOT NULL`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    name: String,
    kind: String,
    not_null: bool,
}

impl Column {
    /// An SQL condition true of a value this column takes (its tables are `STRICT`): what a
    /// table made again copies, a row of the changed one that does not fit being kept aside.
    fn fits(&self) -> String {
        let types = match self.kind.to_ascii_uppercase().as_str() {
            "INTEGER" | "INT" => "'integer'",
            "REAL" => "'real', 'integer'",
            "TEXT" => "'text'",
            "BLOB" => "'blob'",
            _ => return "1".into(),
        };
        let null = if self.not_null { "" } else { ", 'null'" };
        format!("typeof({}) IN ({types}{null})", quoted(&self.name))
    }
}

/// What the migrations make.
#[derive(Debug)]
struct Expected {
    tables: Vec<Table>,
    objects: Vec<Object>,
}

/// What a repair did, and could not do, a line each, in the order it went.
#[derive(Debug, Default)]
pub(crate) struct Repairs(Vec<String>);

impl Repairs {
    /// Whether it found anything amiss, done or not (a write that failed is worth trying again:
    /// foreign keys are off in the repair's transaction).
    pub(crate) fn found(&self) -> bool {
        !self.0.is_empty()
    }

    /// Every line.
    pub(crate) fn lines(self) -> Vec<String> {
        self.0
    }

    /// Runs `step` in a savepoint: kept and said as `done` (with what `step` adds to it) when
    /// it succeeds, undone and said as failed when it does not.
    fn step(
        &mut self,
        conn: &Connection,
        done: String,
        step: impl FnOnce() -> rusqlite::Result<String>,
    ) {
        match in_savepoint(conn, || Ok(step()?)) {
            Ok(more) => self.0.push(done + &more),
            Err(e) => self
                .0
                .push(format!("could not repair the database ({done}): {e}")),
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

/// Repairs the `schemas` of `conn` (outside any transaction), then runs `then` with what it
/// did, all in one transaction (review 16, F2: nothing is changed again between the repair and
/// `then`'s write). It takes the database's write lock first, and only that file's (the
/// journals' file, held by another process, must not hold up a write to the log: review 16,
/// F3). Foreign keys are off meanwhile (and as they were after): a table made again is renamed
/// aside and dropped once its rows are copied, and neither may touch the rows that refer to it
/// (a credential's bindings would go with it); Postern's own writes do not lean on them (see
/// `Store::remove_credential`).
pub(crate) fn repair<T>(
    conn: &Connection,
    schemas: &[&'static str],
    then: impl FnOnce(&Repairs) -> Result<T, StoreError>,
) -> Result<(Repairs, T), StoreError> {
    let keys: bool = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0))?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let outcome = (|| {
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
        conn.pragma_update(Some("main"), "user_version", migrations::LATEST)?;
        let mut repairs = repair_tables(conn, schemas)?;
        repairs.0.extend(repair_objects(conn, schemas)?.0);
        let value = then(&repairs)?;
        // An error in `then` that ended the transaction (a full disk) is `then`'s to say.
        if !conn.is_autocommit() {
            tx.commit()?;
        }
        Ok((repairs, value))
    })();
    conn.pragma_update(None, "foreign_keys", keys)?;
    outcome
}

/// Runs `write` in a savepoint: undone alone when it fails, what came before it in the
/// transaction kept (the repair, and its record).
pub(crate) fn in_savepoint<T>(
    conn: &Connection,
    write: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.execute_batch("SAVEPOINT postern_write")?;
    match write() {
        Ok(value) => {
            conn.execute_batch("RELEASE postern_write")?;
            Ok(value)
        }
        Err(e) => {
            // An error that ended the whole transaction (a full disk) took the savepoint with
            // it: the error to say is the write's own.
            let _ = conn.execute_batch("ROLLBACK TO postern_write; RELEASE postern_write");
            Err(e)
        }
    }
}

/// Makes again each table of Postern's whose text is not the migrations', and drops a table
/// Postern did not make that is named like one of another schema's (it would shadow it) or
/// whose foreign keys name one of Postern's (review 16, F4: a key to the log's `kind` fails
/// every record's insert). Inside [`repair`]'s transaction, foreign keys off.
fn repair_tables(conn: &Connection, schemas: &[&'static str]) -> Result<Repairs, StoreError> {
    let expected = expected()?;
    let found = tables(conn, schemas, false)?;
    let mut repairs = Repairs::default();
    // SQLite's names are the same whatever their ASCII case (review 17, N1, N2: `AUDIT_LOG`).
    let ours = |schema: &str, name: &str| {
        expected
            .tables
            .iter()
            .find(|e| e.schema == schema && e.name.eq_ignore_ascii_case(name))
    };
    let postern_s = |name: &str| {
        expected
            .tables
            .iter()
            .any(|e| e.name.eq_ignore_ascii_case(name))
    };
    let mut removed = Vec::new();
    for (i, table) in found.iter().enumerate() {
        if ours(table.schema, &table.name).is_none()
            && (postern_s(&table.name) || refers_to_postern_s(conn, table, postern_s))
        {
            removed.push(i);
        }
    }
    // A rename that leaves the references to the table as they are (its own rows are
    // copied back under its name); restored below, whatever the steps did.
    conn.pragma_update(None, "legacy_alter_table", true)?;
    for (i, table) in found.iter().enumerate() {
        let (schema, name) = (table.schema, quoted(&table.name));
        match ours(schema, &table.name) {
            None if removed.contains(&i) => {
                repairs.step(
                    conn,
                    format!(
                        "a table Postern did not make, named like one of its own or referring \
                         to one, was removed: {}",
                        table.name
                    ),
                    || {
                        conn.execute_batch(&format!("DROP TABLE \"{schema}\".{name}"))?;
                        Ok(String::new())
                    },
                );
            }
            Some(ours) if ours.sql != table.sql => {
                repairs.step(
                    conn,
                    format!(
                        "Postern's table, changed, made again with its rows: {}",
                        ours.name
                    ),
                    || remake(conn, table, ours),
                );
            }
            _ => {}
        }
    }
    conn.pragma_update(None, "legacy_alter_table", false)?;
    Ok(repairs)
}

/// Makes `found` again as `ours` (the migrations' text): renamed aside under a free name, made
/// from the text, its rows copied back and deleted from the aside, the aside dropped. A row that
/// does not fit the table made again (a value of another type, a repeated key: review 17, N4)
/// stays in the aside, which is then kept (until a later repair finds it refers to one of
/// Postern's tables), and the line says where.
fn remake(conn: &Connection, found: &Table, ours: &Table) -> rusqlite::Result<String> {
    let schema = found.schema;
    let aside = free_name(conn, schema, &format!("{}__not_postern", ours.name))?;
    let columns = ours
        .columns
        .iter()
        .map(|c| quoted(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let fits = ours
        .columns
        .iter()
        .map(Column::fits)
        .collect::<Vec<_>>()
        .join(" AND ");
    let (name, aside_q) = (quoted(&found.name), quoted(&aside));
    conn.execute_batch(&format!(
        "ALTER TABLE \"{schema}\".{name} RENAME TO {aside_q}; {create};",
        create = in_schema(&ours.sql, "TABLE ", schema),
    ))?;
    let table = quoted(&ours.name);
    conn.execute(
        &format!(
            "INSERT OR IGNORE INTO \"{schema}\".{table} ({columns})
             SELECT {columns} FROM \"{schema}\".{aside_q} WHERE {fits}"
        ),
        [],
    )?;
    // What was copied goes from the aside (review 18, S3: a value moved out of the database
    // must not stay there in a copy): what stays is what does not fit, or repeats a key.
    let same = ours
        .columns
        .iter()
        .map(|c| format!("t.{0} IS a.{0}", quoted(&c.name)))
        .collect::<Vec<_>>()
        .join(" AND ");
    conn.execute(
        &format!(
            "DELETE FROM \"{schema}\".{aside_q} AS a
             WHERE EXISTS (SELECT 1 FROM \"{schema}\".{table} AS t WHERE {same})"
        ),
        [],
    )?;
    let left = conn.query_row(
        &format!("SELECT count(*) FROM \"{schema}\".{aside_q}"),
        [],
        |r| r.get::<_, i64>(0),
    )?;
    if left == 0 {
        conn.execute_batch(&format!("DROP TABLE \"{schema}\".{aside_q}"))?;
        return Ok(String::new());
    }
    // The aside keeps its rows, not the indexes that hold the names of Postern's (made again
    // on the table made again, with what the repair makes again).
    let indexes = conn
        .prepare(&format!(
            "SELECT name FROM \"{schema}\".sqlite_schema
             WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL"
        ))?
        .query_map([&aside], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    for index in indexes {
        conn.execute_batch(&format!("DROP INDEX \"{schema}\".{}", quoted(&index)))?;
    }
    Ok(format!(
        " ({left} rows that do not fit it kept aside in {aside})"
    ))
}

/// `base`, or `base_2`, `base_3`, ...: the first name nothing in `schema` holds.
fn free_name(conn: &Connection, schema: &str, base: &str) -> rusqlite::Result<String> {
    let mut held = conn.prepare(&format!(
        "SELECT count(*) FROM \"{schema}\".sqlite_schema WHERE name = ?1 COLLATE NOCASE"
    ))?;
    let mut name = base.to_owned();
    for n in 2.. {
        if held.query_row([&name], |r| r.get::<_, i64>(0))? == 0 {
            break;
        }
        name = format!("{base}_{n}");
    }
    Ok(name)
}

/// Whether `table` has a foreign key to a table named like one of Postern's. A table whose
/// keys cannot be read (a virtual table of a module this SQLite lacks: review 17, N3) has none
/// that SQLite would enforce.
fn refers_to_postern_s(conn: &Connection, table: &Table, postern_s: impl Fn(&str) -> bool) -> bool {
    let parents = conn
        .prepare("SELECT \"table\" FROM pragma_foreign_key_list(?1, ?2)")
        .and_then(|mut stmt| {
            stmt.query_map([table.name.as_str(), table.schema], |r| {
                r.get::<_, String>(0)
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .unwrap_or_default();
    parents.iter().any(|p| postern_s(p))
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
                ))?;
                Ok(String::new())
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
            || {
                conn.execute_batch(&in_schema(sql, "INDEX ", object.schema))?;
                Ok(String::new())
            },
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

/// The tables of `schemas` in `conn`'s files (SQLite's own left out), with their columns when
/// `columns` (Postern's own, from the migrations: a table of another's may be one whose columns
/// this SQLite cannot read).
fn tables(
    conn: &Connection,
    schemas: &[&'static str],
    columns: bool,
) -> Result<Vec<Table>, StoreError> {
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
            let columns = if columns {
                conn.prepare("SELECT name, type, \"notnull\" FROM pragma_table_info(?1, ?2)")?
                    .query_map([name.as_str(), schema], |r| {
                        Ok(Column {
                            name: r.get(0)?,
                            kind: r.get(1)?,
                            not_null: r.get(2)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()?
            } else {
                Vec::new()
            };
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
        tables: tables(&conn, SCHEMAS, true)?,
        objects: objects(&conn, SCHEMAS)?,
    };
    Ok(EXPECTED.get_or_init(|| expected))
}

impl Store {
    /// Repairs the database's and the journals' schema (see the module docs); what it did,
    /// and could not do, one line each, empty when nothing was amiss.
    pub fn repair_schema(&self) -> Result<Vec<String>, StoreError> {
        Ok(repair(&self.conn, SCHEMAS, |_| Ok(()))?.0.lines())
    }

    /// Runs `op` in one transaction, begun deferred: `op` writes the database first, so it takes
    /// that file's lock only (an immediate one would take the journals' file's too, and wait
    /// on a rebuild of the journals). When it fails and a repair of the database's schema finds
    /// something, runs it once more, in the repair's transaction, and queues
    /// what was repaired as configuration changes there (the engine records them), kept
    /// even when `op` fails again.
    pub(crate) fn write_repairing<T>(
        &self,
        op: impl Fn(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let first = (|| {
            let tx =
                rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)?;
            let value = op(self)?;
            tx.commit()?;
            Ok(value)
        })();
        let failed = match first {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let (_, again) = repair(&self.conn, MAIN, |repairs| {
            for line in &repairs.0 {
                self.note_config_change(line, None)?;
            }
            Ok(repairs
                .found()
                .then(|| in_savepoint(&self.conn, || op(self))))
        })?;
        again.unwrap_or(Err(failed))
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

    /// The schema the migrations make, as SQLite keeps its text, is pinned in
    /// `schema.pinned.sql` (review 16, F5). A newer SQLite that words a migration's text
    /// otherwise (an `ALTER TABLE ... ADD COLUMN`) would have every database made by an older one
    /// differ from the migrations': each such table made again, reported as tampered. When
    /// this fails after an upgrade, the repair must first learn the older text; set
    /// `POSTERN_PIN_SCHEMA=1` to write the file anew only for a change of the migrations.
    #[test]
    fn the_schema_the_migrations_make_is_pinned() {
        let expected = super::expected().expect("expected");
        let mut text = String::new();
        for table in &expected.tables {
            text.push_str(&format!(
                "-- {}.{}\n{};\n",
                table.schema, table.name, table.sql
            ));
        }
        for object in &expected.objects {
            let sql = object.sql.as_deref().unwrap_or("-- SQLite's own");
            text.push_str(&format!("-- {}.{}\n{sql};\n", object.schema, object.name));
        }
        let pinned = concat!(env!("CARGO_MANIFEST_DIR"), "/src/schema.pinned.sql");
        if std::env::var_os("POSTERN_PIN_SCHEMA").is_some() {
            std::fs::write(pinned, &text).expect("write");
        }
        let found = std::fs::read_to_string(pinned).expect("read");
        assert!(found == text, "the schema differs from {pinned}:\n{text}");
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
    /// refuses some rows) is made again from the migrations with all its rows, even when the
    /// name it is put aside under is taken, and the rows that refer to it stay (a credential's
    /// bindings); a table of another's named like one of the journals' (which the journals'
    /// statements would read instead), or whose foreign key names one of Postern's (which fails
    /// every insert there), is removed.
    #[test]
    fn a_changed_table_is_made_again_with_its_rows_and_a_shadowing_one_removed() {
        let (_dir, store, path) = store();
        let (name, label) = bound(&store);
        insert_meta(&store, "kept").expect("a row");
        planted(
            &path,
            "ALTER TABLE meta ADD COLUMN planted INTEGER CHECK (key NOT LIKE 'n%');
             ALTER TABLE credentials ADD COLUMN planted TEXT;
             CREATE TABLE main.journal_meta (key TEXT PRIMARY KEY, value INTEGER);
             CREATE INDEX meta__not_postern ON audit_log (time);
             CREATE TABLE refers (kind TEXT REFERENCES audit_log (kind));",
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
            ends_with(&repaired, "referring to one, was removed: journal_meta"),
            1
        );
        assert_eq!(
            ends_with(&repaired, "referring to one, was removed: refers"),
            1
        );
        // What held the name `meta` is put aside under is left alone, and removed as an index
        // Postern did not make.
        assert_eq!(ends_with(&repaired, "index meta__not_postern"), 1);
        assert_eq!(repaired.len(), 5, "{repaired:?}");
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

    /// An unbind takes the database's lock, not the journals' file's: it does not wait on
    /// another connection writing the journals (their rebuild).
    #[test]
    fn an_unbind_does_not_wait_on_the_journals() {
        let (_dir, store, path) = store();
        let (name, label) = bound(&store);
        let journals = rusqlite::Connection::open(crate::journal_path(&path)).expect("open");
        journals
            .execute_batch(
                "BEGIN IMMEDIATE; INSERT INTO journal_meta (key, value) VALUES ('x', 1);",
            )
            .expect("hold the journals");
        assert!(store.unbind(&label, &name).expect("unbound"));
        journals.execute_batch("ROLLBACK").expect("let go");
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
