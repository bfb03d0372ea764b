//! One SQL text for both backends. Statements are written once with `?` placeholders
//! (SQLite's) and numbered (`$1`, `$2`, …) for PostgreSQL; everything else in them is
//! syntax both accept (`ON CONFLICT … excluded`, `CASE`, `TRUE`/`FALSE`). Raw SQL here
//! because these reads join core's `events` and `thread_metadata` with the plugin's own
//! tables, which core's diesel schema does not declare joinable.
//!
//! Known cost: diesel never caches `sql_query` statements as prepared statements, so on
//! PostgreSQL every statement here is parsed and planned on each call (about 1 ms under
//! load; a 20-row sidebar runs ~8 statements per row). The cost does not grow with
//! history (`read-state-bench`), but moving the per-row reads to the diesel DSL (cached
//! per connection) is the next step for PostgreSQL latency.

use buzz_core::error::Reason;
use buzz_core::store::{Backend, Conn};
use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryableByName, RunQueryDsl};

/// A bound value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Val<'a> {
    I(i64),
    T(&'a str),
}

/// Run a query written with `?` placeholders, binding `binds` in order.
pub(crate) fn load<R>(conn: &mut Conn<'_>, text: &str, binds: &[Val<'_>]) -> Result<Vec<R>, Reason>
where
    R: QueryableByName<Sqlite> + QueryableByName<Pg> + 'static,
{
    let text = sql(conn.backend(), text);
    match conn {
        Conn::Sqlite(c) => {
            let mut q = diesel::sql_query(text).into_boxed::<Sqlite>();
            for b in binds {
                q = match *b {
                    Val::I(v) => q.bind::<BigInt, _>(v),
                    Val::T(s) => q.bind::<Text, _>(s.to_owned()),
                };
            }
            Ok(q.load(*c)?)
        }
        Conn::Pg(c) => {
            let mut q = diesel::sql_query(text).into_boxed::<Pg>();
            for b in binds {
                q = match *b {
                    Val::I(v) => q.bind::<BigInt, _>(v),
                    Val::T(s) => q.bind::<Text, _>(s.to_owned()),
                };
            }
            Ok(q.load(*c)?)
        }
    }
}

/// Like [`load`], for the first row only.
pub(crate) fn first<R>(
    conn: &mut Conn<'_>,
    text: &str,
    binds: &[Val<'_>],
) -> Result<Option<R>, Reason>
where
    R: QueryableByName<Sqlite> + QueryableByName<Pg> + 'static,
{
    Ok(load(conn, text, binds)?.into_iter().next())
}

/// `text` with placeholders as `backend` spells them.
pub(crate) fn sql(backend: Backend, text: &str) -> String {
    match backend {
        Backend::Sqlite => text.to_owned(),
        Backend::Postgres => {
            let mut out = String::with_capacity(text.len() + 16);
            let mut n = 0;
            for ch in text.chars() {
                if ch == '?' {
                    n += 1;
                    out.push('$');
                    out.push_str(&n.to_string());
                } else {
                    out.push(ch);
                }
            }
            out
        }
    }
}

/// One optional BIGINT (`MAX(...) AS v`, `COUNT(*) AS v`).
#[derive(QueryableByName)]
pub(crate) struct OptI64 {
    #[diesel(sql_type = Nullable<BigInt>)]
    pub v: Option<i64>,
}

/// One BIGINT.
#[derive(QueryableByName)]
pub(crate) struct I64 {
    #[diesel(sql_type = BigInt)]
    pub v: i64,
}

/// One id and its author time (display order).
#[derive(QueryableByName)]
pub(crate) struct IdAt {
    #[diesel(sql_type = Text)]
    pub id: String,
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_postgres_only() {
        let text = "SELECT a FROM t WHERE b = ? AND c > ?";
        assert_eq!(sql(Backend::Sqlite, text), text);
        assert_eq!(
            sql(Backend::Postgres, text),
            "SELECT a FROM t WHERE b = $1 AND c > $2"
        );
    }
}
