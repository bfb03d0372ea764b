//! A plugin may answer its claimed filters with keys of stored events
//! (`QueryAnswer::Stored`): core reads their bodies a page at a time, in the plugin's
//! order, after its own matches, on REQ and `POST /query` alike. Both backends.

use buzz_core::both_backends;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, PluginEntry, PluginManifest, QueryAnswer, Services};
use buzz_core::store::query_keys;
use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::sync::Arc;

both_backends!(keys_are_sent_in_the_plugins_order);

/// Claims filters with `"oldest_first"`: the same filter's matches, oldest first.
struct OldestFirst {
    services: Services,
}

#[async_trait::async_trait]
impl Plugin for OldestFirst {
    fn name(&self) -> &'static str {
        "oldest_first"
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        filter.extensions.contains_key("oldest_first")
    }

    async fn answer_claimed(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        let scope = self.services.access.scope_for(ctx, None).await?;
        let now = self.services.clock.now_secs();
        let keys = self
            .services
            .store
            .read(move |mut conn| {
                let mut keys = Vec::new();
                for mut filter in filters {
                    filter.extensions.clear();
                    keys.extend(query_keys(&mut conn, &scope, &filter, 100, now)?);
                }
                Ok(keys)
            })
            .await?;
        Ok(QueryAnswer::Stored(
            keys.into_iter().rev().map(|(key, _)| key).collect(),
        ))
    }
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoKeys {}

struct OldestFirstPlugin;

impl PluginManifest for OldestFirstPlugin {
    const NAME: &'static str = "oldest_first";
    const ENABLED_BY_DEFAULT: bool = true;
    type Config = NoKeys;
    fn build(_config: NoKeys, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(OldestFirst {
            services: services.clone(),
        }))
    }
}

fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

async fn keys_are_sent_in_the_plugins_order(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |_| {},
        vec![PluginEntry::of::<OldestFirstPlugin>()],
    )
    .await
    else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&keys).await, (true, String::new()));
    let t = now();
    let mut notes = Vec::new();
    for i in 0..3 {
        let note = keys.sign(1, vec![], &format!("note {i}"), t - 10 + i);
        assert!(ws.publish(&note).await.0);
        notes.push(note.id);
    }
    let author = keys.pubkey().to_owned();
    let claimed = json!({"authors": [author], "oldest_first": true});
    // The plugin's order (oldest first), not core's (newest first).
    let answer = ws.req("a", vec![claimed.clone()]).await.expect("REQ");
    assert_eq!(ids(&answer), notes);
    let (status, body) = relay
        .http()
        .post_signed(&keys, "/query", json!([claimed]).to_string().as_bytes())
        .await;
    assert_eq!(status, 200, "{body}");
    let events: Vec<Event> = serde_json::from_value(body).expect("events");
    assert_eq!(ids(&events), notes);
    // Beside a plain filter: core's matches first, then the plugin's.
    let plain = json!({"ids": [notes[0]]});
    let both = ws.req("b", vec![plain, claimed]).await.expect("REQ");
    let mut expected = vec![notes[0].clone()];
    expected.extend(notes.iter().cloned());
    assert_eq!(ids(&both), expected);
    relay.stop().await;
}
