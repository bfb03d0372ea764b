//! One SQL text for both backends, run as a prepared statement that each connection
//! keeps. A statement is written once with `?` where a value goes; diesel writes each
//! placeholder as its backend spells it (`?` on SQLite, `$1`, `$2`, … on PostgreSQL);
//! everything else in it must be syntax both accept (`ON CONFLICT … excluded`, `CASE`,
//! `TRUE`/`FALSE`).
//!
//! Why: diesel prepares a statement once per connection only when it may cache it, and
//! it never caches `diesel::sql_query`, any `UPDATE` (its changeset could leave columns
//! out) or `ON CONFLICT … DO UPDATE`. Such a statement is parsed and planned on every
//! call: on SQLite a parse on the storage writer for every ingested message, on
//! PostgreSQL an extra round trip per statement. [`CachedStatement`] tells diesel its text is
//! safe to cache, so the connection's statement cache (keyed by the SQL text and bind
//! types) prepares it once, and later calls only bind and execute.

use crate::error::Reason;
use crate::store::Conn;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, Bool, HasSqlType, Nullable, Text, Untyped};
use diesel::{QueryResult, QueryableByName, RunQueryDsl};

/// A bound value.
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    I(i64),
    T(&'a str),
    B(bool),
    /// A BIGINT that may be NULL.
    N(Option<i64>),
}

/// A statement written with `?` placeholders and its values, cached as a prepared
/// statement by the connection (see the module doc). The text must not contain `?`
/// anywhere but as a placeholder (no string literals with one).
pub struct CachedStatement<'a> {
    text: &'a str,
    binds: &'a [Val<'a>],
}

impl<'a> CachedStatement<'a> {
    pub fn new(text: &'a str, binds: &'a [Val<'a>]) -> CachedStatement<'a> {
        CachedStatement { text, binds }
    }
}

impl<DB> QueryFragment<DB> for CachedStatement<'_>
where
    DB: Backend + HasSqlType<BigInt> + HasSqlType<Text> + HasSqlType<Bool>,
    i64: ToSql<BigInt, DB>,
    str: ToSql<Text, DB>,
    bool: ToSql<Bool, DB>,
    Option<i64>: ToSql<Nullable<BigInt>, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        let mut parts = self.text.split('?');
        if let Some(head) = parts.next() {
            out.push_sql(head);
        }
        let mut binds = self.binds.iter();
        for part in parts {
            match binds.next() {
                Some(Val::I(v)) => out.push_bind_param::<BigInt, i64>(v)?,
                Some(Val::T(s)) => out.push_bind_param::<Text, str>(s)?,
                Some(Val::B(b)) => out.push_bind_param::<Bool, bool>(b)?,
                Some(Val::N(n)) => out.push_bind_param::<Nullable<BigInt>, Option<i64>>(n)?,
                None => {
                    return Err(diesel::result::Error::QueryBuilderError(
                        "fewer values than placeholders".into(),
                    ))
                }
            }
            out.push_sql(part);
        }
        if binds.next().is_some() {
            return Err(diesel::result::Error::QueryBuilderError(
                "more values than placeholders".into(),
            ));
        }
        Ok(())
    }
}

/// No static id: the cache keys the statement by its SQL text and bind types.
impl QueryId for CachedStatement<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for CachedStatement<'_> {
    type SqlType = Untyped;
}

impl<C> RunQueryDsl<C> for CachedStatement<'_> {}

/// Run a query written with `?` placeholders, binding `binds` in order.
pub fn load<R>(conn: &mut Conn<'_>, text: &str, binds: &[Val<'_>]) -> Result<Vec<R>, Reason>
where
    R: QueryableByName<diesel::sqlite::Sqlite> + QueryableByName<diesel::pg::Pg> + 'static,
{
    let query = CachedStatement::new(text, binds);
    Ok(crate::with_conn!(conn, |c| query.load(c))?)
}

/// Like [`load`], for the first row only.
pub fn first<R>(conn: &mut Conn<'_>, text: &str, binds: &[Val<'_>]) -> Result<Option<R>, Reason>
where
    R: QueryableByName<diesel::sqlite::Sqlite> + QueryableByName<diesel::pg::Pg> + 'static,
{
    Ok(load(conn, text, binds)?.into_iter().next())
}

/// Run a statement that returns no rows; the number of rows it changed.
pub fn execute(conn: &mut Conn<'_>, text: &str, binds: &[Val<'_>]) -> Result<usize, Reason> {
    let query = CachedStatement::new(text, binds);
    Ok(crate::with_conn!(conn, |c| query.execute(c))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::query_builder::QueryBuilder;

    fn text_for<DB>(query: &CachedStatement<'_>) -> String
    where
        DB: Backend + HasSqlType<BigInt> + HasSqlType<Text> + HasSqlType<Bool> + Default,
        DB::QueryBuilder: Default,
        i64: ToSql<BigInt, DB>,
        str: ToSql<Text, DB>,
        bool: ToSql<Bool, DB>,
        Option<i64>: ToSql<Nullable<BigInt>, DB>,
    {
        let mut builder = DB::QueryBuilder::default();
        let backend = DB::default();
        query
            .to_sql(&mut builder, &backend)
            .expect("placeholders and values agree");
        builder.finish()
    }

    #[test]
    fn placeholders_are_spelled_per_backend() {
        let binds = [Val::I(1), Val::T("x")];
        let query = CachedStatement::new("SELECT a FROM t WHERE b = ? AND c > ?", &binds);
        assert_eq!(
            text_for::<diesel::sqlite::Sqlite>(&query),
            "SELECT a FROM t WHERE b = ? AND c > ?"
        );
        assert_eq!(
            text_for::<diesel::pg::Pg>(&query),
            "SELECT a FROM t WHERE b = $1 AND c > $2"
        );
    }

    #[test]
    fn placeholder_and_value_counts_must_agree() {
        let mut builder = <diesel::pg::Pg as Backend>::QueryBuilder::default();
        let one = [Val::I(1)];
        assert!(CachedStatement::new("SELECT ?, ?", &one)
            .to_sql(&mut builder, &diesel::pg::Pg)
            .is_err());
        let mut builder = <diesel::pg::Pg as Backend>::QueryBuilder::default();
        assert!(CachedStatement::new("SELECT 1", &one)
            .to_sql(&mut builder, &diesel::pg::Pg)
            .is_err());
    }
}
