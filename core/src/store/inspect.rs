//! What status tools read about the schema itself: when each migration was applied and,
//! on PostgreSQL, the catalog flags of every index (an index built `CONCURRENTLY` that
//! failed stays behind invalid, unused by the planner but still paid for on writes).

use crate::error::Reason;
use crate::store::Conn;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};

/// When a migration was applied (the migration table's own timestamp, as text).
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct AppliedAt {
    #[diesel(sql_type = Text)]
    pub version: String,
    #[diesel(sql_type = Text)]
    pub run_on: String,
}

/// One PostgreSQL index and its `pg_index` flags.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct IndexState {
    #[diesel(sql_type = Text)]
    pub table_name: String,
    #[diesel(sql_type = Text)]
    pub name: String,
    /// `indisvalid`: the planner may use it.
    #[diesel(sql_type = Bool)]
    pub valid: bool,
    /// `indisready`: writes maintain it.
    #[diesel(sql_type = Bool)]
    pub ready: bool,
    /// `indislive`: not being dropped.
    #[diesel(sql_type = Bool)]
    pub live: bool,
    #[diesel(sql_type = Text)]
    pub definition: String,
}

impl IndexState {
    /// Every flag true: the index is whole and in use.
    pub fn healthy(&self) -> bool {
        self.valid && self.ready && self.live
    }
}

/// `(version, applied at)` of every applied migration, oldest first.
pub fn migration_times(conn: &mut Conn<'_>) -> Result<Vec<AppliedAt>, Reason> {
    Ok(match conn {
        Conn::Sqlite(c) => diesel::sql_query(
            "SELECT version, CAST(run_on AS TEXT) AS run_on \
             FROM __diesel_schema_migrations ORDER BY version",
        )
        .load(*c)?,
        Conn::Pg(c) => diesel::sql_query(
            "SELECT version::text AS version, to_char(run_on, 'YYYY-MM-DD HH24:MI:SS') AS run_on \
             FROM __diesel_schema_migrations ORDER BY version",
        )
        .load(*c)?,
    })
}

/// Every index of the current schema with its `pg_index` flags (PostgreSQL); `None` on
/// SQLite, which has no such state.
pub fn index_states(conn: &mut Conn<'_>) -> Result<Option<Vec<IndexState>>, Reason> {
    match conn {
        Conn::Sqlite(_) => Ok(None),
        Conn::Pg(c) => Ok(Some(
            diesel::sql_query(
                "SELECT t.relname::text AS table_name, i.relname::text AS name, \
                        x.indisvalid AS valid, x.indisready AS ready, x.indislive AS live, \
                        pg_get_indexdef(x.indexrelid) AS definition \
                 FROM pg_index x \
                 JOIN pg_class i ON i.oid = x.indexrelid \
                 JOIN pg_class t ON t.oid = x.indrelid \
                 JOIN pg_namespace n ON n.oid = t.relnamespace \
                 WHERE n.nspname = current_schema() \
                 ORDER BY t.relname, i.relname",
            )
            .load(*c)?,
        )),
    }
}
