//! Which tables a database holds and who declares them. Core lists its own here; each
//! plugin lists its own in its manifest (`PluginManifest::TABLES`). `copy` walks exactly
//! the declared ones, so it refuses a database holding a table nobody declares: that
//! table would otherwise be left behind without a word.

use super::ident;
use crate::error::Reason;
use crate::store::Conn;
use crate::with_conn;
use diesel::sql_types::{BigInt, Text};
use diesel::{QueryableByName, RunQueryDsl};

/// Core's tables, parents before the tables whose foreign keys name them.
pub const CORE_TABLES: &[&str] = &[
    "communities",
    "events",
    "event_tags",
    "channels",
    "channel_members",
    "thread_metadata",
    "community_members",
    "community_sanctions",
    "relay_identity",
];

/// Tables that are bookkeeping, not data: diesel's migration record (the destination
/// gets its own by migrating), the copy marker, and SQLite's count of rewriting commits
/// (`store/change_mark.rs`: it describes its own database's commits, and only a running
/// process's kept reads compare it; a destination starts its own at zero).
const NOT_DATA: &[&str] = &[
    "__diesel_schema_migrations",
    super::copy::MARKER_TABLE,
    "event_rewrites",
];

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Every data table in the database (SQLite's internal tables, diesel's migration
/// record and the copy marker left out), sorted.
pub fn present(conn: &mut Conn<'_>) -> Result<Vec<String>, Reason> {
    let rows: Vec<Name> = match conn {
        Conn::Sqlite(c) => diesel::sql_query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
        )
        .load(*c)?,
        Conn::Pg(c) => diesel::sql_query(
            "SELECT tablename::text AS name FROM pg_tables WHERE schemaname = current_schema()",
        )
        .load(*c)?,
    };
    let mut names: Vec<String> = rows
        .into_iter()
        .map(|r| r.name)
        .filter(|n| !NOT_DATA.contains(&n.as_str()))
        .collect();
    names.sort();
    Ok(names)
}

/// Tables present that `declared` does not list (sorted).
pub fn undeclared(conn: &mut Conn<'_>, declared: &[&str]) -> Result<Vec<String>, Reason> {
    Ok(present(conn)?
        .into_iter()
        .filter(|t| !declared.contains(&t.as_str()))
        .collect())
}

/// A table's columns in their declared order.
pub fn columns(conn: &mut Conn<'_>, table: &str) -> Result<Vec<String>, Reason> {
    let rows: Vec<Name> = match conn {
        Conn::Sqlite(c) => diesel::sql_query("SELECT name FROM pragma_table_info(?) ORDER BY cid")
            .bind::<Text, _>(table)
            .load(*c)?,
        Conn::Pg(c) => diesel::sql_query(
            "SELECT column_name::text AS name FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
        )
        .bind::<Text, _>(table)
        .load(*c)?,
    };
    Ok(rows.into_iter().map(|r| r.name).collect())
}

/// Rows in `table`.
pub fn row_count(conn: &mut Conn<'_>, table: &str) -> Result<i64, Reason> {
    let sql = format!("SELECT COUNT(*) AS n FROM {}", ident(table));
    let count: Count = with_conn!(conn, |c| diesel::sql_query(&sql).get_result(c))?;
    Ok(count.n)
}

/// The column of `table` a database counter fills (SQLite `AUTOINCREMENT`, PostgreSQL
/// `serial`/identity default), if it has one.
pub fn counter_column(conn: &mut Conn<'_>, table: &str) -> Result<Option<String>, Reason> {
    let rows: Vec<Name> = match conn {
        Conn::Sqlite(c) => diesel::sql_query(
            "SELECT p.name AS name FROM pragma_table_info(?1) p, sqlite_master m \
             WHERE m.type = 'table' AND m.name = ?1 AND p.pk = 1 \
             AND upper(m.sql) LIKE '%AUTOINCREMENT%'",
        )
        .bind::<Text, _>(table)
        .load(*c)?,
        Conn::Pg(c) => diesel::sql_query(
            "SELECT column_name::text AS name FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 \
             AND column_default LIKE 'nextval(%'",
        )
        .bind::<Text, _>(table)
        .load(*c)?,
    };
    Ok(rows.into_iter().next().map(|r| r.name))
}

/// The last value `table`'s counter handed out (0 when none), which may be past the
/// largest value still stored (rows deleted since).
pub fn counter_value(conn: &mut Conn<'_>, table: &str, column: &str) -> Result<i64, Reason> {
    let count: Count = match conn {
        Conn::Sqlite(c) => diesel::sql_query(
            "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = ?), 0) AS n",
        )
        .bind::<Text, _>(table)
        .get_result(*c)?,
        Conn::Pg(c) => diesel::sql_query(
            "SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence($1, $2)::regclass), 0)::bigint AS n",
        )
        .bind::<Text, _>(ident(table))
        .bind::<Text, _>(column)
        .get_result(*c)?,
    };
    Ok(count.n)
}

/// Advance `table`'s counter so the next value it hands out is past `at_least` (never
/// moves it back).
pub fn advance_counter(
    conn: &mut Conn<'_>,
    table: &str,
    column: &str,
    at_least: i64,
) -> Result<(), Reason> {
    if at_least < 1 {
        return Ok(());
    }
    match conn {
        Conn::Sqlite(c) => {
            diesel::sql_query("UPDATE sqlite_sequence SET seq = MAX(seq, ?1) WHERE name = ?2")
                .bind::<BigInt, _>(at_least)
                .bind::<Text, _>(table)
                .execute(*c)?;
            diesel::sql_query(
                "INSERT INTO sqlite_sequence (name, seq) SELECT ?2, ?1 \
                 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = ?2)",
            )
            .bind::<BigInt, _>(at_least)
            .bind::<Text, _>(table)
            .execute(*c)?;
        }
        Conn::Pg(c) => {
            diesel::sql_query(
                "SELECT setval(pg_get_serial_sequence($1, $2), \
                 GREATEST($3, COALESCE(pg_sequence_last_value(pg_get_serial_sequence($1, $2)::regclass), 0))) \
                 ::text AS name",
            )
            .bind::<Text, _>(ident(table))
            .bind::<Text, _>(column)
            .bind::<BigInt, _>(at_least)
            .get_result::<Name>(*c)?;
        }
    }
    Ok(())
}
