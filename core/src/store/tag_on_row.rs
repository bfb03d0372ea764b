//! "This row has a tag `name` with one of `values`", checked on the `events` row a plan
//! already reached: `EXISTS (SELECT 1 FROM event_tags WHERE event_seq = events.seq AND
//! name = ? AND value …)`, one probe of `event_tags`' primary key per row.
//!
//! Why not `seq IN (SELECT event_seq FROM event_tags WHERE …)` as for other tags: for
//! `#h` that list is every message of the channel, so the planner either looks every one
//! of them up and sorts them, or builds the whole list before reading the first row — a
//! read that grows with the channel (issue 45). An event's channel is its `h` tag, so
//! `#h` reads walk the channel index in answer order and check the tag on the few rows
//! the limit lets through (`query/filter_sql.rs`).
//!
//! Why ` OFFSET 0` in the subquery on PostgreSQL: without it the planner rewrites the
//! check, either into a semi-join with `event_tags` (estimated to leave a handful of
//! rows, so it read the whole channel and sorted it) or into a hashed `seq IN (…)` (a
//! scan of every `h` tag of the channel before the first row): 240 ms for 20 messages
//! of a 15,000-message channel (issue 39). An `OFFSET` keeps the subquery as it is
//! written: one probe of `event_tags`' primary key for each row the channel index
//! yields in answer order (0.6 ms). SQLite runs it that way already.

use super::one_of::{one_of, OneOf};
use super::schema::{event_tags, events};
use diesel::backend::Backend;
use diesel::expression::ValidGrouping;
use diesel::expression::{is_aggregate, AppearsOnTable, Expression, SelectableExpression};
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Bool, HasSqlType, Text};
use diesel::QueryResult;

/// The row has a tag `name` whose value is one of `values`.
pub(crate) struct TagOnRow {
    name: String,
    values: OneOf<event_tags::value, String>,
}

/// The `events` row has a tag `name` with one of `values`.
pub(crate) fn tag_on_row(name: &str, values: Vec<String>) -> TagOnRow {
    TagOnRow {
        name: name.to_owned(),
        values: one_of(event_tags::value, values),
    }
}

impl Expression for TagOnRow {
    type SqlType = Bool;
}

impl<QS> AppearsOnTable<QS> for TagOnRow where events::seq: AppearsOnTable<QS> {}

impl<QS> SelectableExpression<QS> for TagOnRow where events::seq: AppearsOnTable<QS> {}

impl ValidGrouping<()> for TagOnRow {
    type IsAggregate = is_aggregate::Never;
}

impl QueryId for TagOnRow {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<DB> QueryFragment<DB> for TagOnRow
where
    DB: Backend + HasSqlType<Text> + 'static,
    String: diesel::serialize::ToSql<Text, DB>,
    OneOf<event_tags::value, String>: QueryFragment<DB>,
    event_tags::event_seq: QueryFragment<DB>,
    event_tags::name: QueryFragment<DB>,
    events::seq: QueryFragment<DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        out.push_sql("EXISTS (SELECT 1 FROM ");
        out.push_identifier("event_tags")?;
        out.push_sql(" WHERE ");
        event_tags::event_seq.walk_ast(out.reborrow())?;
        out.push_sql(" = ");
        events::seq.walk_ast(out.reborrow())?;
        out.push_sql(" AND ");
        event_tags::name.walk_ast(out.reborrow())?;
        out.push_sql(" = ");
        out.push_bind_param::<Text, String>(&self.name)?;
        out.push_sql(" AND ");
        self.values.walk_ast(out.reborrow())?;
        if std::any::TypeId::of::<DB>() == std::any::TypeId::of::<diesel::pg::Pg>() {
            // Keeps PostgreSQL from rewriting the check (see the module doc).
            out.push_sql(" OFFSET 0");
        }
        out.push_sql(")");
        Ok(())
    }
}
