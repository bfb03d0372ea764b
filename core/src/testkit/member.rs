//! A community member for wire tests: keys plus a NIP-42-authenticated [`WsClient`], and
//! the few NIP-29 moves nearly every suite makes (create a channel, join, post, reply,
//! publish and require the OK).
//!
//! Why here: each suite used to write its own `authed`, `create_channel` and `User`, a
//! dozen copies that drifted only in names. The free functions serve suites that keep a
//! bare `WsClient` of their own.

use super::{now, tag, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

/// A fresh lowercase UUID: a channel id, or content that makes an event unique.
pub fn fresh_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A subscription id never used before, so earlier subscriptions' live events never mix
/// into an answer.
pub fn fresh_sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A connection to `relay` authenticated as `keys` (the AUTH must be accepted).
pub async fn authed(relay: &TestRelay, keys: &Keys) -> WsClient {
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(keys).await, (true, String::new()), "AUTH accepted");
    ws
}

/// [`authed`] to the community at `host` (no port: the relay's is added).
pub async fn authed_at(relay: &TestRelay, host: &str, keys: &Keys) -> WsClient {
    let host = format!("{host}:{}", relay.addr.port());
    let mut ws = WsClient::connect(relay.addr, &host)
        .await
        .expect("websocket connects");
    assert_eq!(ws.auth(keys).await, (true, String::new()), "AUTH at {host}");
    ws
}

/// Publish `event` and require the relay to accept it.
pub async fn publish_ok(ws: &mut WsClient, event: Event) -> Event {
    let (accepted, message) = ws.publish(&event).await;
    assert!(accepted, "kind {} refused: {message}", event.kind);
    event
}

/// Sign an event of `kind` now, with unique content, and require it accepted.
pub async fn publish_kind(
    ws: &mut WsClient,
    keys: &Keys,
    kind: u32,
    tags: Vec<Vec<String>>,
) -> Event {
    publish_ok(ws, keys.sign(kind, tags, &fresh_id(), now())).await
}

/// Create a channel as `keys` (open, or `private` = members only); returns its id.
pub async fn create_channel(ws: &mut WsClient, keys: &Keys, private: bool) -> String {
    let id = fresh_id();
    let mut tags = vec![tag(&["h", &id]), tag(&["name", "general"])];
    if private {
        tags.push(tag(&["private"]));
    }
    publish_kind(ws, keys, 9007, tags).await;
    id
}

/// An authenticated member with its own WebSocket connection.
pub struct Member {
    pub keys: Keys,
    pub ws: WsClient,
}

impl Member {
    pub async fn new(relay: &TestRelay) -> Member {
        Self::with_keys(relay, Keys::generate()).await
    }

    pub async fn with_keys(relay: &TestRelay, keys: Keys) -> Member {
        let ws = authed(relay, &keys).await;
        Member { keys, ws }
    }

    /// A member of the community at `host` (no port), same relay.
    pub async fn at(relay: &TestRelay, host: &str, keys: Keys) -> Member {
        let ws = authed_at(relay, host, &keys).await;
        Member { keys, ws }
    }

    pub fn pubkey(&self) -> String {
        self.keys.pubkey().to_owned()
    }

    /// Sign now (not published).
    pub fn sign(&self, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
        self.keys.sign(kind, tags, content, now())
    }

    /// Sign at author time `at` (not published).
    pub fn sign_at(&self, kind: u32, tags: Vec<Vec<String>>, content: &str, at: i64) -> Event {
        self.keys.sign(kind, tags, content, at)
    }

    /// Publish over WebSocket: `(accepted, message)`.
    pub async fn send(&mut self, event: &Event) -> (bool, String) {
        self.ws.publish(event).await
    }

    /// Publish and require acceptance.
    pub async fn publish(&mut self, event: Event) -> Event {
        publish_ok(&mut self.ws, event).await
    }

    /// Sign `kind` now with unique content (the same tags twice in one second are still
    /// two events) and publish: `(accepted, message)` and the event.
    pub async fn try_kind(&mut self, kind: u32, tags: Vec<Vec<String>>) -> (bool, String, Event) {
        let event = self.sign(kind, tags, &fresh_id());
        let (ok, message) = self.ws.publish(&event).await;
        (ok, message, event)
    }

    /// [`Member::try_kind`], requiring acceptance.
    pub async fn publish_kind(&mut self, kind: u32, tags: Vec<Vec<String>>) -> Event {
        publish_kind(&mut self.ws, &self.keys, kind, tags).await
    }

    /// [`Member::try_kind`], requiring refusal: the refusal's text.
    pub async fn refusal(&mut self, kind: u32, tags: Vec<Vec<String>>) -> String {
        let (ok, message, _) = self.try_kind(kind, tags).await;
        assert!(!ok, "kind {kind} was accepted");
        message
    }

    /// Create a channel (open, or private = members only); returns its id.
    pub async fn create_channel(&mut self, private: bool) -> String {
        create_channel(&mut self.ws, &self.keys, private).await
    }

    /// Create a channel with these tags besides `h` and `name`; returns its id.
    pub async fn create_channel_with(&mut self, extra: &[&[&str]]) -> String {
        let id = fresh_id();
        let mut tags = vec![tag(&["h", &id]), tag(&["name", "general"])];
        tags.extend(extra.iter().map(|t| tag(t)));
        self.publish_kind(9007, tags).await;
        id
    }

    /// Add `member` to `channel` (kind 9000; the caller must manage it).
    pub async fn add_member(&mut self, channel: &str, member: &str) {
        let tags = vec![tag(&["h", channel]), tag(&["p", member, "member"])];
        // Unique content: adding the same member twice in one second is two events.
        self.publish(self.sign(9000, tags, &fresh_id())).await;
    }

    /// Remove `member` from `channel` (kind 9001).
    pub async fn remove_member(&mut self, channel: &str, member: &str) {
        let tags = vec![tag(&["h", channel]), tag(&["p", member])];
        self.publish(self.sign(9001, tags, &fresh_id())).await;
    }

    /// Ask to join `channel` (kind 9021).
    pub async fn join(&mut self, channel: &str) -> Event {
        self.publish(self.sign(9021, vec![tag(&["h", channel])], &fresh_id()))
            .await
    }

    /// A kind-9 message in `channel`, now.
    pub async fn post(&mut self, channel: &str, content: &str) -> Event {
        self.post_at(channel, content, now()).await
    }

    /// A kind-9 message in `channel` at author time `at`.
    pub async fn post_at(&mut self, channel: &str, content: &str, at: i64) -> Event {
        let event = self.sign_at(9, vec![tag(&["h", channel])], content, at);
        self.publish(event).await
    }

    /// A reply to `parent` (NIP-10 `reply` marker), now.
    pub async fn reply(&mut self, channel: &str, parent: &Event, content: &str) -> Event {
        self.reply_at(channel, parent, content, now()).await
    }

    /// A reply to `parent` (NIP-10 `reply` marker) at author time `at`.
    pub async fn reply_at(
        &mut self,
        channel: &str,
        parent: &Event,
        content: &str,
        at: i64,
    ) -> Event {
        let tags = vec![tag(&["h", channel]), tag(&["e", &parent.id, "", "reply"])];
        self.publish(self.sign_at(9, tags, content, at)).await
    }

    /// REQ over this member's WebSocket: events until EOSE (`Err`: the CLOSED text).
    /// The subscription is closed after its EOSE.
    pub async fn req(&mut self, filters: Vec<Value>) -> Result<Vec<Event>, String> {
        let id = fresh_sub();
        let answer = self.ws.req(&id, filters).await;
        if answer.is_ok() {
            self.ws
                .send(&json!(["CLOSE", id]))
                .await
                .expect("send CLOSE");
        }
        answer
    }

    /// POST /query signed by this member: status and body.
    pub async fn http(&self, relay: &TestRelay, filters: Vec<Value>) -> (u16, Value) {
        let body = Value::Array(filters).to_string();
        relay
            .http()
            .post_signed(&self.keys, "/query", body.as_bytes())
            .await
    }

    /// POST /query that must succeed: the events.
    pub async fn query(&self, relay: &TestRelay, filters: Vec<Value>) -> Vec<Event> {
        let (status, body) = self.http(relay, filters).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_value(body).expect("an array of events")
    }

    /// POST /events signed by this member: status and body.
    pub async fn post_event(&self, relay: &TestRelay, event: &Event) -> (u16, Value) {
        let body = serde_json::to_vec(event).expect("event JSON");
        relay.http().post_signed(&self.keys, "/events", &body).await
    }
}
