//! [`Hello`]: the running plugin, one hook of each kind.

use crate::counts::{self, KindCounts};
use crate::{Config, COUNTS_KEY, MILESTONE_TAG, NAME, STATS_D_TAG, STATS_KEY, STATS_KIND};
use buzz_core::clock::Clock;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::live::LiveBus;
use buzz_core::plugin::{Plugin, QueryAnswer, Route, Services, Tx};
use buzz_core::store::Store;
use buzz_core::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub struct Hello {
    /// Lowercased banned words, checked as substrings of the lowercased content.
    banned: Vec<String>,
    milestone: u64,
    heartbeat: Option<Duration>,
    store: Store,
    /// Signs the stats event and milestone notes, like every relay-authored event.
    relay_keys: Keys,
    clock: Arc<dyn Clock>,
    /// Live fan-out: every connection delivers what is published here through its own
    /// access scope and subscription filters, exactly as for stored events.
    bus: Arc<dyn LiveBus>,
    /// Communities served, for the heartbeat.
    communities: Vec<i64>,
}

impl Hello {
    pub fn new(config: Config, services: &Services) -> Hello {
        Hello {
            banned: config
                .banned_words
                .iter()
                .map(|w| w.trim().to_lowercase())
                .collect(),
            milestone: config.milestone,
            heartbeat: (config.heartbeat_ms > 0)
                .then(|| Duration::from_millis(config.heartbeat_ms)),
            store: services.store.clone(),
            relay_keys: services.relay_keys.clone(),
            clock: services.clock.clone(),
            bus: services.bus.clone(),
            communities: services.communities.iter().map(|c| c.id).collect(),
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The counts of one community, from the database.
    pub async fn counts(&self, community_id: i64) -> Result<KindCounts, Reason> {
        self.store
            .read(move |mut conn| counts::of_community(&mut conn, community_id))
            .await
    }

    async fn stats_event(&self, community_id: i64) -> Result<Event, Reason> {
        let content = json!(self.counts(community_id).await?).to_string();
        Ok(self.relay_keys.sign(
            STATS_KIND,
            vec![vec!["d".into(), STATS_D_TAG.into()]],
            &content,
            self.clock.now_secs(),
        ))
    }

    /// Publish the community's stats to live subscribers.
    async fn publish_stats(&self, community_id: i64) -> Result<(), Reason> {
        let stats = StoredEvent {
            event: self.stats_event(community_id).await?,
            community_id,
            channel: None,
            received_at: self.clock.now_micros(),
        };
        self.bus.publish(Arc::new(stats)).await
    }
}

#[async_trait::async_trait]
impl Plugin for Hello {
    fn name(&self) -> &'static str {
        NAME
    }

    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        doc.insert(NAME.into(), json!({ "banned_words": self.banned.len() }));
    }

    async fn reject_event(&self, _ctx: &ConnCtx, event: &Event) -> Result<(), Reason> {
        let content = event.content.to_lowercase();
        if self
            .banned
            .iter()
            .any(|word| content.contains(word.as_str()))
        {
            return Err(Reason::Blocked("content contains a banned word".into()));
        }
        Ok(())
    }

    /// Count the event in the same transaction; on a milestone, store a relay-signed note
    /// that commits (or rolls back) with it.
    fn on_event_stored(&self, tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
        let kind = stored.event.kind;
        let count = counts::bump(tx.conn, tx.ctx.community_id, kind)?;
        if self.milestone > 0 && count % self.milestone == 0 {
            let note = self.relay_keys.sign(
                1,
                vec![
                    vec!["t".into(), MILESTONE_TAG.into()],
                    vec!["k".into(), kind.to_string()],
                ],
                &format!("{count} events of kind {kind}"),
                tx.ctx.now_micros.div_euclid(1_000_000),
            );
            tx.store_relay_event(note)?;
        }
        Ok(())
    }

    async fn on_event_committed(&self, _ctx: &ConnCtx, stored: &StoredEvent) {
        // Subscribers whose filters match kind 20999 in this community see the new counts
        // at once. The stats event is ephemeral: it goes to the bus, never to storage.
        if let Err(err) = self.publish_stats(stored.community_id).await {
            // An observer never fails the write; the counts are committed already.
            tracing::warn!(error = %err, "hello: live stats not delivered");
        }
    }

    fn reject_filter(&self, _ctx: &ConnCtx, filter: &Filter) -> Result<(), Reason> {
        for key in [STATS_KEY, COUNTS_KEY] {
            if filter
                .extensions
                .get(key)
                .is_some_and(|v| v != &Value::Bool(true))
            {
                return Err(Reason::invalid(format!("{key} must be true")));
            }
        }
        Ok(())
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        [STATS_KEY, COUNTS_KEY]
            .iter()
            .any(|key| filter.extensions.get(*key) == Some(&Value::Bool(true)))
    }

    async fn answer_claimed(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        let wants_object = filters
            .iter()
            .any(|f| f.extensions.contains_key(COUNTS_KEY));
        if wants_object {
            return Ok(QueryAnswer::Object(json!({
                "counts": self.counts(ctx.community_id()).await?,
            })));
        }
        // However many filters of the query asked, the answer is one event.
        Ok(QueryAnswer::Events(vec![
            self.stats_event(ctx.community_id()).await?,
        ]))
    }

    fn routes(self: Arc<Self>) -> Vec<Route> {
        crate::routes::routes(self)
    }

    fn background(self: Arc<Self>) -> Vec<BoxFuture<'static, ()>> {
        let Some(every) = self.heartbeat else {
            return Vec::new();
        };
        vec![Box::pin(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                for &community in &self.communities {
                    if let Err(err) = self.publish_stats(community).await {
                        tracing::warn!(error = %err, "hello: heartbeat not delivered");
                    }
                }
            }
        })]
    }
}
