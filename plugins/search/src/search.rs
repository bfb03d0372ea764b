//! Reading a search: the index's matches within the reader's scope and the filter's
//! other fields — all decided in one statement before anything is ranked — then ranked
//! from the documents themselves.
//!
//! The statement walks the index newest first (FTS5 in rowid order; the GIN matches by
//! `event_seq`) and joins each match to its `events` row, where the community, deletion,
//! NIP-40 expiry, the reader's channels, kinds, ids, authors, time range and tags are
//! checked; it stops after `max_candidates` rows that pass. Ranks ([`Search::score`])
//! use only each document's own words, so nothing outside the reader's scope can move
//! one; ties are broken by `created_at` (newest first) then `id`.

use crate::query::Search;
use crate::sql::{Count, Param, Sql};
use crate::text::document;
use buzz_core::error::Reason;
use buzz_core::store::{ChannelScope, Conn, Scope};
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

/// An event found, with its rank.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub event: Event,
    pub score: f64,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    pubkey: String,
    #[diesel(sql_type = BigInt)]
    created_at: i64,
    #[diesel(sql_type = Integer)]
    kind: i32,
    #[diesel(sql_type = Text)]
    tags: String,
    #[diesel(sql_type = Text)]
    content: String,
    #[diesel(sql_type = Text)]
    sig: String,
}

/// The matches of `job` within `scope` at `now`: at most `candidates` read, ranked.
pub(crate) fn find(
    conn: &mut Conn<'_>,
    scope: &Scope,
    job: &Job,
    candidates: usize,
    now: i64,
) -> Result<Vec<Found>, Reason> {
    let mut sql = Sql::new(conn);
    sql.push("SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig ");
    if !matches_within(&mut sql, scope, job, now) {
        return Ok(Vec::new());
    }
    if sql.is_pg() {
        sql.push(" ORDER BY d.event_seq DESC LIMIT ");
    } else {
        sql.push(" ORDER BY search_fts.rowid DESC LIMIT ");
    }
    sql.param(Param::Int(i64::try_from(candidates).unwrap_or(i64::MAX)));
    let rows = sql.load::<Row>(conn)?;
    let mut found = Vec::with_capacity(rows.len());
    for row in rows {
        let tags: Vec<Vec<String>> = serde_json::from_str(&row.tags).map_err(|e| {
            Reason::Internal(anyhow::anyhow!("stored tags of event {}: {e}", row.id))
        })?;
        let event = Event {
            id: row.id,
            pubkey: row.pubkey,
            created_at: row.created_at,
            kind: u32::try_from(row.kind).unwrap_or_default(),
            tags,
            content: row.content,
            sig: row.sig,
        };
        let doc = document(&event);
        // The index and the matcher agree; the matcher is the reference.
        if !job.search.matches(&doc) {
            continue;
        }
        let score = job.search.score(&doc);
        found.push(Found { event, score });
    }
    Ok(found)
}

/// How many distinct events any of `jobs` matches within `scope` at `now`.
pub(crate) fn count(
    conn: &mut Conn<'_>,
    scope: &Scope,
    jobs: &[Job],
    now: i64,
) -> Result<u64, Reason> {
    // Filters that cannot match are left out (writing one to a scratch statement says).
    let possible: Vec<&Job> = jobs
        .iter()
        .filter(|job| matches_within(&mut Sql::new(conn), scope, job, now))
        .collect();
    if possible.is_empty() {
        return Ok(0);
    }
    let mut sql = Sql::new(conn);
    sql.push("SELECT COUNT(*) AS n FROM (");
    for (i, job) in possible.iter().enumerate() {
        if i > 0 {
            sql.push(" UNION ");
        }
        sql.push("SELECT e.seq ");
        matches_within(&mut sql, scope, job, now);
    }
    sql.push(") AS matched");
    let rows = sql.load::<Count>(conn)?;
    Ok(rows.first().map_or(0, |c| u64::try_from(c.n).unwrap_or(0)))
}

/// Append `FROM … WHERE …` for the index matches of `job` within `scope` at `now`;
/// `false` when nothing can match (no readable channel, no kind left, an empty list).
fn matches_within(sql: &mut Sql, scope: &Scope, job: &Job, now: i64) -> bool {
    let filter = &job.filter;
    if job.kinds.is_empty() || filter.is_empty_match() {
        return false;
    }
    if sql.is_pg() {
        sql.push("FROM search_documents d JOIN events e ON e.seq = d.event_seq WHERE d.tsv @@ ")
            .param(Param::Text(job.search.tsquery()))
            .push("::tsquery");
    } else {
        sql.push(
            "FROM search_fts JOIN events e ON e.seq = search_fts.rowid WHERE search_fts MATCH ",
        )
        .param(Param::Text(job.search.fts5()));
    }
    sql.push(" AND e.community_id = ")
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
