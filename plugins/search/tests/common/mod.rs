//! Helpers shared by the search suites: a relay with the search and artifacts plugins,
//! authenticated users publishing over WebSocket, searches over REQ, COUNT and
//! `POST /query`. Everything speaks the wire.

#![allow(dead_code)] // each suite uses its own subset

use buzz_artifacts::ArtifactsPlugin;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_search::{SearchPlugin, NAME};
use serde_json::{json, Value};

/// A relay with artifacts and search (in the binary's order), search options given.
pub(crate) async fn relay_with(
    backend: TestBackend,
    name: &str,
    options: Value,
    more: impl FnOnce(&mut Settings),
) -> Option<TestRelay> {
    let tweak = move |s: &mut Settings| {
        if let (Some(section), Value::Object(options)) = (s.plugins.get_mut(NAME), options) {
            section.options.extend(options);
        }
        more(s);
    };
    TestRelay::start_with(
        backend,
        name,
        tweak,
        vec![
            PluginEntry::of::<ArtifactsPlugin>(),
            PluginEntry::of::<SearchPlugin>(),
        ],
    )
    .await
}

pub(crate) async fn relay(backend: TestBackend, name: &str) -> Option<TestRelay> {
    relay_with(backend, name, json!({}), |_| {}).await
}

#[allow(unused_imports)] // each suite uses its own subset
pub(crate) use buzz_core::testkit::{fresh_id as uuid, fresh_sub as sub};

/// An authenticated user: the testkit's [`Member`], with [`Searcher`]'s moves.
pub(crate) use buzz_core::testkit::Member as User;

/// What the search suites do beyond a plain member: search over each transport.
pub(crate) trait Searcher {
    /// Search over REQ: the ids found, in order.
    async fn search(&mut self, filter: Value) -> Vec<String>;
    /// NIP-45 COUNT of one filter.
    async fn count(&mut self, filter: Value) -> Result<u64, String>;
    /// Search over POST /query: the ids found, in order.
    async fn search_http(&self, relay: &TestRelay, filter: Value) -> Vec<String>;
}

impl Searcher for User {
    async fn search(&mut self, filter: Value) -> Vec<String> {
        ids(&self.req(vec![filter.clone()]).await.unwrap_or_else(|e| {
            panic!("search {filter} refused: {e}");
        }))
    }

    async fn count(&mut self, filter: Value) -> Result<u64, String> {
        let v = self.ws.count(&sub(), vec![filter]).await?;
        Ok(v["count"].as_u64().expect("count"))
    }

    async fn search_http(&self, relay: &TestRelay, filter: Value) -> Vec<String> {
        let (status, body) = self.http(relay, vec![filter]).await;
        assert_eq!(status, 200, "{body}");
        let events: Vec<Event> = serde_json::from_value(body).expect("events");
        ids(&events)
    }
}

pub(crate) fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

pub(crate) fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
