//! The whole database into an empty one of either backend (`buzz-relay copy --to URL`):
//! every table core and the built plugins declare, rows exactly as stored (arrival
//! times, `seq` numbers, the relay identity), the counters advanced past them, each
//! table checked (row count and a checksum of every value) before success.
//!
//! Rows travel as JSON objects keyed by column (SQLite `json_object`, PostgreSQL
//! `row_to_json`) and are inserted by the destination's own JSON functions, so no table
//! needs code of its own: a plugin's table is copied because its manifest lists it.
//!
//! A copy that stops half-way (killed, power lost) must never look like a database a
//! relay may serve. Before the first row the destination gets a marker table, dropped
//! in the last transaction, after every table checked; a relay refuses to open a
//! database that holds it ([`unfinished`]), and a rerun resumes only when nothing but
//! the marker was committed, else refuses.

use super::copy_error;
pub use super::copy_error::CopyError;
use super::tables::{self, CORE_TABLES};
use super::{ident, Progress};
use crate::error::Reason;
use crate::store::migrate::{MigrationSet, Migrations};
use crate::store::pool::{OwnedConn, Pool};
use crate::store::{Conn, StatementBounds};
use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Text};
use diesel::{QueryableByName, RunQueryDsl};
use sha2::{Digest, Sha256};

/// The marker table of an unfinished copy.
pub const MARKER_TABLE: &str = "buzz_copy_unfinished";
/// Rows read per statement (and inserted per statement).
const PAGE: usize = 2_000;
/// Rows per destination transaction.
const COMMIT_ROWS: usize = 20_000;

/// One table as copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedTable {
    /// `core` or the plugin that declares it.
    pub owner: String,
    pub table: String,
    pub rows: u64,
}

/// What a finished copy did.
#[derive(Debug, Clone, Default)]
pub struct CopyReport {
    pub tables: Vec<CopiedTable>,
}

impl CopyReport {
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }
}

/// Row count and an order-independent checksum of a table's values: equal on both sides
/// whatever order each backend reads them in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Digest128 {
    rows: u64,
    sum: u128,
}

impl Digest128 {
    /// Add one row (a JSON object) by its values in `columns` order, normalized across
    /// backends (a boolean is the integer SQLite stores for it).
    fn add(&mut self, row: &str, columns: &[String]) -> Result<(), Reason> {
        let value: serde_json::Value = serde_json::from_str(row)
            .map_err(|e| Reason::Internal(anyhow::anyhow!("reading a row: {e}")))?;
        let mut hash = Sha256::new();
        for column in columns {
            match value.get(column) {
                None | Some(serde_json::Value::Null) => hash.update(b"n"),
                Some(serde_json::Value::Bool(b)) => hash.update(format!("i{}", i64::from(*b))),
                Some(serde_json::Value::Number(n)) => hash.update(format!("i{n}")),
                Some(serde_json::Value::String(s)) => {
                    hash.update(format!("s{}:", s.len()));
                    hash.update(s.as_bytes());
                }
                Some(other) => hash.update(format!("j{other}")),
            }
            hash.update(b"|");
        }
        let bytes = hash.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&bytes[..16]);
        self.rows += 1;
        self.sum = self.sum.wrapping_add(u128::from_le_bytes(first));
        Ok(())
    }
}

#[derive(QueryableByName)]
struct JsonRow {
    #[diesel(sql_type = BigInt)]
    k: i64,
    #[diesel(sql_type = Text)]
    row: String,
}

#[derive(QueryableByName)]
struct PgJsonRow {
    #[diesel(sql_type = Text)]
    row: String,
}

#[derive(QueryableByName)]
struct Described {
    #[diesel(sql_type = Text)]
    source: String,
}

fn internal(message: String) -> Reason {
    Reason::Internal(anyhow::anyhow!(message))
}

/// Hand every row of `table` (as a JSON object) to `each`, a page at a time. SQLite
/// pages by rowid; PostgreSQL reads through a cursor, inside the caller's transaction
/// when there is one (the source's one moment).
fn for_each_page(
    conn: &mut Conn<'_>,
    table: &str,
    columns: &[String],
    each: &mut dyn FnMut(&[String]) -> Result<(), Reason>,
) -> Result<(), Reason> {
    match conn {
        Conn::Sqlite(c) => {
            let pairs: Vec<String> = columns
                .iter()
                .map(|col| format!("'{}', {}", col.replace('\'', "''"), ident(col)))
                .collect();
            let sql = format!(
                "SELECT rowid AS k, json_object({}) AS row FROM {} WHERE rowid > ? ORDER BY rowid LIMIT {PAGE}",
                pairs.join(", "),
                ident(table)
            );
            let mut after = i64::MIN;
            loop {
                let rows: Vec<JsonRow> =
                    diesel::sql_query(&sql).bind::<BigInt, _>(after).load(*c)?;
                let Some(last) = rows.last() else { break };
                after = last.k;
                let page: Vec<String> = rows.into_iter().map(|r| r.row).collect();
                each(&page)?;
            }
            Ok(())
        }
        Conn::Pg(c) => {
            use diesel::Connection;
            c.transaction(|c| {
                c.batch_execute(&format!(
                    "DECLARE buzz_copy_rows NO SCROLL CURSOR FOR SELECT row_to_json(t)::text AS row FROM {} t",
                    ident(table)
                ))?;
                loop {
                    let rows: Vec<PgJsonRow> =
                        diesel::sql_query(format!("FETCH FORWARD {PAGE} FROM buzz_copy_rows"))
                            .load(c)?;
                    if rows.is_empty() {
                        break;
                    }
                    let page: Vec<String> = rows.into_iter().map(|r| r.row).collect();
                    each(&page)?;
                }
                c.batch_execute("CLOSE buzz_copy_rows")?;
                Ok(())
            })
        }
    }
}

/// Insert a page of JSON rows into `table` with the destination's JSON functions.
fn insert_page(
    conn: &mut Conn<'_>,
    table: &str,
    columns: &[String],
    page: &[String],
) -> Result<(), Reason> {
    let array = format!("[{}]", page.join(","));
    let list: Vec<String> = columns.iter().map(|c| ident(c)).collect();
    let list = list.join(", ");
    match conn {
        Conn::Sqlite(c) => {
            let values: Vec<String> = columns
                .iter()
                .map(|col| format!("json_extract(value, '$.\"{}\"')", col.replace('\'', "''")))
                .collect();
            let sql = format!(
                "INSERT INTO {} ({list}) SELECT {} FROM json_each(?)",
                ident(table),
                values.join(", ")
            );
            diesel::sql_query(sql).bind::<Text, _>(array).execute(*c)?;
        }
        Conn::Pg(c) => {
            let sql = format!(
                "INSERT INTO {t} ({list}) SELECT {list} FROM json_populate_recordset(NULL::{t}, $1::json)",
                t = ident(table)
            );
            diesel::sql_query(sql).bind::<Text, _>(array).execute(*c)?;
        }
    }
    Ok(())
}

/// Does this database hold the marker of a copy that did not finish? Its description.
pub fn unfinished(conn: &mut Conn<'_>) -> Result<Option<String>, Reason> {
    #[derive(QueryableByName)]
    struct Exists {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let exists: Exists = match conn {
        Conn::Sqlite(c) => diesel::sql_query(
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?",
        )
        .bind::<Text, _>(MARKER_TABLE)
        .get_result(*c)?,
        Conn::Pg(c) => diesel::sql_query(
            "SELECT COUNT(*) AS n FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1",
        )
        .bind::<Text, _>(MARKER_TABLE)
        .get_result(*c)?,
    };
    if exists.n == 0 {
        return Ok(None);
    }
    let sql = format!("SELECT source FROM {} LIMIT 1", ident(MARKER_TABLE));
    let row: Option<Described> = crate::with_conn!(conn, |c| {
        use diesel::OptionalExtension;
        diesel::sql_query(&sql).get_result(c).optional()
    })?;
    Ok(Some(row.map(|r| r.source).unwrap_or_default()))
}

fn on<R>(owned: &mut OwnedConn, f: impl FnOnce(&mut Conn<'_>) -> R) -> R {
    match owned {
        OwnedConn::Sqlite(c) => f(&mut Conn::Sqlite(c)),
        OwnedConn::Pg(c) => f(&mut Conn::Pg(c)),
    }
}

fn execute(conn: &mut Conn<'_>, sql: &str) -> Result<(), Reason> {
    crate::with_conn!(conn, |c| c.batch_execute(sql))?;
    Ok(())
}

fn begin(conn: &mut Conn<'_>) -> Result<(), Reason> {
    match conn {
        Conn::Sqlite(_) => execute(conn, "BEGIN IMMEDIATE"),
        Conn::Pg(_) => execute(conn, "BEGIN"),
    }
}

/// Where a copy goes and what it walks.
pub struct CopyPlan<'a> {
    pub source_url: &'a str,
    pub destination_url: &'a str,
    /// Every built plugin's migrations (core's are added).
    pub plugin_sets: &'a [MigrationSet],
    /// Every built plugin's tables as (owner, table), in copy order (core's come first).
    pub plugin_tables: &'a [(&'static str, &'static str)],
    /// Every built plugin's derived tables: declared, not copied (each plugin rebuilds
    /// them on the destination).
    pub derived_tables: &'a [&'static str],
}

/// Copy the source database into the destination (see the module docs). Blocking.
pub fn copy(plan: &CopyPlan<'_>, progress: &dyn Progress) -> Result<CopyReport, CopyError> {
    if plan.source_url == plan.destination_url {
        return Err(CopyError::refused("the destination is the source database"));
    }
    let walk: Vec<(&str, &str)> = CORE_TABLES
        .iter()
        .map(|t| ("core", *t))
        .chain(plan.plugin_tables.iter().copied())
        .collect();
    let declared: Vec<&str> = walk
        .iter()
        .map(|(_, t)| *t)
        .chain(plan.derived_tables.iter().copied())
        .collect();
    let connect = |url: &str, what: &str| {
        Pool::connect(url, 1, StatementBounds::NONE)
            .map_err(|e| CopyError::refused(format!("the {what} database does not open: {e}")))
    };
    let source_pool = connect(plan.source_url, "source")?;

    // The source: fully migrated by this binary, nothing in it that nobody declares.
    let source_migrations = Migrations::new(source_pool.clone(), plan.plugin_sets);
    let status = source_migrations
        .status()
        .map_err(|e| internal(format!("source migrations: {e}")))?;
    if !status.pending.is_empty() {
        return Err(CopyError::refused(format!(
            "the source has {} pending migration(s): run `buzz-relay migrate` on it first",
            status.pending.len()
        )));
    }
    if let Some(unknown) = status.applied.iter().find(|m| m.owner == "unknown") {
        return Err(CopyError::refused(format!(
            "the source has migration {} that no part of this binary owns (a plugin this \
             build lacks): its tables would be left behind",
            unknown.version
        )));
    }
    let mut source = source_pool
        .take()
        .map_err(|e| internal(format!("source: {e}")))?;
    if let Some(marker) = on(&mut source, unfinished)? {
        return Err(CopyError::refused(format!(
            "the source holds an unfinished copy (from {marker}): it is not a complete database"
        )));
    }
    let undeclared = on(&mut source, |c| tables::undeclared(c, &declared))?;
    if !undeclared.is_empty() {
        return Err(CopyError::refused(format!(
            "the source holds tables no built part declares ({}): a copy would leave them \
             behind (a plugin's manifest must list every table its migrations create in TABLES)",
            undeclared.join(", ")
        )));
    }

    // The destination: migrated, then empty (or holding only the marker of a copy that
    // committed nothing).
    let destination_pool = connect(plan.destination_url, "destination")?;
    progress.begin("migrating the destination", None);
    Migrations::new(destination_pool.clone(), plan.plugin_sets)
        .run_pending()
        .map_err(|e| internal(format!("migrating the destination: {e}")))?;
    progress.end();
    let mut destination = destination_pool
        .take()
        .map_err(|e| internal(format!("destination: {e}")))?;
    let earlier = on(&mut destination, unfinished)?;
    for (_, table) in &walk {
        let rows = on(&mut destination, |c| tables::row_count(c, table))?;
        if rows > 0 {
            let holds = copy_error::rows(rows);
            return Err(CopyError::refused(match &earlier {
                Some(_) => format!(
                    "the destination holds a copy that did not finish (table {table} holds \
                     {holds}): drop that database, create it empty and copy again"
                ),
                None => format!(
                    "the destination is not empty: table {table} holds {holds}; copy only \
                     into an empty database (create a new one, or drop and recreate this one)"
                ),
            }));
        }
    }
    if earlier.is_none() {
        let backend = match source_pool.backend() {
            crate::store::Backend::Sqlite => "sqlite",
            crate::store::Backend::Postgres => "postgres",
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        on(&mut destination, |c| {
            execute(
                c,
                &format!(
                    "CREATE TABLE {} (source TEXT NOT NULL, started_at BIGINT NOT NULL); \
                     INSERT INTO {} (source, started_at) VALUES ('a {backend} database, copy started at unix {now}', {now});",
                    ident(MARKER_TABLE),
                    ident(MARKER_TABLE)
                ),
            )
        })?;
    }

    // Every table from one moment of the source.
    let mut report = CopyReport::default();
    let mut digests = Vec::new();
    let mut counters = Vec::new();
    on(&mut source, |src| {
        src.repeatable_read(|src| -> Result<(), Reason> {
            for (owner, table) in &walk {
                let columns = tables::columns(src, table)?;
                let mut theirs = on(&mut destination, |c| tables::columns(c, table))?;
                let mut ours = columns.clone();
                ours.sort();
                theirs.sort();
                if ours != theirs {
                    return Err(internal(format!(
                        "{table} has other columns in the destination ({}) than in the source ({})",
                        theirs.join(", "),
                        ours.join(", ")
                    )));
                }
                if let Some(column) = tables::counter_column(src, table)? {
                    counters.push((
                        *table,
                        column.clone(),
                        tables::counter_value(src, table, &column)?,
                    ));
                }
                let total = tables::row_count(src, table)?;
                progress.begin(&format!("copying {table}"), u64::try_from(total).ok());
                let mut digest = Digest128::default();
                let mut uncommitted = 0usize;
                on(&mut destination, begin)?;
                for_each_page(src, table, &columns, &mut |page| {
                    for row in page {
                        digest.add(row, &columns)?;
                    }
                    on(&mut destination, |c| insert_page(c, table, &columns, page))?;
                    uncommitted += page.len();
                    if uncommitted >= COMMIT_ROWS {
                        on(&mut destination, |c| execute(c, "COMMIT"))?;
                        on(&mut destination, begin)?;
                        uncommitted = 0;
                    }
                    progress.advance(page.len() as u64);
                    Ok(())
                })?;
                on(&mut destination, |c| execute(c, "COMMIT"))?;
                progress.end();
                report.tables.push(CopiedTable {
                    owner: (*owner).to_owned(),
                    table: (*table).to_owned(),
                    rows: digest.rows,
                });
                digests.push((*table, columns, digest));
            }
            Ok(())
        })
    })?;
    drop(source);

    // Checked table by table: what the destination now holds, read back.
    for (table, columns, expected) in &digests {
        progress.begin(&format!("checking {table}"), Some(expected.rows));
        let mut found = Digest128::default();
        on(&mut destination, |c| {
            for_each_page(c, table, columns, &mut |page| {
                for row in page {
                    found.add(row, columns)?;
                }
                progress.advance(page.len() as u64);
                Ok(())
            })
        })?;
        progress.end();
        if found != *expected {
            return Err(internal(format!(
                "{table} differs after the copy: {} rows in the source, {} in the destination{}; \
                 the destination keeps its unfinished-copy marker",
                expected.rows,
                found.rows,
                if found.rows == expected.rows {
                    " with other values"
                } else {
                    ""
                }
            ))
            .into());
        }
    }

    // Counters past every copied value (and past values the source handed out and later
    // deleted), then the marker goes, in one transaction.
    on(&mut destination, |c| -> Result<(), Reason> {
        begin(c)?;
        for (table, column, source_value) in &counters {
            #[derive(QueryableByName)]
            struct Max {
                #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
                m: Option<i64>,
            }
            let sql = format!("SELECT MAX({}) AS m FROM {}", ident(column), ident(table));
            let max: Max = crate::with_conn!(c, |c| diesel::sql_query(&sql).get_result(c))?;
            let at_least = (*source_value).max(max.m.unwrap_or(0));
            tables::advance_counter(c, table, column, at_least)?;
        }
        execute(c, &format!("DROP TABLE {}", ident(MARKER_TABLE)))?;
        execute(c, "COMMIT")
    })?;
    Ok(report)
}
