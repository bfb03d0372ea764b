//! Helpers shared by the window suites: a relay with the plugin, authenticated users that
//! publish over WebSocket, and queries over both transports. Everything speaks the wire;
//! the only exceptions are named (`corrupt_tags`, `TestRelay::insert_legacy`).

#![allow(dead_code)] // each suite uses its own subset

use buzz_channel_windows::{ChannelWindowsPlugin, NAME};
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::{verify_signature, Event};
use serde_json::{json, Value};

/// A relay with `channel_windows` enabled (its default).
pub(crate) async fn relay(backend: TestBackend, name: &str) -> Option<TestRelay> {
    relay_with(
        backend,
        name,
        PluginEntry::of::<ChannelWindowsPlugin>(),
        json!({}),
    )
    .await
}

/// A relay with `plugin` registered as `channel_windows` and these section options
/// (e.g. small budgets).
pub(crate) async fn relay_with(
    backend: TestBackend,
    name: &str,
    plugin: PluginEntry,
    options: Value,
) -> Option<TestRelay> {
    let tweak = move |s: &mut Settings| {
        if let (Some(section), Value::Object(options)) = (s.plugins.get_mut(NAME), options) {
            section.options.extend(options);
        }
    };
    TestRelay::start_with(backend, name, tweak, vec![plugin]).await
}

/// A fresh subscription id, so earlier subscriptions' live events never mix in.
#[allow(unused_imports)] // each suite uses its own subset
pub(crate) use buzz_core::testkit::fresh_sub as sub;

/// An authenticated user: the testkit's [`Member`], with [`Windows`]' moves.
pub(crate) use buzz_core::testkit::Member as User;

/// What the window suites do beyond a plain member: timed thread events, pipelined.
pub(crate) trait Windows {
    /// Publish many events pipelined (they share commits), requiring every acceptance.
    async fn publish_all(&mut self, events: &[Event]);
    /// A top-level message (not published).
    fn message(&self, channel: &str, content: &str, at: i64) -> Event;
    /// A reply to `parent` (not published); `root` adds the NIP-10 root marker.
    fn reply_event(
        &self,
        channel: &str,
        parent: &Event,
        root: Option<&Event>,
        content: &str,
        at: i64,
        broadcast: bool,
    ) -> Event;
    async fn post_reply(&mut self, channel: &str, parent: &Event, at: i64) -> Event;
    /// A reaction to `target` in `channel`.
    async fn react(&mut self, channel: &str, target: &Event, at: i64) -> Event;
    /// NIP-09 deletion of `target` (kind 5, scoped to `channel`).
    async fn delete(&mut self, channel: &str, target: &Event, at: i64) -> Event;
}

impl Windows for User {
    async fn publish_all(&mut self, events: &[Event]) {
        for batch in events.chunks(200) {
            for event in batch {
                self.ws
                    .send(&json!(["EVENT", event]))
                    .await
                    .expect("send EVENT");
            }
            for event in batch {
                let (ok, msg) = self.ws.wait_ok(&event.id).await;
                assert!(ok, "kind {} refused: {msg}", event.kind);
            }
        }
    }

    fn message(&self, channel: &str, content: &str, at: i64) -> Event {
        self.sign_at(9, vec![tag(&["h", channel])], content, at)
    }

    fn reply_event(
        &self,
        channel: &str,
        parent: &Event,
        root: Option<&Event>,
        content: &str,
        at: i64,
        broadcast: bool,
    ) -> Event {
        let mut tags = vec![tag(&["h", channel])];
        if let Some(root) = root {
            tags.push(tag(&["e", &root.id, "", "root"]));
        }
        tags.push(tag(&["e", &parent.id, "", "reply"]));
        if broadcast {
            tags.push(tag(&["broadcast", "1"]));
        }
        self.sign_at(9, tags, content, at)
    }

    async fn post_reply(&mut self, channel: &str, parent: &Event, at: i64) -> Event {
        self.reply_at(channel, parent, "re", at).await
    }

    async fn react(&mut self, channel: &str, target: &Event, at: i64) -> Event {
        let tags = vec![tag(&["h", channel]), tag(&["e", &target.id])];
        self.publish(self.sign_at(7, tags, "+", at)).await
    }

    async fn delete(&mut self, channel: &str, target: &Event, at: i64) -> Event {
        let tags = vec![tag(&["h", channel]), tag(&["e", &target.id])];
        self.publish(self.sign_at(5, tags, "", at)).await
    }
}

/// Which wire surface a helper uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Http,
    Ws,
}

/// Run one query over `via`; `Err` carries the HTTP status and error text, or the
/// CLOSED message (status 0).
pub(crate) async fn ask(
    relay: &TestRelay,
    user: &mut User,
    via: Via,
    filters: Vec<Value>,
) -> Result<Vec<Event>, (u16, String)> {
    match via {
        Via::Http => {
            let (status, body) = user.http(relay, filters).await;
            if status == 200 {
                Ok(serde_json::from_value(body).expect("an array of events"))
            } else {
                Err((status, body["error"].as_str().unwrap_or("").to_owned()))
            }
        }
        Via::Ws => user.req(filters).await.map_err(|msg| (0, msg)),
    }
}

pub(crate) fn of_kind(events: &[Event], kind: u32) -> Vec<Event> {
    events.iter().filter(|e| e.kind == kind).cloned().collect()
}

pub(crate) fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

/// `created_at DESC, id ASC` — the window order.
pub(crate) fn newest_first(events: &mut [Event]) {
    events.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// `created_at ASC, id ASC` — the legacy thread order.
pub(crate) fn oldest_first(events: &mut [Event]) {
    events.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// Check a relay overlay: signed by the relay, valid id and signature, tag names exactly
/// `names` in order (one each), JSON content.
pub(crate) fn overlay(relay: &TestRelay, event: &Event, names: &[&str]) -> Value {
    assert_eq!(
        event.pubkey,
        relay.running().pubkey(),
        "signed by the relay key"
    );
    assert_eq!(hex::encode(event.compute_id()), event.id, "valid id");
    verify_signature(event).expect("valid relay signature");
    let tag_names: Vec<&str> = event.tags.iter().map(|t| t[0].as_str()).collect();
    assert_eq!(tag_names, names, "exact tag cardinality");
    assert!(event.tags.iter().all(|t| t.len() == 2), "{:?}", event.tags);
    assert!((event.created_at - now()).abs() <= 5, "created_at = now");
    serde_json::from_str(&event.content).expect("JSON content")
}

/// The one `39006` of a channel window, checked: `(has_more, next_cursor)`.
pub(crate) fn channel_bounds(
    relay: &TestRelay,
    events: &[Event],
    channel: &str,
    request_cursor: Option<(i64, &str)>,
) -> (bool, Option<(i64, String)>) {
    let bounds = of_kind(events, 39006);
    assert_eq!(bounds.len(), 1, "exactly one 39006: {events:?}");
    let b = &bounds[0];
    let content = overlay(relay, b, &["d", "h"]);
    let suffix = match request_cursor {
        None => "head".to_owned(),
        Some((at, id)) => format!("{at}:{id}"),
    };
    assert_eq!(
        b.tags[0][1],
        format!("{channel}:{suffix}"),
        "d binds the request"
    );
    assert_eq!(b.tags[1][1], channel);
    assert_eq!(events.last(), Some(b), "bounds come last");
    cursor_content(&content)
}

/// `has_more` and `next_cursor` of a bounds content, with `null ⇔ false` checked.
pub(crate) fn cursor_content(content: &Value) -> (bool, Option<(i64, String)>) {
    let has_more = content["has_more"]
        .as_bool()
        .expect("has_more is a boolean");
    let next = &content["next_cursor"];
    let next = if next.is_null() {
        None
    } else {
        let at = next["created_at"].as_i64().expect("created_at");
        let id = next["id"].as_str().expect("id").to_owned();
        assert_eq!(id.len(), 64);
        Some((at, id))
    };
    assert_eq!(
        has_more,
        next.is_some(),
        "next_cursor = null ⇔ has_more = false"
    );
    (has_more, next)
}

/// A channel-window filter.
pub(crate) fn window(channel: &str, limit: u64, cursor: Option<&(i64, String)>) -> Value {
    let mut f = json!({"top_level": true, "#h": [channel], "kinds": [9], "limit": limit});
    if let Some((at, id)) = cursor {
        f["until"] = json!(at);
        f["before_id"] = json!(id);
    }
    f
}

/// A thread-window filter (`kinds: [9]`, default depth, no aux).
pub(crate) fn thread(
    channel: &str,
    root: &str,
    limit: u64,
    cursor: Option<&(i64, String)>,
) -> Value {
    let mut f = json!({"thread_window": true, "#h": [channel], "#e": [root], "kinds": [9],
        "limit": limit});
    if let Some((at, id)) = cursor {
        f["until"] = json!(at);
        f["before_id"] = json!(id);
    }
    f
}

/// Page a channel to exhaustion with `limit`; returns every row in order.
pub(crate) async fn page_channel(
    relay: &TestRelay,
    user: &mut User,
    via: Via,
    channel: &str,
    limit: u64,
) -> Vec<Event> {
    let mut cursor: Option<(i64, String)> = None;
    let mut rows = Vec::new();
    for _ in 0..10_000 {
        let page = ask(
            relay,
            user,
            via,
            vec![window(channel, limit, cursor.as_ref())],
        )
        .await
        .expect("window answered");
        let (has_more, next) = channel_bounds(
            relay,
            &page,
            channel,
            cursor.as_ref().map(|(a, i)| (*a, i.as_str())),
        );
        let page_rows = of_kind(&page, 9);
        assert!(page_rows.len() as u64 <= limit);
        rows.extend(page_rows);
        if !has_more {
            return rows;
        }
        cursor = next;
    }
    panic!("paging did not end");
}

/// Overwrite an event's stored tags with text that is not JSON (a row that cannot be
/// served). Direct storage access: the wire cannot produce corruption.
pub(crate) async fn corrupt_tags(relay: &TestRelay, id: &str) {
    use buzz_core::store::schema::events;
    use diesel::prelude::*;
    let id = id.to_owned();
    let changed = relay
        .running()
        .services
        .store
        .write(move |conn| {
            Ok(buzz_core::with_conn!(conn, |c| diesel::update(
                events::table.filter(events::id.eq(&id))
            )
            .set(events::tags.eq("{not json"))
            .execute(c))?)
        })
        .await
        .expect("corrupt");
    assert_eq!(changed, 1);
}
