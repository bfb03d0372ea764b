//! `hello`: the smallest real Buzz plugin, one hook of each kind.
//!
//! It depends only on the plugin API ([`buzz_core::plugin`]) and the types it names, plus
//! actix-web for its one route. What it does, hook by hook:
//!
//! | hook | behaviour |
//! |---|---|
//! | [`Plugin::check_event`] | refuses content containing a configured banned word (`blocked:`) |
//! | [`Plugin::after_commit`] | counts stored events per community and kind, in memory, and contributes the fresh kind-20999 stats event to live fan-out ([`Services::bus`]) |
//! | [`Plugin::claims_filter`] / [`Plugin::answer`] | a filter with `"hello_stats": true` is answered with one relay-signed kind-20999 event holding the counts |
//! | [`Plugin::routes`] | `GET /hello/stats`: the same counts as JSON |
//! | [`Plugin::nip11`] | adds `"hello": {"banned_words": N}` |
//!
//! Configuration (`config.toml`):
//!
//! ```toml
//! [plugins.hello]
//! enabled = true
//! banned_words = ["spam", "scam"]   # case-insensitive substrings; default none
//! ```
//!
//! Register it in a binary with `RelayBuilder::new(settings).plugin(NAME, factory())`.
//! Counters live in this process only and start at zero on every start: this is a
//! teaching example, not a metrics system.

use actix_web::{web, HttpRequest, HttpResponse};
use buzz_core::clock::Clock;
use buzz_core::config::PluginSection;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::event::{Event, StoredEvent};
use buzz_core::filter::Filter;
use buzz_core::http::{AppState, RequestCtx};
use buzz_core::keys::Keys;
use buzz_core::live::LiveBus;
use buzz_core::plugin::{Plugin, PluginFactory, QueryAnswer, Services};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

/// The config name: `[plugins.hello]`.
pub const NAME: &str = "hello";
/// Kind of the relay-signed stats event (ephemeral range: never stored).
pub const STATS_KIND: u32 = 20_999;
/// The filter extension key this plugin claims when it is `true`.
pub const STATS_KEY: &str = "hello_stats";
/// The `d` tag of the stats event.
pub const STATS_D_TAG: &str = "hello-stats";
/// Path of the stats route.
pub const STATS_PATH: &str = "/hello/stats";

/// Stored events per kind, in kind order (serializes as `{"1": 3, "7": 1}`).
pub type KindCounts = BTreeMap<u32, u64>;

/// The factory to hand to `RelayBuilder::plugin`.
pub fn factory() -> PluginFactory {
    build
}

/// Build the plugin from its `[plugins.hello]` section (matches [`PluginFactory`]).
pub fn build(section: &PluginSection, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
    Ok(Arc::new(Hello::new(section, services)?))
}

pub struct Hello {
    /// Lowercased banned words, checked as substrings of the lowercased content.
    banned: Vec<String>,
    /// Community id → stored events per kind. A `Mutex` is enough: it is held for one
    /// map update per stored event or one clone per stats request, never across an await.
    /// Keyed by community because nothing may leak from one community to another.
    counts: Mutex<HashMap<i64, KindCounts>>,
    /// Signs the stats event, like every relay-authored event.
    relay_keys: Keys,
    clock: Arc<dyn Clock>,
    /// Live fan-out: every connection delivers what is published here through its own
    /// access scope and subscription filters, exactly as for stored events.
    bus: Arc<dyn LiveBus>,
}

impl Hello {
    pub fn new(section: &PluginSection, services: &Services) -> anyhow::Result<Hello> {
        Ok(Hello {
            banned: banned_words(&section.options)?,
            counts: Mutex::new(HashMap::new()),
            relay_keys: services.relay_keys.clone(),
            clock: services.clock.clone(),
            bus: services.bus.clone(),
        })
    }

    /// The counts of one community (empty when nothing was stored there yet).
    pub fn counts(&self, community_id: i64) -> KindCounts {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&community_id)
            .cloned()
            .unwrap_or_default()
    }

    fn stats_event(&self, community_id: i64) -> Event {
        let content = json!(self.counts(community_id)).to_string();
        self.relay_keys.sign(
            STATS_KIND,
            vec![vec!["d".into(), STATS_D_TAG.into()]],
            &content,
            self.clock.now_secs(),
        )
    }

    /// `GET /hello/stats`: the counts of the community the `Host` header selects.
    fn stats_route(&self, req: &HttpRequest, state: &AppState) -> HttpResponse {
        match RequestCtx::resolve(req, state) {
            Ok(ctx) => HttpResponse::Ok().json(self.counts(ctx.conn.community_id())),
            Err(reason) => reason.http_response(),
        }
    }
}

/// Read `banned_words = ["..", ..]`; absent means none.
fn banned_words(options: &Map<String, Value>) -> anyhow::Result<Vec<String>> {
    let Some(value) = options.get("banned_words") else {
        return Ok(Vec::new());
    };
    let wrong =
        || anyhow::anyhow!("plugins.hello.banned_words must be a list of non-empty strings");
    value
        .as_array()
        .ok_or_else(wrong)?
        .iter()
        .map(|word| match word.as_str() {
            Some(w) if !w.trim().is_empty() => Ok(w.trim().to_lowercase()),
            _ => Err(wrong()),
        })
        .collect()
}

#[async_trait::async_trait]
impl Plugin for Hello {
    fn name(&self) -> &'static str {
        NAME
    }

    fn nip11(&self, doc: &mut Map<String, Value>) {
        doc.insert(NAME.into(), json!({ "banned_words": self.banned.len() }));
    }

    async fn check_event(&self, _ctx: &ConnCtx, event: &Event) -> Result<(), Reason> {
        if self.banned.is_empty() {
            return Ok(());
        }
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

    async fn after_commit(&self, _ctx: &ConnCtx, stored: &StoredEvent) {
        {
            let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            *counts
                .entry(stored.community_id)
                .or_default()
                .entry(stored.event.kind)
                .or_default() += 1;
        }
        // Contribute to live fan-out: subscribers whose filters match kind 20999 in this
        // community see the new counts at once. The stats event is ephemeral and goes
        // straight to the bus, so it is never stored (nor counted).
        let stats = StoredEvent {
            event: self.stats_event(stored.community_id),
            community_id: stored.community_id,
            channel: None,
            received_at: self.clock.now_micros(),
        };
        if let Err(err) = self.bus.publish(Arc::new(stats)).await {
            // An observer never fails the write; the counts are still up to date.
            tracing::warn!(error = %err.wire_text(), "hello: live stats not delivered");
        }
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        filter.extensions.get(STATS_KEY) == Some(&Value::Bool(true))
    }

    async fn answer(&self, ctx: &ConnCtx, _filters: Vec<Filter>) -> Result<QueryAnswer, Reason> {
        // However many filters of the query asked, the answer is one event.
        Ok(QueryAnswer::Events(vec![
            self.stats_event(ctx.community_id())
        ]))
    }

    fn routes(self: Arc<Self>, cfg: &mut web::ServiceConfig) {
        cfg.route(
            STATS_PATH,
            web::get().to(move |req: HttpRequest, state: web::Data<AppState>| {
                let hello = self.clone();
                async move { hello.stats_route(&req, &state) }
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(value: Value) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("banned_words".into(), value);
        map
    }

    #[test]
    fn banned_words_are_read_lowercased_and_validated() {
        assert!(banned_words(&Map::new()).expect("absent").is_empty());
        assert_eq!(
            banned_words(&options(json!(["Spam", " scam "]))).expect("list"),
            vec!["spam".to_owned(), "scam".to_owned()]
        );
        for bad in [json!("spam"), json!([1]), json!([""]), json!(["  "])] {
            let err = banned_words(&options(bad.clone())).expect_err(&bad.to_string());
            assert!(err.to_string().contains("banned_words"), "{err}");
        }
    }
}
