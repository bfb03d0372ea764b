//! Reading a search: the index's matches within the reader's scope and the filter's
//! other fields — all decided in one statement before anything is ranked — then ranked
//! from the documents themselves.
//!
//! The statement walks the index newest first (FTS5 in rowid order; the GIN matches by
//! `event_seq`) and joins each match to its `events` row, where the community, deletion,
//! NIP-40 expiry, the reader's channels, kinds, ids, authors, time range and tags are
//! checked; it stops after `max_candidates` rows that pass, and reads only their keys
//! and sizes ([`Candidate`]). Ranking (`rank.rs`) then reads their bodies a page at a
//! time ([`documents`]). Ranks ([`Search::score`]) use only each document's own words,
//! so nothing outside the reader's scope can move one; ties are broken by `created_at`
//! (newest first) then `id`.

use crate::query::Search;
use crate::scope::places;
use crate::sql::{Param, Sql};
use crate::text::document;
use buzz_core::error::Reason;
use buzz_core::store::{ChannelScope, Conn, Count, Scope};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use diesel::sql_types::{BigInt, Integer, Text};
use diesel::QueryableByName;

/// One search filter, ready to read.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub filter: Filter,
    pub search: Search,
    /// Kinds searched: the indexed ones the filter allows.
    pub kinds: Vec<u32>,
}

/// A match before it is ranked: where it sorts and how big its text is (its body is
/// read only to rank it, a page at a time: `rank.rs`).
#[derive(Debug, Clone, QueryableByName)]
pub(crate) struct Candidate {
    #[diesel(sql_type = BigInt)]
    pub seq: i64,
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
    #[diesel(sql_type = Text)]
    pub id: String,
    /// Bytes of content plus tags.
    #[diesel(sql_type = BigInt)]
    pub size: i64,
}

/// The text of a candidate, to rank it.
#[derive(QueryableByName)]
struct Body {
    #[diesel(sql_type = BigInt)]
    seq: i64,
    #[diesel(sql_type = Integer)]
    kind: i32,
    #[diesel(sql_type = Text)]
    tags: String,
    #[diesel(sql_type = Text)]
    content: String,
}

/// The matches of `job` within `scope` at `now` as keys: at most `candidates`, newest
/// first, from the newest `examined` index matches (what one search walks, whatever
/// the filter's other fields leave of them). No body is read.
pub(crate) fn candidates(
    conn: &mut Conn<'_>,
    scope: &Scope,
    job: &Job,
    candidates: usize,
    examined: usize,
    now: i64,
) -> Result<Vec<Candidate>, Reason> {
    let mut sql = Sql::new(conn);
    // Bytes, not characters: what the body takes in memory once read. Neither backend
    // reads the text to tell (SQLite's `octet_length`, PostgreSQL's stored size).
    sql.push(
        "SELECT e.seq, e.created_at, e.id, \
         CAST(octet_length(e.content) + octet_length(e.tags) AS BIGINT) AS size ",
    );
    if !matches_within(&mut sql, scope, job, now, Some(examined)) {
        return Ok(Vec::new());
    }
    sql.push(" ORDER BY m.seq DESC LIMIT ");
    sql.param(Param::Int(i64::try_from(candidates).unwrap_or(i64::MAX)));
    sql.load::<Candidate>(conn)
}

/// The documents (`text::document`) of events `seqs`, in any order, as `(seq, tokens)`,
/// handed one at a time to `each` so only one document's tokens exist at once.
pub(crate) fn documents(
    conn: &mut Conn<'_>,
    seqs: &[i64],
    mut each: impl FnMut(i64, &[String]),
) -> Result<(), Reason> {
    let mut sql = Sql::new(conn);
    sql.push("SELECT seq, kind, tags, content FROM events WHERE ");
    sql.in_list("seq", Param::Ints(seqs.to_vec()));
    for row in sql.load::<Body>(conn)? {
        let tags: Vec<Vec<String>> = serde_json::from_str(&row.tags).map_err(|e| {
            Reason::Internal(anyhow::anyhow!("stored tags of event {}: {e}", row.seq))
        })?;
        let event = Event {
            id: String::new(),
            pubkey: String::new(),
            created_at: 0,
            kind: u32::try_from(row.kind).unwrap_or_default(),
            tags,
            content: row.content,
            sig: String::new(),
        };
        each(row.seq, &document(&event));
    }
    Ok(())
}

/// How many distinct events any of `jobs` matches within `scope` at `now`, each filter's
/// matches examined up to `cap`: a filter with more is refused, never walked to its end
/// nor answered with a smaller number.
pub(crate) fn count(
    conn: &mut Conn<'_>,
    scope: &Scope,
    jobs: &[Job],
    now: i64,
    cap: usize,
) -> Result<Count, Reason> {
    // Filters that cannot match are left out (writing one to a scratch statement says).
    let possible: Vec<&Job> = jobs
        .iter()
        .filter(|job| matches_within(&mut Sql::new(conn), scope, job, now, None))
        .collect();
    if possible.is_empty() {
        return Ok(Count {
            count: 0,
            approximate: false,
        });
    }
    let over = i64::try_from(cap).unwrap_or(i64::MAX).saturating_add(1);
    let mut sql = Sql::new(conn);
    sql.push("SELECT COUNT(DISTINCT seq) AS n, MAX(each_n) AS most FROM (");
    for (i, job) in possible.iter().enumerate() {
        if i > 0 {
            sql.push(" UNION ALL ");
        }
        // Each filter's walk stops one past the cap; how many it found rides along.
        sql.push("SELECT seq, COUNT(*) OVER () AS each_n FROM (SELECT e.seq ");
        matches_within(&mut sql, scope, job, now, None);
        sql.push(" LIMIT ").param(Param::Int(over));
        sql.push(&format!(") AS m{i}"));
    }
    sql.push(") AS matched");
    let rows = sql.load::<CappedCount>(conn)?;
    let (n, most) = rows.first().map_or((0, None), |c| (c.n, c.most));
    // A filter that went past the cap stopped there: the distinct matches examined are a
    // lower bound, answered as NIP-45's approximate count rather than a walk of every
    // match (or an exact-looking smaller number).
    Ok(Count {
        count: u64::try_from(n).unwrap_or(0),
        approximate: most.unwrap_or(0) >= over,
    })
}

/// A count and the largest per-filter count under it.
#[derive(QueryableByName)]
struct CappedCount {
    #[diesel(sql_type = BigInt)]
    n: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    most: Option<i64>,
}

/// Append `FROM … WHERE …` for the index matches (`m.seq`) of `job` within `scope` at
/// `now`, the newest `examined` of them when given; `false` when nothing can match (no
/// readable channel, no kind left, an empty list).
fn matches_within(
    sql: &mut Sql,
    scope: &Scope,
    job: &Job,
    now: i64,
    examined: Option<usize>,
) -> bool {
    let filter = &job.filter;
    if job.kinds.is_empty() || filter.is_empty_match() {
        return false;
    }
    // The walk names the reader's places (`scope.rs`): other channels' and other
    // communities' postings are never read. It is its own subquery so that its cap
    // counts index matches, not rows that passed the join's conditions.
    let places = places(scope, filter);
    if places.exact.as_ref().is_some_and(Vec::is_empty) {
        return false;
    }
    if sql.is_pg() {
        sql.push("FROM (SELECT event_seq AS seq FROM search_documents WHERE tsv @@ ")
            .param(Param::Text(job.search.tsquery(&places)))
            .push("::tsquery ORDER BY event_seq DESC");
    } else {
        sql.push("FROM (SELECT rowid AS seq FROM search_fts WHERE search_fts MATCH ")
            .param(Param::Text(job.search.fts5(&places)))
            .push(" ORDER BY rowid DESC");
    }
    if let Some(examined) = examined {
        sql.push(" LIMIT ")
            .param(Param::Int(i64::try_from(examined).unwrap_or(i64::MAX)));
    }
    sql.push(") AS m JOIN events e ON e.seq = m.seq WHERE e.community_id = ")
        .param(Param::Int(scope.community_id))
        .push(" AND e.deleted_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > ")
        .param(Param::Int(now))
        .push(")");
    if !channels_within(sql, scope, filter) {
        return false;
    }
    sql.push(" AND ");
    sql.in_list(
        "e.kind",
        Param::Ints(job.kinds.iter().map(|k| i64::from(*k)).collect()),
    );
    if let Some(ids) = &filter.ids {
        sql.push(" AND ");
        sql.in_list("e.id", Param::Texts(ids.clone()));
    }
    if let Some(authors) = &filter.authors {
        sql.push(" AND ");
        sql.in_list("e.pubkey", Param::Texts(authors.clone()));
    }
    if let Some(since) = filter.since {
        sql.push(" AND e.created_at >= ").param(Param::Int(since));
    }
    if let Some(until) = filter.until {
        sql.push(" AND e.created_at <= ").param(Param::Int(until));
    }
    for (name, values) in &filter.tags {
        sql.push(" AND e.seq IN (SELECT t.event_seq FROM event_tags t WHERE t.community_id = ")
            .param(Param::Int(scope.community_id))
            .push(" AND t.name = ")
            .param(Param::Text(name.clone()))
            .push(" AND ");
        sql.in_list("t.value", Param::Texts(values.clone()));
        sql.push(")");
    }
    true
}

/// The reader's channels (narrowed to those the filter names), as core's reads apply
/// them; `false` when the scope leaves nothing.
fn channels_within(sql: &mut Sql, scope: &Scope, filter: &Filter) -> bool {
    let named = filter.channels();
    match (&scope.channels, scope.community_wide) {
        (ChannelScope::All, true) => {
            if let Some(named) = named {
                sql.push(" AND ");
                sql.in_list("e.channel_id", Param::Texts(named.to_vec()));
            }
            true
        }
        (ChannelScope::All, false) => {
            sql.push(" AND e.channel_id IS NOT NULL");
            if let Some(named) = named {
                sql.push(" AND ");
                sql.in_list("e.channel_id", Param::Texts(named.to_vec()));
            }
            true
        }
        (ChannelScope::None, true) => {
            // A filter naming channels matches only channel rows: none readable.
            if named.is_some() {
                return false;
            }
            sql.push(" AND e.channel_id IS NULL");
            true
        }
        (ChannelScope::None, false) => false,
        (ChannelScope::Only(set), wide) => {
            let list: Vec<String> = match named {
                Some(named) => named.iter().filter(|c| set.contains(c)).cloned().collect(),
                None => set.iter().cloned().collect(),
            };
            if named.is_some() || !wide {
                if list.is_empty() {
                    return false;
                }
                sql.push(" AND ");
                sql.in_list("e.channel_id", Param::Texts(list));
            } else {
                sql.push(" AND (e.channel_id IS NULL OR ");
                sql.in_list("e.channel_id", Param::Texts(list));
                sql.push(")");
            }
            true
        }
    }
}
