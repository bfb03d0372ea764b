//! The artifact queries (`{"artifact":"current",…}`, `{"artifact":"history",…}`): their
//! grammar, and the SQL that answers them with access and matching applied in the
//! database before the page is cut.

use crate::envelope::{is_event_id, is_uuid};
use crate::heads::{artifact_current_tags, artifact_heads};
use crate::limits::Limits;
use buzz_core::error::Reason;
use buzz_core::store::schema::events;
use buzz_core::store::{row_to_event, Backend, Conn, EventRow};
use buzz_core::with_conn;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Instant;

/// The filter key that makes a filter an artifact query.
pub const QUERY_KEY: &str = "artifact";
/// Continuation: of a current-state listing, the last `d` of the previous page; of a
/// history, the last revision id of the previous page.
pub const AFTER_KEY: &str = "after";

/// A current-state query: every listed artifact whose current revision has, for each
/// name, a tag of that name whose first value is one of the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentQuery {
    /// (tag name, accepted first values): AND across names, OR within one.
    pub predicates: Vec<(String, Vec<String>)>,
    /// Only artifacts whose `d` sorts after this one (the previous page's last).
    pub after: Option<String>,
    /// Page size.
    pub limit: usize,
}

/// A history query: the readable revisions of some artifacts, grouped by `d` in the
/// order given, each in acceptance order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryQuery {
    /// The artifacts, each once, in the order first given.
    pub ds: Vec<String>,
    /// A page of at most this many revisions. Absent: every remaining revision, refused
    /// (never cut) when there are more than `max_history_rows` or they take more than
    /// `max_answer_bytes`.
    pub limit: Option<usize>,
    /// Only revisions after this one (the previous page's last) in that order.
    pub after: Option<String>,
}

/// A parsed artifact query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactQuery {
    Current(CurrentQuery),
    History(HistoryQuery),
}

impl ArtifactQuery {
    /// Parse a claimed filter; anything unsupported or over a limit is refused naming it.
    pub fn parse(filter: &Filter, limits: &Limits) -> Result<ArtifactQuery, Reason> {
        let standard = [
            ("ids", filter.ids.is_some()),
            ("authors", filter.authors.is_some()),
            ("kinds", filter.kinds.is_some()),
            ("since", filter.since.is_some()),
            ("until", filter.until.is_some()),
        ];
        if let Some((key, _)) = standard.iter().find(|(_, present)| *present) {
            return Err(Reason::invalid(format!(
                "artifact queries do not support {key}"
            )));
        }
        let mode = filter.extensions.get(QUERY_KEY);
        let values: usize = filter.tags.values().map(Vec::len).sum();
        if values > limits.max_values {
            return Err(Reason::invalid(format!(
                "an artifact query lists at most {} values (maxValues)",
                limits.max_values
            )));
        }
        match mode.and_then(Value::as_str) {
            Some("current") => {
                if let Some(key) = filter
                    .extensions
                    .keys()
                    .find(|k| *k != QUERY_KEY && *k != AFTER_KEY)
                {
                    return Err(Reason::invalid(format!(
                        "artifact queries do not support {key}"
                    )));
                }
                Ok(ArtifactQuery::Current(parse_current(filter, limits)?))
            }
            Some("history") => {
                if let Some(key) = filter
                    .extensions
                    .keys()
                    .find(|k| *k != QUERY_KEY && *k != AFTER_KEY)
                {
                    return Err(Reason::invalid(format!(
                        "artifact history queries do not support {key}"
                    )));
                }
                Ok(ArtifactQuery::History(parse_history(filter, limits)?))
            }
            _ => Err(Reason::invalid(
                "unsupported artifact query: \"artifact\" must be \"current\" or \"history\"",
            )),
        }
    }
}

fn parse_history(filter: &Filter, limits: &Limits) -> Result<HistoryQuery, Reason> {
    let listed = match (filter.tags.len(), filter.tags.get("d")) {
        (1, Some(ds)) if !ds.is_empty() => ds,
        _ => {
            return Err(Reason::invalid(
                "an artifact history query takes exactly one non-empty #d list",
            ))
        }
    };
    if listed.iter().any(|d| !is_uuid(d)) {
        return Err(Reason::invalid("#d values must be artifact UUIDs"));
    }
    let mut ds: Vec<String> = Vec::with_capacity(listed.len());
    for d in listed {
        if !ds.contains(d) {
            ds.push(d.clone());
        }
    }
    let limit = match filter.limit {
        None => None,
        Some(0) => return Err(Reason::invalid("limit must be at least 1")),
        Some(n) if n > limits.max_history_rows as u64 => {
            return Err(Reason::invalid(format!(
                "limit is above the {} revisions a history query answers (maxHistoryRows)",
                limits.max_history_rows
            )))
        }
        Some(n) => Some(n as usize),
    };
    let after = match filter.extensions.get(AFTER_KEY) {
        None => None,
        Some(Value::String(id)) if is_event_id(id) => Some(id.clone()),
        Some(_) => {
            return Err(Reason::invalid(
                "after must be a revision id (64 lowercase hex characters)",
            ))
        }
    };
    Ok(HistoryQuery { ds, limit, after })
}

fn parse_current(filter: &Filter, limits: &Limits) -> Result<CurrentQuery, Reason> {
    if filter.tags.len() > limits.max_predicates {
        return Err(Reason::invalid(format!(
            "an artifact query matches at most {} tag names (maxPredicates)",
            limits.max_predicates
        )));
    }
    for (name, values) in &filter.tags {
        if name.len() > limits.max_tag_name_bytes {
            return Err(Reason::invalid(format!(
                "a tag name is longer than {} bytes (maxTagNameBytes)",
                limits.max_tag_name_bytes
            )));
        }
        if values.is_empty() {
            return Err(Reason::invalid(format!("#{name} lists no values")));
        }
        if values.iter().any(|v| v.len() > limits.max_tag_value_bytes) {
            return Err(Reason::invalid(format!(
                "a #{name} value is longer than {} bytes (maxTagValueBytes)",
                limits.max_tag_value_bytes
            )));
        }
    }
    let limit = match filter.limit {
        None => limits.max_page_size,
        Some(0) => return Err(Reason::invalid("limit must be at least 1")),
        Some(n) if n > limits.max_page_size as u64 => {
            return Err(Reason::invalid(format!(
                "limit is above the page size of {} (maxPageSize)",
                limits.max_page_size
            )))
        }
        Some(n) => n as usize,
    };
    let after = match filter.extensions.get(AFTER_KEY) {
        None => None,
        Some(Value::String(d)) if is_uuid(d) => Some(d.clone()),
        Some(_) => return Err(Reason::invalid("after must be an artifact UUID")),
    };
    Ok(CurrentQuery {
        predicates: filter
            .tags
            .iter()
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect(),
        after,
        limit,
    })
}

/// Above this many channels, SQLite gets them as one JSON parameter (it allows at most
/// 32,766 bound variables per statement); PostgreSQL always binds one array.
const INLINE_CHANNELS: usize = 200;

/// One listed artifact found by a current-state query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentEntry {
    pub d: String,
    pub revision_id: String,
    pub channel_id: String,
}

/// The current, listed (not deleted, not retired) artifacts of `community_id` homed in
/// `channels` that match every predicate of `q`, ordered by `d`, at most `q.limit`.
/// Access (the channel list) and matching run in the database, before the limit.
pub fn current_matches(
    conn: &mut Conn<'_>,
    community_id: i64,
    channels: &[String],
    q: &CurrentQuery,
) -> Result<Vec<CurrentEntry>, Reason> {
    if channels.is_empty() {
        return Ok(Vec::new());
    }
    let json = channel_json(conn.backend(), channels)?;
    // Each predicate's values travel as one JSON array parameter (a fixed statement
    // shape whatever their number), unpacked by the database.
    let (values_open, values_close) = match conn.backend() {
        Backend::Sqlite => (" AND t.value IN (SELECT value FROM json_each(", ")))"),
        // `OFFSET 0` keeps PostgreSQL from turning the EXISTS into a semi-join over
        // every artifact with that tag (it then hashes them all, linear in the
        // community); as a correlated subplan each candidate costs one index probe.
        Backend::Postgres => (
            " AND t.value IN (SELECT json_array_elements_text(CAST(",
            " AS json))) OFFSET 0)",
        ),
    };
    // The driving predicate: its (name, value, d) index rows are already in `d` order,
    // so with one value the walk needs no sort and stops at the page — a page costs
    // about page size / selectivity of the others, not the number of artifacts.
    let driver = driving_predicate(&q.predicates);
    let predicates = q
        .predicates
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != driver)
        .map(|(_, (name, values))| {
            serde_json::to_string(values)
                .map(|json| (name.clone(), json))
                .map_err(|e| Reason::Internal(e.into()))
        })
        .collect::<Result<Vec<_>, Reason>>()?;
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    // Everything but the driver, on a boxed query over the heads (joined or not).
    macro_rules! narrowed {
        ($query:expr, $d:expr, $c:expr) => {{
            let mut query = $query
                .filter(artifact_heads::community_id.eq(community_id))
                .filter(artifact_heads::op.ne("delete"))
                .filter(artifact_heads::retired.eq(false));
            query = match &json {
                Some(json) => query.filter(
                    sql::<Bool>("artifact_heads.channel_id IN (SELECT value FROM json_each(")
                        .bind::<Text, _>(json.clone())
                        .sql("))"),
                ),
                None => query.filter(artifact_heads::channel_id.eq_any(channels.to_vec())),
            };
            if let Some(after) = &q.after {
                query = query.filter($d.gt(after.clone()));
            }
            // Correlated EXISTS per other name, checked by index for each candidate.
            for (name, values_json) in &predicates {
                let exists = sql::<Bool>(
                    "EXISTS (SELECT 1 FROM artifact_current_tags t \
                     WHERE t.community_id = artifact_heads.community_id \
                     AND t.d = artifact_heads.d AND t.name = ",
                )
                .bind::<Text, _>(name.clone())
                .sql(values_open)
                .bind::<Text, _>(values_json.clone())
                .sql(values_close);
                query = query.filter(exists);
            }
            query.order($d.asc()).limit(limit).load($c)
        }};
    }
    let columns = (
        artifact_heads::d,
        artifact_heads::revision_id,
        artifact_heads::channel_id,
    );
    let rows: Vec<(String, String, String)> = match driver.map(|i| &q.predicates[i]) {
        Some((name, values)) => with_conn!(conn, |c| {
            let mut query = artifact_current_tags::table
                .inner_join(
                    artifact_heads::table.on(artifact_heads::community_id
                        .eq(artifact_current_tags::community_id)
                        .and(artifact_heads::d.eq(artifact_current_tags::d))),
                )
                .filter(artifact_current_tags::community_id.eq(community_id))
                .filter(artifact_current_tags::name.eq(name.clone()))
                .select(columns)
                .into_boxed();
            match values.as_slice() {
                [one] => {
                    query = query.filter(artifact_current_tags::value.eq(one.clone()));
                    narrowed!(query, artifact_current_tags::d, c)
                }
                // One artifact may carry two of the values (two tags of the name); the
                // order is then by the selected column (PostgreSQL's DISTINCT rule).
                many => {
                    query = query
                        .filter(artifact_current_tags::value.eq_any(many.to_vec()))
                        .distinct();
                    narrowed!(query, artifact_heads::d, c)
                }
            }
        })?,
        None => with_conn!(conn, |c| {
            let query = artifact_heads::table.select(columns).into_boxed();
            narrowed!(query, artifact_heads::d, c)
        })?,
    };
    Ok(rows
        .into_iter()
        .map(|(d, revision_id, channel_id)| CurrentEntry {
            d,
            revision_id,
            channel_id,
        })
        .collect())
}

/// Which predicate drives a current-state query: `#d` (one artifact per value), else
/// a client-defined tag (usually selective: an assignee, a project), else any; fewest
/// values first. `None` without predicates (the heads are walked in `d` order).
fn driving_predicate(predicates: &[(String, Vec<String>)]) -> Option<usize> {
    let rank = |name: &str| match name {
        "d" => 0,
        n if crate::envelope::ENVELOPE_TAGS.contains(&n) => 2,
        _ => 1,
    };
    (0..predicates.len()).min_by_key(|&i| {
        let (name, values) = &predicates[i];
        (values.len(), rank(name))
    })
}

pub(crate) fn channel_json(
    backend: Backend,
    channels: &[String],
) -> Result<Option<String>, Reason> {
    if backend == Backend::Sqlite && channels.len() > INLINE_CHANNELS {
        return serde_json::to_string(channels)
            .map(Some)
            .map_err(|e| Reason::Internal(e.into()));
    }
    Ok(None)
}

/// The stored, unremoved events `ids` names, in that order (a removed one is left out:
/// it is withheld from every surface).
pub fn load_revisions(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<Vec<Event>, Reason> {
    let mut found: HashMap<String, Event> = HashMap::new();
    for chunk in ids.chunks(500) {
        let rows: Vec<EventRow> = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::id.eq_any(chunk))
            .filter(events::deleted_at.is_null())
            .select(EventRow::as_select())
            .load(c))?;
        for row in rows {
            let event = row_to_event(row).map_err(Reason::from)?;
            found.insert(event.id.clone(), event);
        }
    }
    Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
}

/// Wall-clock budget of one query: checked after every statement (and enforced inside
/// PostgreSQL by `statement_timeout`), so an answer is complete or a 503, never late and
/// never partial.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    deadline: Instant,
    ms: u64,
}

impl Budget {
    pub(crate) fn start(ms: u64) -> Budget {
        Budget {
            deadline: Instant::now() + std::time::Duration::from_millis(ms),
            ms,
        }
    }

    /// What is left of the budget.
    pub(crate) fn left(&self) -> std::time::Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// `Err(Unavailable)` once the budget is spent.
    pub(crate) fn check(&self) -> Result<(), Reason> {
        if Instant::now() >= self.deadline {
            return Err(Reason::Unavailable(format!(
                "the artifact query exceeded its execution budget of {} ms (budgetMs); \
                 narrow it or retry later",
                self.ms
            )));
        }
        Ok(())
    }

    /// Bound every following statement of this transaction (PostgreSQL; SQLite is
    /// checked between statements).
    pub(crate) fn arm(&self, conn: &mut Conn<'_>) -> Result<(), Reason> {
        if let Conn::Pg(c) = conn {
            // Rounded up: the database cancels no earlier than the deadline, so a
            // cancelled statement is always reported as the budget (see `check`).
            let left = self
                .deadline
                .saturating_duration_since(Instant::now())
                .as_micros()
                .div_ceil(1000)
                .max(1);
            diesel::sql_query(format!("SET LOCAL statement_timeout = {left}")).execute(*c)?;
        }
        Ok(())
    }
}
