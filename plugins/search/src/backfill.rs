//! The backfill: events stored before the plugin was enabled are indexed by a
//! background task, a batch per write transaction, oldest first, with its progress in
//! `search_backfill` (the console's Plugins pane shows it).
//!
//! At start the target is the newest stored event; everything after it is indexed by
//! the ingest hook. Re-indexing is idempotent, so several processes may backfill at
//! once and a restart only repeats the batch it was in. While the plugin runs, a
//! checkpoint moves the mark to the newest event every minute (the hook indexed
//! those), so a restart rescans little; a restart after running disabled catches up
//! from the last checkpoint.

use crate::config::Config;
use crate::index;
use crate::scope::scoped;
use crate::sql::{MaybeInt, Param, Sql};
use crate::text::{document, ARTIFACT_KIND};
use buzz_core::error::Reason;
use buzz_core::plugin::Services;
use buzz_core::store::Conn;
use buzz_nostr::event::Event;
use diesel::sql_types::{BigInt, Integer, Text};
use diesel::QueryableByName;
use std::time::Duration;

/// How often a running plugin records that everything stored so far is indexed.
const CHECKPOINT: Duration = Duration::from_secs(60);
/// Pause between batches: ingest keeps the writer most of the time.
const PAUSE: Duration = Duration::from_millis(5);

/// Progress, as stored.
#[derive(Debug, Clone, QueryableByName)]
pub(crate) struct State {
    #[diesel(sql_type = BigInt)]
    pub indexed_through: i64,
    #[diesel(sql_type = BigInt)]
    pub target: i64,
    #[diesel(sql_type = BigInt)]
    pub documents: i64,
}

/// The stored progress, if a backfill ever started.
pub(crate) fn state(conn: &mut Conn<'_>) -> Result<Option<State>, Reason> {
    let mut sql = Sql::new(conn);
    sql.push("SELECT indexed_through, target, documents FROM search_backfill WHERE id = 1");
    Ok(sql.load::<State>(conn)?.into_iter().next())
}

/// Run the backfill to its target, then checkpoint for as long as the relay runs.
pub(crate) async fn run(services: Services, config: Config) {
    loop {
        match backfill(&services, &config).await {
            Ok(()) => break,
            Err(reason) => {
                tracing::warn!(%reason, "search backfill failed; retrying");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
    loop {
        tokio::time::sleep(CHECKPOINT).await;
        let now = services.clock.now_secs();
        let done = services
            .store
            .write_own_rows(move |conn| {
                let newest = newest_seq(conn)?;
                let mut sql = Sql::new(conn);
                sql.push("UPDATE search_backfill SET indexed_through = ")
                    .param(Param::Int(newest))
                    .push(", target = ")
                    .param(Param::Int(newest))
                    .push(", updated_at = ")
                    .param(Param::Int(now))
                    .push(" WHERE id = 1 AND indexed_through >= target AND target < ")
                    .param(Param::Int(newest));
                sql.execute(conn)
            })
            .await;
        if let Err(reason) = done {
            tracing::warn!(%reason, "search backfill checkpoint failed");
        }
    }
}

/// Index every event up to the target, a batch at a time.
pub(crate) async fn backfill(services: &Services, config: &Config) -> Result<(), Reason> {
    let now = services.clock.now_secs();
    services
        .store
        .write_own_rows(move |conn| start(conn, now))
        .await?;
    loop {
        let kinds: Vec<i64> = config.kinds.iter().map(|k| i64::from(*k)).collect();
        let batch = config.backfill_batch;
        let now = services.clock.now_secs();
        let more = services
            .store
            .write_own_rows(move |conn| step(conn, &kinds, batch, now))
            .await?;
        if !more {
            return Ok(());
        }
        tokio::time::sleep(PAUSE).await;
    }
}

fn newest_seq(conn: &mut Conn<'_>) -> Result<i64, Reason> {
    let mut sql = Sql::new(conn);
    sql.push("SELECT MAX(seq) AS v FROM events");
    Ok(sql
        .load::<MaybeInt>(conn)?
        .into_iter()
        .find_map(|r| r.v)
        .unwrap_or(0))
}

/// Record the target: the newest event now (a first start creates the row).
fn start(conn: &mut Conn<'_>, now: i64) -> Result<(), Reason> {
    let newest = newest_seq(conn)?;
    if state(conn)?.is_none() {
        let mut sql = Sql::new(conn);
        sql.push(
            "INSERT INTO search_backfill (id, indexed_through, target, documents, updated_at) \
             VALUES (1, 0, ",
        )
        .param(Param::Int(newest))
        .push(", 0, ")
        .param(Param::Int(now))
        .push(")");
        sql.execute(conn)?;
        return Ok(());
    }
    let mut sql = Sql::new(conn);
    sql.push("UPDATE search_backfill SET target = ")
        .param(Param::Int(newest))
        .push(", updated_at = ")
        .param(Param::Int(now))
        .push(" WHERE id = 1 AND target < ")
        .param(Param::Int(newest));
    sql.execute(conn)?;
    Ok(())
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = BigInt)]
    seq: i64,
    #[diesel(sql_type = BigInt)]
    community_id: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
    channel_id: Option<String>,
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
}

/// Index the next batch; `false` once the target is reached.
fn step(conn: &mut Conn<'_>, kinds: &[i64], batch: usize, now: i64) -> Result<bool, Reason> {
    let Some(at) = state(conn)? else {
        return Ok(false);
    };
    if at.indexed_through >= at.target {
        return Ok(false);
    }
    // A window of `batch` storage positions: a primary-key range whatever the planner
    // thinks of the table (a fresh bulk load has no statistics yet).
    let through = at
        .indexed_through
        .saturating_add(i64::try_from(batch).unwrap_or(i64::MAX))
        .min(at.target);
    let mut sql = Sql::new(conn);
    sql.push(
        "SELECT seq, community_id, channel_id, id, pubkey, created_at, kind, tags, content FROM events \
         WHERE seq > ",
    )
    .param(Param::Int(at.indexed_through))
    .push(" AND seq <= ")
    .param(Param::Int(through))
    .push(" AND deleted_at IS NULL AND ");
    sql.in_list("kind", Param::Ints(kinds.to_vec()));
    let rows = sql.load::<Row>(conn)?;
    let mut docs = Vec::with_capacity(rows.len());
    for row in rows {
        let tags: Vec<Vec<String>> = serde_json::from_str(&row.tags).unwrap_or_default();
        let event = Event {
            id: row.id,
            pubkey: row.pubkey,
            created_at: row.created_at,
            kind: u32::try_from(row.kind).unwrap_or_default(),
            tags,
            content: row.content,
            sig: String::new(),
        };
        if event.kind == ARTIFACT_KIND {
            // Only an artifact's current, listed revision is found.
            let Some(d) = event.tag_values("d").next().map(str::to_owned) else {
                continue;
            };
            let head = buzz_artifacts::head(conn, row.community_id, &d)?;
            if !head.is_some_and(|h| h.revision_id == event.id && h.is_listed()) {
                continue;
            }
            index::set_artifact_entry(conn, row.community_id, &d, Some(row.seq))?;
        }
        let doc = document(&event);
        if !doc.is_empty() {
            docs.push((
                row.seq,
                scoped(row.community_id, row.channel_id.as_deref(), &doc),
            ));
        }
    }
    index::put_many(conn, &docs)?;
    let documents = i64::try_from(docs.len()).unwrap_or(i64::MAX);
    let mut sql = Sql::new(conn);
    sql.push("UPDATE search_backfill SET indexed_through = ")
        .param(Param::Int(through))
        .push(", documents = documents + ")
        .param(Param::Int(documents))
        .push(", updated_at = ")
        .param(Param::Int(now))
        .push(" WHERE id = 1 AND indexed_through < ")
        .param(Param::Int(through));
    sql.execute(conn)?;
    Ok(through < at.target)
}
