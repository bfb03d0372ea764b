//! Helpers of the snapshot suites: a relay with the artifacts and snapshot plugins
//! (SQLite with the embedded capture store; PostgreSQL with Redis captures), and a
//! client for the four actions. Users and revision drafts are the artifact suites' own.

#![allow(dead_code)] // each suite uses its own subset

#[path = "../../../artifacts/tests/common/mod.rs"]
mod artifacts;

#[allow(unused_imports)] // not every suite needs each
pub(crate) use artifacts::{uuid, ArtifactUser, Draft, User, TASK};

use buzz_artifacts::ArtifactsPlugin;
use buzz_core::config::{CommunitySettings, Settings};
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, redis_url, tag, TestBackend, TestRelay};
use buzz_nostr::event::{verify_signature, Event};
use buzz_nostr::keys::Keys;
use buzz_snapshot::{SnapshotPlugin, NAME};
use serde_json::{json, Value};

/// A relay with both plugins and these `[plugins.snapshot]` options. On PostgreSQL the
/// captures live in Redis (a key prefix of the test's own).
pub(crate) async fn relay_with(
    backend: TestBackend,
    name: &str,
    options: Value,
) -> Option<TestRelay> {
    relay_tuned(backend, name, options, |_| {}).await
}

/// [`relay_with`], and core settings changed by `core` (say, more communities).
pub(crate) async fn relay_tuned(
    backend: TestBackend,
    name: &str,
    options: Value,
    core: impl FnOnce(&mut Settings),
) -> Option<TestRelay> {
    let redis = match backend {
        TestBackend::Postgres => Some(redis_url(name)?),
        TestBackend::Sqlite => None,
    };
    let tweak = move |s: &mut Settings| {
        core(s);
        with_options(s, options);
        if let Some(url) = redis {
            s.storage.redis_url = url;
            s.storage.redis_prefix = format!("buzz-test-{}", uuid::Uuid::new_v4().simple());
        }
    };
    TestRelay::start_with(
        backend,
        name,
        tweak,
        vec![
            PluginEntry::of::<SnapshotPlugin>(),
            PluginEntry::of::<ArtifactsPlugin>(),
        ],
    )
    .await
}

pub(crate) async fn relay(backend: TestBackend, name: &str) -> Option<TestRelay> {
    relay_with(backend, name, json!({})).await
}

/// Merge these `[plugins.snapshot]` options into `settings`.
pub(crate) fn with_options(settings: &mut Settings, options: Value) {
    if let (Some(section), Value::Object(options)) = (settings.plugins.get_mut(NAME), options) {
        section.options.extend(options);
    }
}

/// Host of an open community [`add_communities`] configures beside the default one.
pub(crate) const OTHER: &str = "other.test";
/// Host of a members-only community [`add_communities`] configures.
pub(crate) const CLOSED: &str = "closed.test";

/// Two more communities beside the default (`localhost`, open): [`OTHER`] (open) and
/// [`CLOSED`] (members only, owned by `closed_owner`, who admits members with 9040).
pub(crate) fn add_communities(settings: &mut Settings, closed_owner: &str) {
    for (host, open, owners) in [
        (OTHER, true, Vec::new()),
        (CLOSED, false, vec![closed_owner.to_owned()]),
    ] {
        settings.communities.push(CommunitySettings {
            host: host.into(),
            name: host.into(),
            owners,
            open,
            policies: Default::default(),
        });
    }
}

/// `host` with the relay's port: the `Host` header of a community.
pub(crate) fn host_of(relay: &TestRelay, host: &str) -> String {
    format!("{host}:{}", relay.addr.port())
}

/// `POST /query` with one snapshot filter, signed by `keys`, in the community at `host`.
pub(crate) async fn ask_at(
    relay: &TestRelay,
    host: &str,
    keys: &Keys,
    filter: Value,
) -> (u16, Value) {
    let body = json!([filter]).to_string();
    relay
        .http()
        .with_host(&host_of(relay, host))
        .post_signed(keys, "/query", body.as_bytes())
        .await
}

/// Admit `member` to a members-only community (`owner` is one of its owners).
pub(crate) async fn admit(owner: &mut User, member: &str) {
    owner
        .publish(owner.keys.sign(9040, vec![tag(&["p", member])], "", now()))
        .await;
}

/// `POST /query` with one snapshot filter: status and body.
pub(crate) async fn ask(relay: &TestRelay, user: &User, filter: Value) -> (u16, Value) {
    user.http(relay, vec![filter]).await
}

pub(crate) fn start_filter(query: Value) -> Value {
    json!({"artifact": "snapshot", "action": "start", "query": query})
}

pub(crate) fn tasks() -> Value {
    json!({"artifact": "current", "#type": [TASK]})
}

/// Start a capture that must succeed.
pub(crate) async fn start(relay: &TestRelay, user: &User, query: Value) -> Value {
    let (status, body) = ask(relay, user, start_filter(query)).await;
    assert_eq!(status, 200, "start: {body}");
    body
}

pub(crate) async fn page(
    relay: &TestRelay,
    user: &User,
    token: &str,
    cursor: &str,
) -> (u16, Value) {
    ask(
        relay,
        user,
        json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": cursor}),
    )
    .await
}

pub(crate) async fn bodies(
    relay: &TestRelay,
    user: &User,
    token: &str,
    ids: &[String],
) -> (u16, Value) {
    ask(
        relay,
        user,
        json!({"artifact": "snapshot", "action": "bodies", "token": token, "revisionIds": ids}),
    )
    .await
}

pub(crate) async fn complete(relay: &TestRelay, user: &User, token: &str) -> (u16, Value) {
    ask(
        relay,
        user,
        json!({"artifact": "snapshot", "action": "complete", "token": token}),
    )
    .await
}

/// A spec error body: `{"error": code, "code": code}` and nothing else.
pub(crate) fn assert_code(answer: &(u16, Value), status: u16, code: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(
        answer.1,
        json!({"error": code, "code": code}),
        "status {status}"
    );
}

/// One captured entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct Entry {
    #[serde(rename = "artifactId")]
    pub(crate) artifact_id: String,
    #[serde(rename = "revisionId")]
    pub(crate) revision_id: String,
    #[serde(rename = "channelId")]
    pub(crate) channel_id: String,
}

pub(crate) fn entries(body: &Value) -> Vec<Entry> {
    serde_json::from_value(body["entries"].clone()).expect("entries")
}

/// A whole capture: start, every page; the token and all entries.
pub(crate) async fn capture(relay: &TestRelay, user: &User, query: Value) -> (String, Vec<Entry>) {
    let first = start(relay, user, query).await;
    let token = first["token"].as_str().expect("token").to_owned();
    let mut all = entries(&first);
    let mut next = first["nextToken"].clone();
    while let Some(cursor) = next.as_str() {
        let (status, body) = page(relay, user, &token, cursor).await;
        assert_eq!(status, 200, "page: {body}");
        assert_eq!(body["token"], token.as_str());
        all.extend(entries(&body));
        next = body["nextToken"].clone();
    }
    (token, all)
}

/// Bodies of `entries`, each checked against its entry (signature, artifact, channel).
pub(crate) async fn verified_bodies(
    relay: &TestRelay,
    user: &User,
    token: &str,
    entries: &[Entry],
) -> Vec<Event> {
    let mut out = Vec::new();
    for chunk in entries.chunks(100) {
        let ids: Vec<String> = chunk.iter().map(|e| e.revision_id.clone()).collect();
        let (status, body) = bodies(relay, user, token, &ids).await;
        assert_eq!(status, 200, "bodies: {body}");
        let events: Vec<Event> = serde_json::from_value(body["events"].clone()).expect("events");
        assert_eq!(events.len(), chunk.len());
        for (event, entry) in events.iter().zip(chunk) {
            assert!(verify_signature(event).is_ok(), "signature of {}", event.id);
            assert_eq!(event.id, entry.revision_id);
            assert_eq!(event.tag_value("d"), Some(entry.artifact_id.as_str()));
            assert_eq!(event.tag_value("h"), Some(entry.channel_id.as_str()));
        }
        out.extend(events);
    }
    out
}
