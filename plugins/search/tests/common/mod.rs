//! Helpers shared by the search suites: a relay with the search and artifacts plugins,
//! authenticated users publishing over WebSocket, searches over REQ, COUNT and
//! `POST /query`. Everything speaks the wire.

#![allow(dead_code)] // each suite uses its own subset

use buzz_artifacts::ArtifactsPlugin;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
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

pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A fresh subscription id.
pub(crate) fn sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// An authenticated user with its own WebSocket connection.
pub(crate) struct User {
    pub(crate) keys: Keys,
    pub(crate) ws: WsClient,
}

impl User {
    pub(crate) async fn new(relay: &TestRelay) -> User {
        let keys = Keys::generate();
        let mut ws = relay.ws().await;
        assert_eq!(ws.auth(&keys).await, (true, String::new()), "AUTH");
        User { keys, ws }
    }

    /// A user of the community at `host` (`name.test`), same relay.
    pub(crate) async fn at(relay: &TestRelay, host: &str) -> User {
        let keys = Keys::generate();
        let host = format!("{host}:{}", relay.running().addr.port());
        let mut ws = WsClient::connect(relay.running().addr, &host)
            .await
            .expect("connect");
        assert_eq!(ws.auth(&keys).await, (true, String::new()), "AUTH");
        User { keys, ws }
    }

    pub(crate) fn pubkey(&self) -> String {
        self.keys.pubkey().to_owned()
    }

    pub(crate) fn sign(&self, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
        self.keys.sign(kind, tags, content, now())
    }

    /// Publish and require acceptance.
    pub(crate) async fn publish(&mut self, event: Event) -> Event {
        let (ok, msg) = self.ws.publish(&event).await;
        assert!(ok, "kind {} refused: {msg}", event.kind);
        event
    }

    /// Create a channel (open, or private = members only); returns its id.
    pub(crate) async fn create_channel(&mut self, private: bool) -> String {
        let id = uuid();
        let mut tags = vec![tag(&["h", &id]), tag(&["name", "search"])];
        if private {
            tags.push(tag(&["private"]));
        }
        self.publish(self.sign(9007, tags, "")).await;
        id
    }

    pub(crate) async fn add_member(&mut self, channel: &str, member: &str) {
        let tags = vec![tag(&["h", channel]), tag(&["p", member, "member"])];
        self.publish(self.sign(9000, tags, &uuid())).await;
    }

    pub(crate) async fn post(&mut self, channel: &str, content: &str) -> Event {
        let event = self.sign(9, vec![tag(&["h", channel])], content);
        self.publish(event).await
    }

    /// REQ, events until EOSE (`Err`: the CLOSED text); the subscription is closed.
    pub(crate) async fn req(&mut self, filters: Vec<Value>) -> Result<Vec<Event>, String> {
        let id = sub();
        let answer = self.ws.req(&id, filters).await;
        if answer.is_ok() {
            self.ws.send(&json!(["CLOSE", id])).await.expect("CLOSE");
        }
        answer
    }

    /// Search over REQ: the ids found, in order.
    pub(crate) async fn search(&mut self, filter: Value) -> Vec<String> {
        ids(&self.req(vec![filter.clone()]).await.unwrap_or_else(|e| {
            panic!("search {filter} refused: {e}");
        }))
    }

    /// NIP-45 COUNT of one filter.
    pub(crate) async fn count(&mut self, filter: Value) -> Result<u64, String> {
        let v = self.ws.count(&sub(), vec![filter]).await?;
        Ok(v["count"].as_u64().expect("count"))
    }

    /// POST /query signed by this user: status and body.
    pub(crate) async fn http(&self, relay: &TestRelay, filters: Vec<Value>) -> (u16, Value) {
        let body = Value::Array(filters).to_string();
        relay
            .http()
            .post_signed(&self.keys, "/query", body.as_bytes())
            .await
    }

    /// Search over POST /query: the ids found, in order.
    pub(crate) async fn search_http(&self, relay: &TestRelay, filter: Value) -> Vec<String> {
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
