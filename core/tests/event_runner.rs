//! A connection's EVENTs in flight share one task (`http/ws/events.rs`). Sharing must not
//! couple them: an EVENT whose processing panics (a bug in a plugin, say) fails alone with
//! an `error:` OK, and the connection's other EVENTs, before and after it, are answered
//! and stored as usual.

use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, PluginEntry, PluginManifest, Services};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use std::sync::Arc;

/// Panics on any event whose content starts with "boom".
struct Panicker;

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct NoOptions {}

impl PluginManifest for Panicker {
    const NAME: &'static str = "event_runner_panicker";
    const ENABLED_BY_DEFAULT: bool = true;
    type Config = NoOptions;

    fn build(_config: NoOptions, _services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Panicker))
    }
}

#[async_trait::async_trait]
impl Plugin for Panicker {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    async fn reject_event(&self, _ctx: &ConnCtx, event: &Event) -> Result<(), Reason> {
        assert!(!event.content.starts_with("boom"), "a plugin bug");
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_event_fails_alone() {
    let Some(relay) = TestRelay::start_with(
        TestBackend::Sqlite,
        "a_panicking_event_fails_alone",
        |_| {},
        vec![PluginEntry::of::<Panicker>()],
    )
    .await
    else {
        return;
    };
    let keys = Keys::generate();
    let t = now();
    let events: Vec<Event> = (0..40)
        .map(|i| {
            let content = if i % 10 == 5 {
                format!("boom {i}")
            } else {
                format!("n{i}")
            };
            keys.sign(1, vec![tag(&["t", "runner"])], &content, t)
        })
        .collect();
    let mut ws = relay.ws().await;
    let oks = ws.burst(&events).await;
    assert_eq!(oks.len(), events.len(), "an OK for every EVENT");
    for event in &events {
        let (accepted, message) = &oks[&event.id];
        if event.content.starts_with("boom") {
            assert!(!accepted, "{message}");
            assert!(message.starts_with("error:"), "{message}");
            assert_eq!(relay.stored_rows(&event.id).await, 0);
        } else {
            assert!(accepted, "{message}");
            assert_eq!(relay.stored_rows(&event.id).await, 1);
        }
    }
    // The connection goes on.
    let after = keys.sign(1, vec![tag(&["t", "runner"])], "after", t);
    assert_eq!(ws.publish(&after).await, (true, String::new()));
    relay.stop().await;
}
