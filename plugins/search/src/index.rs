//! The index's rows: one entry per indexed event, keyed by `events.seq`, on either
//! backend, and the indexed revision of each artifact. Everything here runs on the
//! caller's connection — inside the event's own transaction for the ingest hook, inside
//! a backfill batch otherwise.

use crate::query::quote_lexeme;
use crate::sql::{Count, MaybeInt, Param, Sql};
use crate::text::MAX_DOC_TOKENS;
use buzz_core::error::Reason;
use buzz_core::store::prepared::{self, Val};
use buzz_core::store::Conn;
use buzz_core::with_conn;
use std::collections::BTreeMap;

/// PostgreSQL keeps at most this many positions per lexeme; more are not written, so
/// its phrases mean what SQLite's and the live matcher's mean up to there.
const MAX_POSITIONS: usize = 255;

/// Index (or re-index) event `seq` with `tokens`. An event without tokens has no entry.
pub(crate) fn put(conn: &mut Conn<'_>, seq: i64, tokens: &[String]) -> Result<(), Reason> {
    remove(conn, seq)?;
    if tokens.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new(conn);
    if sql.is_pg() {
        sql.push("INSERT INTO search_documents (event_seq, tsv) VALUES (")
            .param(Param::Int(seq))
            .push(", ")
            .param(Param::Text(tsvector(tokens)))
            .push("::tsvector)");
    } else {
        sql.push("INSERT INTO search_fts (rowid, body) VALUES (")
            .param(Param::Int(seq))
            .push(", ")
            .param(Param::Text(tokens.join(" ")))
            .push(")");
    }
    sql.execute(conn)?;
    Ok(())
}

/// [`put`] for many events at once: on PostgreSQL one statement (the backfill's batch),
/// on SQLite one row at a time (no round trips there).
pub(crate) fn put_many(conn: &mut Conn<'_>, docs: &[(i64, Vec<String>)]) -> Result<(), Reason> {
    let docs: Vec<&(i64, Vec<String>)> = docs.iter().filter(|(_, t)| !t.is_empty()).collect();
    if docs.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new(conn);
    if !sql.is_pg() {
        for (seq, tokens) in docs {
            put(conn, *seq, tokens)?;
        }
        return Ok(());
    }
    sql.push("INSERT INTO search_documents (event_seq, tsv) VALUES ");
    for (i, (seq, tokens)) in docs.iter().enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        sql.push("(")
            .param(Param::Int(*seq))
            .push(", ")
            .param(Param::Text(tsvector(tokens)))
            .push("::tsvector)");
    }
    sql.push(" ON CONFLICT (event_seq) DO UPDATE SET tsv = EXCLUDED.tsv");
    sql.execute(conn)?;
    Ok(())
}

/// Index a new event: like [`put`], without looking for an entry first (a just-stored
/// event has none).
pub(crate) fn add(conn: &mut Conn<'_>, seq: i64, tokens: &[String]) -> Result<(), Reason> {
    if tokens.is_empty() {
        return Ok(());
    }
    if matches!(conn, Conn::Pg(_)) {
        // Prepared once per connection (a run-time statement is parsed again each time,
        // an extra round trip per indexed message).
        prepared::execute(
            conn,
            "INSERT INTO search_documents (event_seq, tsv) VALUES (?, CAST(? AS tsvector)) \
             ON CONFLICT (event_seq) DO UPDATE SET tsv = EXCLUDED.tsv",
            &[Val::I(seq), Val::T(&tsvector(tokens))],
        )?;
        return Ok(());
    }
    put(conn, seq, tokens)
}

/// The FTS5 table as diesel sees it, for the one statement ingest runs per message: a
/// statement of the DSL is prepared once per connection and cached, where a run-time
/// [`Sql`] is prepared again every time (the prepare was most of the plugin's cost per
/// ingested message on SQLite). PostgreSQL takes its document as a `tsvector` literal,
/// which only an explicit cast reads: a run-time statement there (one round trip either
/// way).
mod fts {
    diesel::table! {
        search_fts (rowid) {
            rowid -> BigInt,
            body -> Text,
        }
    }
}

/// Index the event just stored as `seq` in this transaction with `tokens` (it has no
/// entry yet). On SQLite a DSL statement, prepared once per connection, inserting one
/// row with `VALUES`: SQLite gives a statement that may write several rows (an
/// `INSERT … SELECT`) a statement savepoint, and FTS5 flushes its pending terms to disk
/// at every savepoint, which made each message its own tiny segment, merged again and
/// again (a 1M-message import fell to ~870 events/s, 40 % of the writer in FTS5
/// merges); without one, a group commit's documents reach the disk as one segment.
pub(crate) fn add_new(conn: &mut Conn<'_>, seq: i64, tokens: &[String]) -> Result<(), Reason> {
    use diesel::prelude::*;
    if tokens.is_empty() {
        return Ok(());
    }
    if matches!(conn, Conn::Sqlite(_)) {
        let body = tokens.join(" ");
        with_conn!(conn, |c| diesel::insert_into(fts::search_fts::table)
            .values((
                fts::search_fts::rowid.eq(seq),
                fts::search_fts::body.eq(&body)
            ))
            .execute(c))?;
        return Ok(());
    }
    add(conn, seq, tokens)
}

/// Take event `seq` out of the index (nothing if it is not in).
pub(crate) fn remove(conn: &mut Conn<'_>, seq: i64) -> Result<(), Reason> {
    let mut sql = Sql::new(conn);
    if sql.is_pg() {
        sql.push("DELETE FROM search_documents WHERE event_seq = ")
            .param(Param::Int(seq));
    } else {
        sql.push("DELETE FROM search_fts WHERE rowid = ")
            .param(Param::Int(seq));
    }
    sql.execute(conn)?;
    Ok(())
}

/// The `tsvector` literal of `tokens`: each lexeme quoted with its positions (from 1).
pub(crate) fn tsvector(tokens: &[String]) -> String {
    let mut positions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, token) in tokens.iter().take(MAX_DOC_TOKENS).enumerate() {
        let list = positions.entry(token.as_str()).or_default();
        if list.len() < MAX_POSITIONS {
            list.push(i + 1);
        }
    }
    let mut out = String::new();
    for (lexeme, list) in positions {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quote_lexeme(lexeme));
        out.push(':');
        let list: Vec<String> = list.iter().map(usize::to_string).collect();
        out.push_str(&list.join(","));
    }
    out
}

/// An event's storage facts.
#[derive(Debug)]
pub(crate) struct Stored {
    pub seq: i64,
    pub deleted_at: Option<i64>,
}

/// `events.seq` and deletion of event `id` in `community_id` (a DSL statement: prepared
/// once per connection, as ingest runs it for every indexed message on SQLite).
pub(crate) fn stored(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<Stored>, Reason> {
    use buzz_core::store::schema::events;
    use diesel::prelude::*;
    let row: Option<(i64, Option<i64>)> = with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(events::id.eq(id))
        .select((events::seq, events::deleted_at))
        .first(c)
        .optional())?;
    Ok(row.map(|(seq, deleted_at)| Stored { seq, deleted_at }))
}

/// The indexed revision (`events.seq`) of artifact `d`, if one is indexed.
pub(crate) fn artifact_entry(
    conn: &mut Conn<'_>,
    community_id: i64,
    d: &str,
) -> Result<Option<i64>, Reason> {
    let mut sql = Sql::new(conn);
    sql.push("SELECT event_seq AS v FROM search_artifacts WHERE community_id = ")
        .param(Param::Int(community_id))
        .push(" AND d = ")
        .param(Param::Text(d.to_owned()));
    Ok(sql.load::<MaybeInt>(conn)?.into_iter().find_map(|r| r.v))
}

/// Record `seq` as artifact `d`'s indexed revision (`None`: none is).
pub(crate) fn set_artifact_entry(
    conn: &mut Conn<'_>,
    community_id: i64,
    d: &str,
    seq: Option<i64>,
) -> Result<(), Reason> {
    let mut sql = Sql::new(conn);
    sql.push("DELETE FROM search_artifacts WHERE community_id = ")
        .param(Param::Int(community_id))
        .push(" AND d = ")
        .param(Param::Text(d.to_owned()));
    sql.execute(conn)?;
    if let Some(seq) = seq {
        let mut sql = Sql::new(conn);
        sql.push("INSERT INTO search_artifacts (community_id, d, event_seq) VALUES (")
            .param(Param::Int(community_id))
            .push(", ")
            .param(Param::Text(d.to_owned()))
            .push(", ")
            .param(Param::Int(seq))
            .push(")");
        sql.execute(conn)?;
    }
    Ok(())
}

/// Forget the artifact entry pointing at `seq` (a redacted current revision).
pub(crate) fn drop_artifact_seq(conn: &mut Conn<'_>, seq: i64) -> Result<(), Reason> {
    let mut sql = Sql::new(conn);
    sql.push("DELETE FROM search_artifacts WHERE event_seq = ")
        .param(Param::Int(seq));
    sql.execute(conn)?;
    Ok(())
}

/// How big the index is.
pub(crate) struct Size {
    pub documents: i64,
    pub bytes: i64,
}

/// Documents and bytes of the index (its tables and indexes).
pub(crate) fn size(conn: &mut Conn<'_>) -> Result<Size, Reason> {
    let pg = matches!(conn, Conn::Pg(_));
    let (documents, bytes) = if pg {
        (
            "SELECT COUNT(*) AS n FROM search_documents",
            "SELECT (pg_total_relation_size('search_documents') \
             + pg_total_relation_size('search_artifacts'))::bigint AS n",
        )
    } else {
        (
            "SELECT COUNT(*) AS n FROM search_fts_docsize",
            "SELECT COALESCE(SUM(pgsize), 0) AS n FROM dbstat \
             WHERE name LIKE 'search_fts%' OR name LIKE '%search_artifacts%'",
        )
    };
    let mut sql = Sql::new(conn);
    sql.push(documents);
    let documents = sql.load::<Count>(conn)?;
    let mut sql = Sql::new(conn);
    sql.push(bytes);
    let bytes = sql.load::<Count>(conn)?;
    Ok(Size {
        documents: documents.first().map_or(0, |c| c.n),
        bytes: bytes.first().map_or(0, |c| c.n),
    })
}
