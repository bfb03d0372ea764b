//! Helpers shared by the artifact suites: a relay with the plugin, authenticated users
//! that publish over WebSocket or `POST /events`, and revision builders. Everything
//! speaks the wire.

#![allow(dead_code)] // each suite uses its own subset

use buzz_artifacts::{ArtifactsPlugin, NAME};
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

pub(crate) const TASK: &str = "buzz.task";

/// A relay with `artifacts` enabled and these section options.
pub(crate) async fn relay_with(
    backend: TestBackend,
    name: &str,
    options: Value,
) -> Option<TestRelay> {
    relay_tuned(backend, name, options, |_| {}).await
}

/// [`relay_with`], and core settings changed by `core` (say, smaller event limits).
pub(crate) async fn relay_tuned(
    backend: TestBackend,
    name: &str,
    options: Value,
    core: impl FnOnce(&mut Settings),
) -> Option<TestRelay> {
    let tweak = move |s: &mut Settings| {
        core(s);
        if let (Some(section), Value::Object(options)) = (s.plugins.get_mut(NAME), options) {
            section.options.extend(options);
        }
    };
    TestRelay::start_with(
        backend,
        name,
        tweak,
        vec![PluginEntry::of::<ArtifactsPlugin>()],
    )
    .await
}

pub(crate) async fn relay(backend: TestBackend, name: &str) -> Option<TestRelay> {
    relay_with(backend, name, json!({})).await
}

pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A fresh subscription id.
pub(crate) fn sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A revision before signing: the envelope plus client tags and content.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub(crate) d: String,
    pub(crate) h: String,
    pub(crate) ty: String,
    pub(crate) title: Option<String>,
    pub(crate) op: String,
    pub(crate) root: Option<String>,
    pub(crate) prev: Option<String>,
    pub(crate) extra: Vec<Vec<String>>,
    pub(crate) content: String,
}

impl Draft {
    /// A create of a new task in `h`.
    pub(crate) fn create(h: &str, title: &str) -> Draft {
        Draft {
            d: uuid(),
            h: h.to_owned(),
            ty: TASK.to_owned(),
            title: Some(title.to_owned()),
            op: "create".into(),
            root: None,
            prev: None,
            extra: Vec::new(),
            content: r#"{"version":1,"status":"open"}"#.into(),
        }
    }

    /// The next revision after `prev` (same envelope, `op`, `prev` = its id); a delete
    /// drops the title, client tags and content.
    pub(crate) fn after(prev: &Event, op: &str) -> Draft {
        let get = |name: &str| prev.tag_value(name).map(str::to_owned);
        let mut d = Draft {
            d: get("d").unwrap_or_default(),
            h: get("h").unwrap_or_default(),
            ty: get("type").unwrap_or_default(),
            title: get("title").or_else(|| Some("restored".into())),
            op: op.into(),
            root: get("root"),
            prev: Some(prev.id.clone()),
            extra: prev
                .tags
                .iter()
                .filter(|t| {
                    !["ar", "d", "h", "type", "title", "op", "root", "prev"]
                        .contains(&t[0].as_str())
                })
                .cloned()
                .collect(),
            content: if prev.content.is_empty() {
                r#"{"version":1}"#.into()
            } else {
                prev.content.clone()
            },
        };
        if op == "delete" {
            d.title = None;
            d.extra.clear();
            d.content = String::new();
        }
        d
    }

    pub(crate) fn with(mut self, name: &str, value: &str) -> Draft {
        self.extra.push(tag(&[name, value]));
        self
    }

    pub(crate) fn content(mut self, content: &str) -> Draft {
        self.content = content.into();
        self
    }

    pub(crate) fn tags(&self) -> Vec<Vec<String>> {
        let mut tags = vec![
            tag(&["ar", "1"]),
            tag(&["d", &self.d]),
            tag(&["h", &self.h]),
            tag(&["type", &self.ty]),
        ];
        if let Some(t) = &self.title {
            tags.push(tag(&["title", t]));
        }
        tags.push(tag(&["op", &self.op]));
        if let Some(r) = &self.root {
            tags.push(tag(&["root", r]));
        }
        if let Some(p) = &self.prev {
            tags.push(tag(&["prev", p]));
        }
        tags.extend(self.extra.iter().cloned());
        tags
    }

    pub(crate) fn sign(&self, keys: &Keys) -> Event {
        keys.sign(45_010, self.tags(), &self.content, now())
    }
}

/// An authenticated user with its own WebSocket connection.
pub(crate) struct User {
    pub(crate) keys: Keys,
    pub(crate) ws: WsClient,
}

impl User {
    pub(crate) async fn new(relay: &TestRelay) -> User {
        Self::with_keys(relay, Keys::generate()).await
    }

    pub(crate) async fn with_keys(relay: &TestRelay, keys: Keys) -> User {
        let mut ws = relay.ws().await;
        assert_eq!(ws.auth(&keys).await, (true, String::new()), "AUTH");
        User { keys, ws }
    }

    pub(crate) fn pubkey(&self) -> String {
        self.keys.pubkey().to_owned()
    }

    /// Publish over WebSocket: `(accepted, message)`.
    pub(crate) async fn send(&mut self, event: &Event) -> (bool, String) {
        self.ws.publish(event).await
    }

    /// Publish and require acceptance.
    pub(crate) async fn publish(&mut self, event: Event) -> Event {
        let (ok, msg) = self.ws.publish(&event).await;
        assert!(ok, "kind {} refused: {msg}", event.kind);
        event
    }

    /// Sign and publish a draft, requiring acceptance.
    pub(crate) async fn put(&mut self, draft: &Draft) -> Event {
        let event = draft.sign(&self.keys);
        self.publish(event).await
    }

    /// Sign and publish a draft: `(accepted, message)` and the event.
    pub(crate) async fn try_put(&mut self, draft: &Draft) -> (bool, String, Event) {
        let event = draft.sign(&self.keys);
        let (ok, msg) = self.ws.publish(&event).await;
        (ok, msg, event)
    }

    /// Create a channel (open, or private = members only); returns its id.
    pub(crate) async fn create_channel(&mut self, private: bool) -> String {
        let id = uuid();
        let mut tags = vec![tag(&["h", &id]), tag(&["name", "artifacts"])];
        if private {
            tags.push(tag(&["private"]));
        }
        self.publish(self.keys.sign(9007, tags, "", now())).await;
        id
    }

    /// Add `member` to `channel` (the caller must manage it).
    pub(crate) async fn add_member(&mut self, channel: &str, member: &str) {
        let tags = vec![tag(&["h", channel]), tag(&["p", member, "member"])];
        let nonce = uuid();
        self.publish(self.keys.sign(9000, tags, &nonce, now()))
            .await;
    }

    /// Remove `member` from `channel`.
    pub(crate) async fn remove_member(&mut self, channel: &str, member: &str) {
        let tags = vec![tag(&["h", channel]), tag(&["p", member])];
        let nonce = uuid();
        self.publish(self.keys.sign(9001, tags, &nonce, now()))
            .await;
    }

    /// A kind-9 message in `channel`.
    pub(crate) async fn post(&mut self, channel: &str, content: &str) -> Event {
        let event = self
            .keys
            .sign(9, vec![tag(&["h", channel])], content, now());
        self.publish(event).await
    }

    /// POST /events signed by this user: status and body.
    pub(crate) async fn post_event(&self, relay: &TestRelay, event: &Event) -> (u16, Value) {
        let body = serde_json::to_vec(event).expect("event JSON");
        relay.http().post_signed(&self.keys, "/events", &body).await
    }

    /// POST /query signed by this user: status and body.
    pub(crate) async fn http(&self, relay: &TestRelay, filters: Vec<Value>) -> (u16, Value) {
        let body = Value::Array(filters).to_string();
        relay
            .http()
            .post_signed(&self.keys, "/query", body.as_bytes())
            .await
    }

    /// POST /query that must succeed: the events.
    pub(crate) async fn query(&self, relay: &TestRelay, filters: Vec<Value>) -> Vec<Event> {
        let (status, body) = self.http(relay, filters).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_value(body).expect("an array of events")
    }

    /// REQ over this user's WebSocket, closed after EOSE.
    pub(crate) async fn req(&mut self, filters: Vec<Value>) -> Result<Vec<Event>, String> {
        let id = sub();
        let answer = self.ws.req(&id, filters).await;
        if answer.is_ok() {
            self.ws
                .send(&json!(["CLOSE", id]))
                .await
                .expect("send CLOSE");
        }
        answer
    }

    /// The current revisions matching `predicates` (a JSON object of `#name` lists).
    pub(crate) async fn current(&self, relay: &TestRelay, predicates: Value) -> Vec<Event> {
        let mut filter = json!({"artifact": "current"});
        if let (Value::Object(f), Value::Object(p)) = (&mut filter, predicates) {
            f.extend(p);
        }
        self.query(relay, vec![filter]).await
    }

    /// The readable history of `d`.
    pub(crate) async fn history(&self, relay: &TestRelay, d: &str) -> Vec<Event> {
        self.query(relay, vec![json!({"artifact": "history", "#d": [d]})])
            .await
    }
}

pub(crate) fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

pub(crate) fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
