//! A filter with a tag (`#t`, `#p`, `#e`, … — not `#h`) read by walking that tag's index
//! newest first, so a REQ for the newest 20 of a value's 2,500 events reads about 20 of
//! them instead of all 2,500 and a sort (issue 45: `{"#t":[x],"limit":20}` grew 58× from
//! 20,000 to 1,000,000 events, as its value's events did).
//!
//! How: each `event_tags` row carries its event's `created_at`, and `event_tags_lookup`
//! is `(community_id, name, value, created_at DESC, event_seq)`. The statement reads the
//! tag rows and reaches each one's event, ordered by the tag row's `created_at` (the same
//! number as the event's, but the planner only knows the index order of the column it
//! walks), then `events.id` for ties, so the index is walked in answer order and the read
//! stops at the limit; the filter's other fields and the reader's scope are checked on
//! each event the walk reaches, as before.
//!
//! An event carrying the value twice (`["t","x"],["t","x"]`), or two of the filter's
//! values, has two tag rows and would be answered twice: [`FirstOfItsTags`] keeps only
//! the tag row with the lowest position among the event's matching ones, one probe of
//! `event_tags`' primary key per row.
//!
//! Not for a filter with `#h` (the channel index reads it, `tag_on_row.rs`) or with `ids`
//! (the identity index reads those directly).
//!
//! One walk, two statements. SQLite plans with pinned statistics (`planner_stats.rs`), so
//! a plain `events ⋈ event_tags` join always walks the tag index and reaches each event
//! by its primary key. PostgreSQL plans from statistics that lag a table growing fast:
//! with `event_tags` and `events` never analysed, or analysed nearly empty, it turned
//! that join around — a scan of the value's tag rows for each row of the community's
//! `events_wide`, or the reverse: 8 s statement timeouts in
//! `core/tests/live_stored_race.rs` at a few thousand events (and ~1 s for
//! `{"#t":[x],"limit":20}` at a million, `docs/benchmarks.md`). So on
//! PostgreSQL the walk is [`Lateral`], a statement with one possible join order: the
//! event is a `LATERAL` subquery of the tag row, fenced by `OFFSET 0` so it is neither
//! flattened into a join nor given the scope to pick another index with — one
//! primary-key probe per tag row, after it. Its inner order is the tag row's time alone,
//! which a one-value walk of `event_tags_lookup` yields without a sort; `FETCH FIRST n
//! ROWS WITH TIES` and an outer sort of those rows by `id` make the same answer as
//! `ORDER BY created_at DESC, id LIMIT n`. What the planner still chooses is only how to
//! read the tag rows: with no statistics it expects one row and walks the index; with
//! them it weighs the limit. `core/tests/read_plans.rs` checks both.

use crate::store::one_of::{one_of, OneOf};
use crate::store::schema::{event_tags, events};
use buzz_nostr::filter::Filter;
use diesel::backend::Backend;
use diesel::expression::{is_aggregate, AppearsOnTable, Expression, ValidGrouping};
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::BoolOrNullableBool;
use diesel::sql_types::{BigInt, Bool, HasSqlType, Text};
use diesel::{QueryResult, RunQueryDsl};

/// The tag a filter's read walks, and the rest of the filter, checked on each event.
pub(super) struct TagWalk {
    pub(super) name: String,
    pub(super) values: Vec<String>,
    /// The filter without the walked tag.
    pub(super) rest: Filter,
}

impl TagWalk {
    /// The walk for `filter`: its first tag other than `h`, when it names no channel and
    /// no ids. Both backends walk; only the statement differs ([`Lateral`] on PostgreSQL).
    pub(super) fn of(filter: &Filter) -> Option<TagWalk> {
        if filter.ids.is_some() || filter.channels().is_some() {
            return None;
        }
        let (name, values) = filter.tags.iter().next()?;
        let mut rest = filter.clone();
        rest.tags.remove(name);
        Some(TagWalk {
            name: name.clone(),
            values: values.clone(),
            rest,
        })
    }

    /// The tag rows the walk reads: this tag, one of its values, each event once.
    pub(super) fn first_of_its_tags(&self) -> FirstOfItsTags {
        FirstOfItsTags {
            name: self.name.clone(),
            values: one_of(EarlierValue, self.values.clone()),
        }
    }
}

/// Narrow a boxed `events ⋈ event_tags` query to the tag rows `$walk` reads.
macro_rules! tag_walked {
    ($q:expr, $walk:expr, $community_id:expr) => {{
        let walk: &TagWalk = $walk;
        $q.filter(event_tags::community_id.eq($community_id))
            .filter(event_tags::name.eq(walk.name.clone()))
            .filter(one_of(event_tags::value, walk.values.clone()))
            .filter(walk.first_of_its_tags())
    }};
}
/// The rest of a walked filter on each event the walk reaches: its fields, and each
/// other tag checked on the row (`tag_on_row.rs`: one primary-key probe per row, where a
/// `seq IN (…)` list would collect every event of that tag first).
macro_rules! walk_rest {
    ($q:expr, $walk:expr) => {{
        let walk: &TagWalk = $walk;
        let mut q = narrowed_fields!($q, &walk.rest);
        for (name, values) in &walk.rest.tags {
            q = q.filter(tag_on_row(name, values.clone()));
        }
        q
    }};
}
pub(super) use {tag_walked, walk_rest};

/// Conditions gathered with the same `.filter(…)` calls a boxed query takes, so
/// `scoped!`, `tag_walked!` and `walk_rest!` write a [`Lateral`] statement's conditions
/// exactly as they write the SQLite join's.
pub(super) struct Where<QS> {
    all: Vec<Box<dyn QueryFragment<Pg>>>,
    /// Conditions are checked to be on `QS`'s columns when they are added.
    table: std::marker::PhantomData<QS>,
}

impl<QS> Where<QS> {
    pub(super) fn new() -> Where<QS> {
        Where {
            all: Vec::new(),
            table: std::marker::PhantomData,
        }
    }

    pub(super) fn filter<E>(mut self, condition: E) -> Where<QS>
    where
        E: Expression + AppearsOnTable<QS> + QueryFragment<Pg> + 'static,
        E::SqlType: BoolOrNullableBool,
    {
        self.all.push(Box::new(condition));
        self
    }

    fn walk_ast<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>, first: &mut bool) -> QueryResult<()> {
        for condition in &self.all {
            out.push_sql(if *first { " WHERE (" } else { " AND (" });
            *first = false;
            condition.walk_ast(out.reborrow())?;
            out.push_sql(")");
        }
        Ok(())
    }
}

/// The walk on PostgreSQL, a statement whose join order no statistics can turn around
/// (see the module doc):
///
/// ```sql
/// SELECT walked.* FROM (
///   SELECT <columns> FROM event_tags
///   CROSS JOIN LATERAL (SELECT * FROM events WHERE events.seq = event_tags.event_seq
///                       OFFSET 0) AS events
///   WHERE <tag rows> AND <scope and rest of the filter on events>
///   ORDER BY event_tags.created_at DESC FETCH FIRST $n ROWS WITH TIES) AS walked
/// ORDER BY walked.created_at DESC, walked.id LIMIT $n
/// ```
///
/// `<columns>` must name `created_at` and `id` (the outer order reads them by name).
pub(super) struct Lateral<S> {
    pub(super) columns: S,
    pub(super) tags: Where<event_tags::table>,
    pub(super) rows: Where<events::table>,
    pub(super) limit: i64,
}

impl<S> QueryFragment<Pg> for Lateral<S>
where
    S: QueryFragment<Pg>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("SELECT walked.* FROM (SELECT ");
        self.columns.walk_ast(out.reborrow())?;
        // The events row is a subquery of the tag row (LATERAL) fenced by `OFFSET 0`, so it
        // can only be read once per tag row, after it, and only by its primary key: the
        // planner may neither flatten it into a join it could reorder nor push the scope
        // into it (which would offer `events_wide` or `events_by_time` for the probe).
        out.push_sql(
            " FROM \"event_tags\" CROSS JOIN LATERAL (SELECT * FROM \"events\" \
             WHERE \"events\".\"seq\" = \"event_tags\".\"event_seq\" OFFSET 0) AS \"events\"",
        );
        let mut first = true;
        self.tags.walk_ast(&mut out, &mut first)?;
        self.rows.walk_ast(&mut out, &mut first)?;
        // Ordered by the tag row's time alone, the order `event_tags_lookup` yields for
        // one value, so no sort stands between the walk and the limit however few rows the
        // planner expects (with `, id` it sorted all of a value's rows whenever it
        // expected one). `WITH TIES` keeps every row of the last second, so the outer
        // sort by `id` picks the same rows as `ORDER BY created_at DESC, id LIMIT n`.
        out.push_sql(" ORDER BY \"event_tags\".\"created_at\" DESC FETCH FIRST ");
        out.push_bind_param::<BigInt, i64>(&self.limit)?;
        out.push_sql(
            " ROWS WITH TIES) AS walked ORDER BY walked.created_at DESC, walked.id ASC LIMIT ",
        );
        out.push_bind_param::<BigInt, i64>(&self.limit)?;
        Ok(())
    }
}

/// No static id: the connection caches the statement by its text, as any boxed query.
impl<S> QueryId for Lateral<S> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<S: Expression> Query for Lateral<S> {
    type SqlType = S::SqlType;
}

impl<S, C> RunQueryDsl<C> for Lateral<S> {}

/// No tag of the same event before this one (a lower position) has the walked name and
/// one of its values: `NOT EXISTS (SELECT 1 FROM event_tags AS earlier WHERE …)`.
pub(super) struct FirstOfItsTags {
    name: String,
    values: OneOf<EarlierValue, String>,
}

impl Expression for FirstOfItsTags {
    type SqlType = Bool;
}

impl<QS> AppearsOnTable<QS> for FirstOfItsTags where event_tags::event_seq: AppearsOnTable<QS> {}

impl<QS> diesel::SelectableExpression<QS> for FirstOfItsTags where
    event_tags::event_seq: AppearsOnTable<QS>
{
}

impl ValidGrouping<()> for FirstOfItsTags {
    type IsAggregate = is_aggregate::Never;
}

impl QueryId for FirstOfItsTags {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<DB> QueryFragment<DB> for FirstOfItsTags
where
    DB: Backend + HasSqlType<Text> + 'static,
    String: diesel::serialize::ToSql<Text, DB>,
    OneOf<EarlierValue, String>: QueryFragment<DB>,
    event_tags::event_seq: QueryFragment<DB>,
    event_tags::position: QueryFragment<DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        // Inside the subquery `event_tags` is the outer row: the inner table is `earlier`.
        out.push_sql("NOT EXISTS (SELECT 1 FROM event_tags AS earlier WHERE earlier.event_seq = ");
        event_tags::event_seq.walk_ast(out.reborrow())?;
        out.push_sql(" AND earlier.position < ");
        event_tags::position.walk_ast(out.reborrow())?;
        out.push_sql(" AND earlier.name = ");
        out.push_bind_param::<Text, String>(&self.name)?;
        out.push_sql(" AND ");
        self.values.walk_ast(out.reborrow())?;
        if std::any::TypeId::of::<DB>() == std::any::TypeId::of::<diesel::pg::Pg>() {
            // Keeps PostgreSQL from turning the check into an anti-join that hashes every
            // row of the tag first (as `tag_on_row.rs` explains for `#h`).
            out.push_sql(" OFFSET 0");
        }
        out.push_sql(")");
        Ok(())
    }
}

/// `earlier.value`, the subquery's own tag value, as a column `one_of` can compare.
#[derive(Debug, Clone, Copy)]
pub(super) struct EarlierValue;

impl Expression for EarlierValue {
    type SqlType = Text;
}

impl ValidGrouping<()> for EarlierValue {
    type IsAggregate = is_aggregate::Never;
}

impl<DB: Backend> QueryFragment<DB> for EarlierValue {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        out.push_sql("earlier.value");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::TagWalk;
    use buzz_nostr::filter::Filter;
    use serde_json::json;

    fn filter(value: serde_json::Value) -> Filter {
        Filter::parse(&value).expect("a valid filter")
    }

    #[test]
    fn a_tag_filter_walks_its_first_tag_and_checks_the_rest() {
        let f = filter(json!({"#t": ["x"], "#p": ["ab"], "kinds": [1]}));
        let walk = TagWalk::of(&f).expect("walked");
        // Tags are kept in name order: `p` before `t`.
        assert_eq!(walk.name, "p");
        assert_eq!(walk.values, vec!["ab".to_owned()]);
        assert!(walk.rest.tags.contains_key("t") && !walk.rest.tags.contains_key("p"));
        assert_eq!(walk.rest.kinds, Some(vec![1]));
    }

    #[test]
    fn channels_ids_and_tagless_filters_are_not_walked_by_tag() {
        let walk = |f| TagWalk::of(&filter(f));
        assert!(walk(json!({"#h": ["c"], "#t": ["x"]})).is_none());
        assert!(walk(json!({"ids": ["00".repeat(32)], "#t": ["x"]})).is_none());
        assert!(walk(json!({"kinds": [1]})).is_none());
    }
}
