//! Helpers shared by the artifact suites: a relay with the plugin, authenticated users
//! that publish over WebSocket or `POST /events`, and revision builders. Everything
//! speaks the wire.

#![allow(dead_code)] // each suite uses its own subset

use buzz_artifacts::{ArtifactsPlugin, NAME};
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
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

#[allow(unused_imports)] // each suite uses its own subset
pub(crate) use buzz_core::testkit::{fresh_id as uuid, fresh_sub as sub};

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

/// An authenticated user: the testkit's [`Member`], with [`ArtifactUser`]'s moves.
pub(crate) use buzz_core::testkit::Member as User;

/// What the artifact suites do beyond a plain member: drafts and artifact queries.
pub(crate) trait ArtifactUser {
    /// Sign and publish a draft, requiring acceptance.
    async fn put(&mut self, draft: &Draft) -> Event;
    /// Sign and publish a draft: `(accepted, message)` and the event.
    async fn try_put(&mut self, draft: &Draft) -> (bool, String, Event);
    /// The current revisions matching `predicates` (a JSON object of `#name` lists).
    async fn current(&self, relay: &TestRelay, predicates: Value) -> Vec<Event>;
    /// The readable history of `d`.
    async fn history(&self, relay: &TestRelay, d: &str) -> Vec<Event>;
}

impl ArtifactUser for User {
    async fn put(&mut self, draft: &Draft) -> Event {
        let event = draft.sign(&self.keys);
        self.publish(event).await
    }

    async fn try_put(&mut self, draft: &Draft) -> (bool, String, Event) {
        let event = draft.sign(&self.keys);
        let (ok, msg) = self.ws.publish(&event).await;
        (ok, msg, event)
    }

    async fn current(&self, relay: &TestRelay, predicates: Value) -> Vec<Event> {
        let mut filter = json!({"artifact": "current"});
        if let (Value::Object(f), Value::Object(p)) = (&mut filter, predicates) {
            f.extend(p);
        }
        self.query(relay, vec![filter]).await
    }

    async fn history(&self, relay: &TestRelay, d: &str) -> Vec<Event> {
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
