//! The running plugin: claims every filter with `"search"`, answers and counts them
//! within the reader's scope, keeps them live, and keeps the index in step with ingest.

use crate::config::Config;
use crate::grouped::NewDocuments;
use crate::index;
use crate::memory::RankMemory;
use crate::query::{Bounds, Search as SearchQuery};
use crate::rank::{self, Part};
use crate::scope::scoped;
use crate::search::{self, Job};
use crate::text::{document, ARTIFACT_KIND};
use crate::{backfill, NAME, SEARCH_KEY};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{LiveCondition, Plugin, PurgedEvent, QueryAnswer, Services, Tx};
use buzz_core::store::Conn;
use buzz_core::store::Count;
use buzz_core::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// A NIP-09 deletion.
const DELETION_KIND: u32 = 5;
/// A moderator's removal of events (NIP-29).
const REMOVAL_KIND: u32 = 9_005;

pub struct Search {
    config: Config,
    kinds: HashSet<u32>,
    services: Services,
    /// The process's budget for candidate text being ranked (`rank_memory_bytes`).
    memory: RankMemory,
}

impl Search {
    pub fn new(config: Config, services: Services) -> Search {
        Search {
            kinds: config.kinds.iter().copied().collect(),
            memory: RankMemory::new(config.rank_memory_bytes),
            config,
            services,
        }
    }

    /// Parse one claimed filter: its search string and the kinds it searches.
    fn job(&self, filter: &Filter) -> Result<Job, Reason> {
        let text = filter
            .extensions
            .get(SEARCH_KEY)
            .and_then(Value::as_str)
            .ok_or_else(|| Reason::invalid("search must be a string"))?;
        let search = SearchQuery::parse(
            text,
            Bounds {
                max_bytes: self.config.max_search_bytes,
                max_terms: self.config.max_terms,
            },
        )?;
        let kinds = match &filter.kinds {
            Some(kinds) => kinds
                .iter()
                .filter(|k| self.kinds.contains(k))
                .copied()
                .collect(),
            None => self.config.kinds.clone(),
        };
        Ok(Job {
            filter: filter.clone(),
            search,
            kinds,
        })
    }

    /// Every filter parsed, then core's rule for readers who have not authenticated,
    /// judged on the kinds actually searched (a search without `kinds` searches channel
    /// messages: `auth-required:` like a REQ for them).
    /// Identical filters are one (they would find the same events); more distinct ones
    /// than `max_search_filters` are `invalid:`, before anything is read.
    async fn jobs(&self, ctx: &ConnCtx, filters: &[Filter]) -> Result<Vec<Job>, Reason> {
        let mut distinct: Vec<&Filter> = Vec::new();
        for filter in filters {
            if !distinct.contains(&filter) {
                distinct.push(filter);
            }
        }
        let max = self.config.max_search_filters;
        if distinct.len() > max {
            return Err(Reason::invalid(format!(
                "{} different search filters; at most {max} per query (max_search_filters)",
                distinct.len()
            )));
        }
        let jobs = distinct
            .into_iter()
            .map(|f| self.job(f))
            .collect::<Result<Vec<_>, _>>()?;
        for job in &jobs {
            let mut probe = job.filter.clone();
            probe.extensions.clear();
            probe.kinds = Some(job.kinds.clone());
            self.services.access.check_filter(ctx, &probe).await?;
        }
        Ok(jobs)
    }

    /// The caller's read scope for `jobs` (decided on the named channels alone when
    /// every filter names some).
    async fn scope(&self, ctx: &ConnCtx, jobs: &[Job]) -> Result<buzz_core::store::Scope, Reason> {
        let named: Option<Vec<String>> = jobs
            .iter()
            .map(|j| j.filter.channels().map(<[String]>::to_vec))
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.concat());
        self.services.access.scope_for(ctx, named).await
    }

    /// Index a revision that just became its artifact's current one (its hook ran
    /// before this one), replacing the revision indexed before it.
    fn index_artifact(&self, tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
        let event = &stored.event;
        let community = stored.community_id;
        let Some(d) = event.tag_values("d").next() else {
            return Ok(());
        };
        let Some(head) = buzz_artifacts::head(tx.conn, community, d)? else {
            return Ok(());
        };
        if head.revision_id != event.id {
            return Ok(());
        }
        if let Some(previous) = index::artifact_entry(tx.conn, community, d)? {
            index::remove(tx.conn, previous)?;
        }
        let mut seq = None;
        if head.is_listed() {
            let doc = scoped(community, stored.channel.as_deref(), &document(event));
            index::add(tx.conn, tx.seq, &doc)?;
            seq = Some(tx.seq);
        }
        index::set_artifact_entry(tx.conn, community, d, seq)
    }

    /// Take out the entries of the events a kind 5 deleted or a 9005 removed.
    fn remove_targets(&self, tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
        let moderator = stored.event.kind == REMOVAL_KIND;
        let targets: Vec<String> = stored.event.tag_values("e").map(str::to_owned).collect();
        for id in targets {
            let Some(row) = index::stored(tx.conn, stored.community_id, &id)? else {
                continue;
            };
            // A kind 5 deletes only what core deleted for it (the author's own events);
            // an accepted 9005 removes what it names (an artifact revision it redacts
            // included).
            if moderator || row.deleted_at.is_some() {
                index::remove(tx.conn, row.seq)?;
                index::drop_artifact_seq(tx.conn, row.seq)?;
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Plugin for Search {
    fn name(&self) -> &'static str {
        NAME
    }

    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        doc.insert(NAME.into(), self.config.nip11());
    }

    fn on_event_stored(&self, tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
        let kind = stored.event.kind;
        match kind {
            DELETION_KIND | REMOVAL_KIND => self.remove_targets(tx, stored),
            ARTIFACT_KIND if self.kinds.contains(&kind) => self.index_artifact(tx, stored),
            _ if self.kinds.contains(&kind) => {
                let doc = document(&stored.event);
                if doc.is_empty() {
                    return Ok(());
                }
                let doc = scoped(stored.community_id, stored.channel.as_deref(), &doc);
                let seq = tx.seq;
                match tx.group_rows::<NewDocuments>() {
                    Some(documents) => {
                        documents.add(seq, &doc);
                        Ok(())
                    }
                    None => index::add_new(tx.conn, seq, &doc),
                }
            }
            _ => Ok(()),
        }
    }

    /// NIP-40-expired events leave the index with their rows: the FTS5 document
    /// (contentless, so nothing else takes it out) and the artifact entry pointing at
    /// one (PostgreSQL's documents would go by `ON DELETE CASCADE` too; taken out here
    /// the same way on both backends).
    fn on_events_purged(&self, conn: &mut Conn<'_>, purged: &[PurgedEvent]) -> Result<(), Reason> {
        for event in purged {
            index::remove(conn, event.seq)?;
            index::drop_artifact_seq(conn, event.seq)?;
        }
        Ok(())
    }

    /// Deletions, removals and revisions read other events' rows.
    fn event_is_independent(&self, event: &Event) -> bool {
        !matches!(event.kind, DELETION_KIND | REMOVAL_KIND | ARTIFACT_KIND)
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        filter.extensions.contains_key(SEARCH_KEY)
    }

    async fn answer_claimed(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        let jobs = self.jobs(ctx, &filters).await?;
        let scope = self.scope(ctx, &jobs).await?;
        let now = self.services.clock.now_secs();
        let max_limit = self.services.settings.limits.max_limit;
        let candidates = self.config.max_candidates;
        let examined = self.config.max_count_rows;
        // Keys and sizes first; bodies only to rank them (`rank.rs`) and, for the events
        // sent, when core sends them.
        let parts = self
            .services
            .store
            .read(move |mut conn| {
                let mut parts = Vec::with_capacity(jobs.len());
                for job in jobs {
                    let limit = job.filter.limit.unwrap_or(max_limit).min(max_limit);
                    parts.push(Part {
                        candidates: search::candidates(
                            &mut conn, &scope, &job, candidates, examined, now,
                        )?,
                        search: job.search,
                        limit: usize::try_from(limit).unwrap_or(usize::MAX),
                    });
                }
                Ok(parts)
            })
            .await?;
        let keys = rank::rank(
            &self.services.store,
            &self.memory,
            parts,
            self.config.max_ranked_bytes,
        )
        .await?;
        Ok(QueryAnswer::Stored(keys))
    }

    async fn answer_count(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<Option<Count>, Reason> {
        let jobs = self.jobs(ctx, &filters).await?;
        let scope = self.scope(ctx, &jobs).await?;
        let now = self.services.clock.now_secs();
        let cap = self.config.max_count_rows;
        let n = self
            .services
            .store
            .read(move |mut conn| search::count(&mut conn, &scope, &jobs, now, cap))
            .await?;
        Ok(Some(n))
    }

    fn live_condition(&self, filter: &Filter) -> Option<LiveCondition> {
        let job = self.job(filter).ok()?;
        let kinds: HashSet<u32> = job.kinds.into_iter().collect();
        let search = job.search;
        Some(Arc::new(move |event: &Event| {
            kinds.contains(&event.kind) && search.matches(&document(event))
        }))
    }

    fn background(self: Arc<Self>) -> Vec<BoxFuture<'static, ()>> {
        let services = self.services.clone();
        let config = self.config.clone();
        vec![Box::pin(backfill::run(services, config))]
    }
}
