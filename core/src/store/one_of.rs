//! `column IN (values)` written so that the statement's text does not depend on how many
//! values there are, and a read connection may keep it prepared.
//!
//! Why: diesel's `eq_any` writes a list as one placeholder per value on SQLite and marks
//! the whole statement as never to be cached, since every length is another text. So
//! every REQ was parsed and planned again: `sqlite3_prepare` was about a fifth of the
//! read threads' CPU on the mixed read load (issue 23). [`OneOf`] writes one value as
//! `column = ?` (the planner then knows a single `kind` or `author` reads an index in
//! answer order, as it did with a one-value list) and more as
//! `column IN (SELECT value FROM json_each(?))`, one JSON array bound as text. On
//! PostgreSQL one value is `column = $1` too and more are `column = ANY($1)`, one array.
//!
//! A statement's text then depends on the filter's shape only (which fields it has,
//! whether each list holds one value or more), and the shapes a connection keeps are
//! bounded separately (`conn_state.rs`): a client could still send many shapes.

use diesel::expression::{
    is_aggregate, AppearsOnTable, Expression, SelectableExpression, ValidGrouping,
};
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{Array, Bool, HasSqlType, SingleValue, Text};
use diesel::sqlite::Sqlite;
use diesel::QueryResult;
use std::sync::OnceLock;

/// `column` is one of `values` (see the module doc for the SQL on each backend).
#[derive(Debug, Clone)]
pub(crate) struct OneOf<C, T> {
    column: C,
    values: Vec<T>,
    /// `values` as a JSON array, for SQLite's `json_each` when there are several: made
    /// when the statement is written for SQLite, never for PostgreSQL.
    json: OnceLock<String>,
}

/// `column` is one of `values`.
pub(crate) fn one_of<C, T>(column: C, values: Vec<T>) -> OneOf<C, T> {
    OneOf {
        column,
        values,
        json: OnceLock::new(),
    }
}

impl<C, T> Expression for OneOf<C, T> {
    type SqlType = Bool;
}

impl<C: AppearsOnTable<QS>, T, QS> AppearsOnTable<QS> for OneOf<C, T> {}

impl<C: SelectableExpression<QS>, T, QS> SelectableExpression<QS> for OneOf<C, T> {}

impl<C, T> ValidGrouping<()> for OneOf<C, T> {
    type IsAggregate = is_aggregate::Never;
}

impl<C, T> QueryId for OneOf<C, T> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<C, T, ST> QueryFragment<Sqlite> for OneOf<C, T>
where
    C: Expression<SqlType = ST> + QueryFragment<Sqlite>,
    ST: SingleValue,
    Sqlite: HasSqlType<ST>,
    T: ToSql<ST, Sqlite> + serde::Serialize,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        match self.values.as_slice() {
            [] => out.push_sql("1 = 0"),
            [one] => {
                self.column.walk_ast(out.reborrow())?;
                out.push_sql(" = ");
                out.push_bind_param::<ST, T>(one)?;
            }
            _ => {
                self.column.walk_ast(out.reborrow())?;
                out.push_sql(" IN (SELECT value FROM json_each(");
                // Strings and integers always serialize; an empty array matches nothing.
                let json = self.json.get_or_init(|| {
                    serde_json::to_string(&self.values).unwrap_or_else(|_| "[]".to_owned())
                });
                out.push_bind_param::<Text, String>(json)?;
                out.push_sql("))");
            }
        }
        Ok(())
    }
}

/// One value is `column = $n`, never `column = ANY($n)`: before PostgreSQL 17 an `= ANY`
/// condition on an index's second column makes that index scan unordered, so a read of one
/// channel (`community_id, channel_id, created_at, id`) fetched and sorted the whole
/// channel to return its newest 20 rows (issue 39's bystander: 120-170 ms at 300k events).
/// With `=` the scan walks the index in answer order and stops at the limit.
impl<C, T, ST> QueryFragment<Pg> for OneOf<C, T>
where
    C: Expression<SqlType = ST> + QueryFragment<Pg>,
    ST: SingleValue,
    Pg: HasSqlType<ST>,
    T: ToSql<ST, Pg>,
    Vec<T>: ToSql<Array<ST>, Pg>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        match self.values.as_slice() {
            [one] => {
                out.push_sql(" = ");
                out.push_bind_param::<ST, T>(one)?;
            }
            _ => {
                out.push_sql(" = ANY(");
                out.push_bind_param::<Array<ST>, Vec<T>>(&self.values)?;
                out.push_sql(")");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conn_state::{bound_statement_cache, ConnState, MAX_CACHED_STATEMENTS};
    use diesel::connection::SimpleConnection;
    use diesel::prelude::*;

    diesel::table! {
        notes (seq) {
            seq -> BigInt,
            kind -> Integer,
            author -> Text,
            channel -> Nullable<Text>,
        }
    }

    /// Texts a JSON array must carry unchanged: quotes, backslashes, brackets, control
    /// and non-ASCII characters, a JSON-looking string.
    const AWKWARD: [&str; 6] = [
        "plain",
        "a \"quoted\" \\ one",
        "[1,2]",
        "tab\tnew\nline",
        "é 🦀",
        "",
    ];

    fn connection() -> SqliteConnection {
        let mut conn = SqliteConnection::establish(":memory:").expect("sqlite");
        conn.batch_execute(
            "CREATE TABLE notes (seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL,
                                 author TEXT NOT NULL, channel TEXT);",
        )
        .expect("table");
        for (i, author) in AWKWARD.iter().enumerate() {
            let seq = i64::try_from(i).expect("seq") + 1;
            diesel::insert_into(notes::table)
                .values((
                    notes::seq.eq(seq),
                    notes::kind.eq(i32::try_from(i % 3).expect("kind")),
                    notes::author.eq(*author),
                    notes::channel.eq((i % 2 == 0).then(|| format!("c{i}"))),
                ))
                .execute(&mut conn)
                .expect("row");
        }
        conn.set_instrumentation(ConnState::new());
        conn
    }

    fn cached(conn: &mut SqliteConnection) -> usize {
        ConnState::of(conn).expect("counted").cached_statements()
    }

    fn seqs_by_author(conn: &mut SqliteConnection, authors: &[&str]) -> Vec<i64> {
        let authors: Vec<String> = authors.iter().map(|a| (*a).to_owned()).collect();
        notes::table
            .select(notes::seq)
            .filter(one_of(notes::author, authors))
            .order(notes::seq)
            .load(conn)
            .expect("query")
    }

    /// Every length matches exactly the rows `eq_any` would, texts that need JSON
    /// escaping included, on text, integer and nullable columns.
    #[test]
    fn matches_what_its_values_name() {
        let mut conn = connection();
        assert_eq!(seqs_by_author(&mut conn, &[]), Vec::<i64>::new());
        assert_eq!(seqs_by_author(&mut conn, &["a \"quoted\" \\ one"]), vec![2]);
        assert_eq!(seqs_by_author(&mut conn, &AWKWARD), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            seqs_by_author(&mut conn, &["[1,2]", "nobody", ""]),
            vec![3, 6]
        );
        let by_kind: Vec<i64> = notes::table
            .select(notes::seq)
            .filter(one_of(notes::kind, vec![0, 2]))
            .order(notes::seq)
            .load(&mut conn)
            .expect("kinds");
        assert_eq!(by_kind, vec![1, 3, 4, 6]);
        let by_channel: Vec<i64> = notes::table
            .select(notes::seq)
            .filter(one_of(
                notes::channel,
                vec!["c0".to_owned(), "c4".to_owned(), "c1".to_owned()],
            ))
            .order(notes::seq)
            .load(&mut conn)
            .expect("channels");
        assert_eq!(by_channel, vec![1, 5]);
    }

    /// However many values a list holds, a connection prepares its statement once for
    /// one value and once for several: not once per length, as `eq_any` did.
    #[test]
    fn every_length_shares_one_prepared_statement() {
        let mut conn = connection();
        for n in 1..=AWKWARD.len() {
            seqs_by_author(&mut conn, &AWKWARD[..n]);
            seqs_by_author(&mut conn, &AWKWARD[..n]);
        }
        assert_eq!(cached(&mut conn), 2);
    }

    /// A client sending shape after shape cannot grow a connection's statements past the
    /// bound: past it they are all let go, and the statements in use come back.
    #[test]
    fn the_cache_is_bounded() {
        let mut conn = connection();
        for n in 0..=MAX_CACHED_STATEMENTS {
            // A distinct cacheable text each time, as distinct filter shapes would be.
            let text = format!("UPDATE notes SET kind = kind WHERE seq = ? + {n}");
            let binds = [crate::store::prepared::Val::I(0)];
            crate::store::prepared::CachedStatement::new(&text, &binds)
                .execute(&mut conn)
                .expect("statement");
            assert_eq!(cached(&mut conn), n + 1);
            assert_eq!(bound_statement_cache(&mut conn), n == MAX_CACHED_STATEMENTS);
        }
        assert_eq!(cached(&mut conn), 0);
        assert_eq!(seqs_by_author(&mut conn, &["plain"]), vec![1]);
        assert_eq!(cached(&mut conn), 1);
    }
}
