//! How an artifact query is answered without ever holding more than it may:
//! 1. plan — the matching revision ids and their stored sizes, no body (`plan.rs`,
//!    `history.rs`, `query.rs`);
//! 2. refuse an answer over `max_answer_bytes` (413, naming how many revisions fit) —
//!    nothing has been allocated for it;
//! 3. reserve what the revisions will take in memory from the process's
//!    `answer_memory_bytes` (`memory.rs`), waiting at most the rest of the budget, else
//!    503 — still nothing allocated;
//! 4. load the bodies a chunk at a time, counting their exact JSON bytes against the cap.
//!
//! The reservation is held until the events are handed to core for sending.

use crate::history::history_page;
use crate::plan::{self, ArrayBytes, Plan, Shape, Stored};
use crate::query::{self, ArtifactQuery, Budget};
use crate::Artifacts;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::store::{ChannelScope, Conn};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use std::io;

/// Most charged bytes of bodies read by one statement: the rows a statement returns are
/// held beside the events made from them, so they are read in small batches.
const LOAD_CHUNK_BYTES: usize = 1 << 20;
/// Most ids in one statement (both backends' parameter limits).
const LOAD_CHUNK_IDS: usize = 500;

impl Artifacts {
    pub(crate) async fn answer(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<Vec<Event>, Reason> {
        let queries = filters
            .iter()
            .map(|f| ArtifactQuery::parse(f, &self.limits))
            .collect::<Result<Vec<_>, Reason>>()?;
        if !ctx.is_authenticated() {
            return Err(Reason::AuthRequired(
                "artifact queries require authentication".into(),
            ));
        }
        let budget = Budget::start(self.limits.query_budget_ms);
        // Access first: only channels the reader may read take part in matching.
        let scope = self.access.read_scope(ctx).await?;
        let channels: Vec<String> = match &scope.channels {
            ChannelScope::Only(set) => set.iter().cloned().collect(),
            ChannelScope::All | ChannelScope::None => Vec::new(),
        };
        let community = scope.community_id;
        let max_history = self.limits.max_history_rows;
        budget.check()?;
        let plans = self
            .store
            .read(move |mut conn| {
                conn.savepoint(|conn| {
                    budget.arm(conn)?;
                    let mut plans = Vec::with_capacity(queries.len());
                    for q in &queries {
                        plans.push(plan_one(conn, community, &channels, q, max_history)?);
                        budget.check()?;
                    }
                    Ok::<_, Reason>(plans)
                })
            })
            .await
            // A statement PostgreSQL cancelled at the deadline is the budget running out:
            // say so (budgetMs), like the checks between statements do.
            .map_err(|e| budget.check().err().unwrap_or(e))?;
        let cap = self.limits.max_answer_bytes;
        plan::check_fits(&plans, cap, Stored::wire_at_least, false)?;
        let charge = plans
            .iter()
            .flat_map(|p| &p.rows)
            .map(Stored::charge)
            .fold(0usize, usize::saturating_add);
        let reservation = self.memory.reserve(charge, budget.left()).await?;
        budget.check()?;
        let events = self
            .store
            .read(move |mut conn| {
                conn.savepoint(|conn| {
                    budget.arm(conn)?;
                    load(conn, community, &plans, cap, &budget)
                })
            })
            .await
            .map_err(|e| budget.check().err().unwrap_or(e))?;
        budget.check()?;
        drop(reservation);
        Ok(events)
    }
}

/// The revisions one query's answer will hold.
fn plan_one(
    conn: &mut Conn<'_>,
    community: i64,
    channels: &[String],
    q: &ArtifactQuery,
    max_history: usize,
) -> Result<Plan, Reason> {
    Ok(match q {
        ArtifactQuery::Current(q) => {
            let entries = query::current_matches(conn, community, channels, q)?;
            Plan {
                shape: Shape::Current,
                rows: plan::current_sizes(conn, community, entries)?,
            }
        }
        ArtifactQuery::History(q) => {
            // Whole (no limit): one more than the bound, to tell "more" from "exactly".
            let rows = q.limit.unwrap_or(max_history.saturating_add(1));
            let rows = history_page(conn, community, channels, q, rows)?;
            if q.limit.is_none() && rows.len() > max_history {
                return Err(Reason::invalid(format!(
                    "the history of these artifacts holds more than {max_history} readable \
                     revisions (maxHistoryRows); page it with \"limit\" and \"after\", or ask \
                     for fewer #d values"
                )));
            }
            Plan {
                shape: Shape::History { limit: q.limit },
                rows,
            }
        }
    })
}

/// The bodies of every planned revision, in order, a chunk at a time; their exact JSON
/// bytes are counted as they arrive, and the answer is refused at the first that would
/// take it over `cap`. A planned revision removed since is a retry, never a short page.
fn load(
    conn: &mut Conn<'_>,
    community: i64,
    plans: &[Plan],
    cap: usize,
    budget: &Budget,
) -> Result<Vec<Event>, Reason> {
    let mut out = Vec::with_capacity(plans.iter().map(|p| p.rows.len()).sum());
    let mut array = ArrayBytes::new(cap);
    for (i, plan) in plans.iter().enumerate() {
        let mut j = 0;
        while j < plan.rows.len() {
            let mut end = j;
            let mut bytes = 0usize;
            while end < plan.rows.len()
                && end - j < LOAD_CHUNK_IDS
                && (end == j || bytes + plan.rows[end].charge() <= LOAD_CHUNK_BYTES)
            {
                bytes += plan.rows[end].charge();
                end += 1;
            }
            let ids: Vec<String> = plan.rows[j..end].iter().map(|r| r.id.clone()).collect();
            let events = query::load_revisions(conn, community, &ids)?;
            if events.len() != ids.len() {
                return Err(Reason::Unavailable(
                    "an artifact revision was removed while this answer was read; retry".into(),
                ));
            }
            for (k, event) in events.into_iter().enumerate() {
                let size = json_bytes(&event)?;
                if !array.add(size) {
                    return Err(plan::too_large(plans, i, j + k, size, cap, true));
                }
                out.push(event);
            }
            budget.check()?;
            j = end;
        }
    }
    Ok(out)
}

/// The length of `event`'s JSON, counted without building it.
fn json_bytes(event: &Event) -> Result<usize, Reason> {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, event).map_err(|e| Reason::Internal(e.into()))?;
    Ok(count.0)
}
