//! The hello plugin over the real wire, one test per hook group: enabled it filters,
//! counts in its own table, claims, answers objects, mounts routes, runs a background
//! task; disabled it leaves no trace but its table and its reserved kind.

use buzz_core::config::{CommunitySettings, PluginSection, Settings};
use buzz_core::plugin::{PluginCatalog, PluginEntry};
use buzz_core::store::Store;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_example_hello::{
    HelloPlugin, MILESTONE_TAG, NAME, RESET_PATH, STATS_D_TAG, STATS_KIND, STATS_PATH,
};
use buzz_nostr::event::{verify_signature, EventLimits};
use buzz_nostr::keys::Keys;
use serde_json::{json, Map, Value};

const OTHER_HOST: &str = "other.example";

async fn start_with(test: &str, enabled: bool, extra: Value) -> (TestRelay, Keys) {
    let owner = Keys::generate();
    let owner_pk = owner.pubkey().to_owned();
    let tweak = move |s: &mut Settings| {
        let mut options = Map::new();
        options.insert("banned_words".into(), json!(["Forbidden", "scam"]));
        if let Value::Object(extra) = extra {
            options.extend(extra);
        }
        s.plugins.insert(
            NAME.into(),
            PluginSection {
                enabled: Some(enabled),
                options,
            },
        );
        s.communities[0].owners.push(owner_pk);
        s.communities.push(CommunitySettings {
            host: OTHER_HOST.into(),
            name: "Other".into(),
            owners: vec![],
            open: true,
            policies: Default::default(),
        });
    };
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        test,
        tweak,
        vec![PluginEntry::of::<HelloPlugin>()],
    )
    .await
    .expect("SQLite is always available");
    (relay, owner)
}

async fn start(test: &str, enabled: bool) -> TestRelay {
    start_with(test, enabled, json!({})).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_plugin_filters_counts_claims_and_mounts() {
    let relay = start("hello::enabled", true).await;
    let keys = Keys::generate();
    let mut ws = relay.ws().await;

    // reject_event: a banned word (any case) is refused and nothing is stored.
    let banned = keys.sign(1, vec![], "this is FORBIDDEN talk", now());
    let (ok, msg) = ws.publish(&banned).await;
    assert!(!ok && msg.starts_with("blocked:"), "{msg}");
    let got = ws
        .req("ids", vec![json!({"ids": [banned.id], "kinds": [1]})])
        .await
        .expect("REQ");
    assert!(got.is_empty(), "a refused event is not stored");

    // Ordinary events are accepted and counted once (a duplicate is not a new write).
    let note = keys.sign(1, vec![tag(&["t", "hi"])], "hello world", now());
    let other_note = keys.sign(1, vec![], "second note", now());
    let profile = keys.sign(0, vec![], r#"{"name":"hello tester"}"#, now());
    for event in [&note, &other_note, &profile] {
        assert_eq!(ws.publish(event).await, (true, String::new()));
    }
    let (ok, msg) = ws.publish(&note).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");
    let expected = json!({"0": 1, "1": 2});

    // claims_filter/answer: the extension filter is answered with one relay-signed event.
    let got = ws
        .req("stats", vec![json!({"hello_stats": true})])
        .await
        .expect("REQ stats");
    assert_eq!(got.len(), 1, "{got:?}");
    let stats = &got[0];
    assert_eq!(stats.kind, STATS_KIND);
    assert_eq!(stats.pubkey, relay.running().pubkey());
    assert_eq!(stats.tags, vec![tag(&["d", STATS_D_TAG])]);
    verify_signature(stats).expect("relay signature verifies");
    EventLimits::default()
        .check(stats, now())
        .expect("id, shape and signature are valid");
    let content: Value = serde_json::from_str(&stats.content).expect("JSON content");
    assert_eq!(content, expected);

    // Several claimed filters in one query still get one answer, next to core's events.
    let got = ws
        .req(
            "mixed",
            vec![
                json!({"hello_stats": true, "kinds": [1]}),
                json!({"hello_stats": true}),
                json!({"ids": [profile.id]}),
            ],
        )
        .await
        .expect("REQ mixed");
    let kinds: Vec<u32> = got.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![0, STATS_KIND], "core first, then the plugin");

    // routes: GET /hello/stats answers the same counts; an unknown host is a 404.
    let http = relay.http();
    assert_eq!(http.get(STATS_PATH, &[]).await, (200, expected.clone()));
    let (status, _) = http.with_host("unknown.example").get(STATS_PATH, &[]).await;
    assert_eq!(status, 404);

    // Counts are per community: the other host has seen nothing.
    let (status, body) = http.with_host(OTHER_HOST).get(STATS_PATH, &[]).await;
    assert_eq!((status, body), (200, json!({})));
    let mut other = WsClient::connect(relay.addr, OTHER_HOST)
        .await
        .expect("other community connects");
    let got = other
        .req("stats", vec![json!({"hello_stats": true})])
        .await
        .expect("REQ stats");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].content, "{}");

    // nip11: the plugin is listed and adds its field.
    let (status, doc) = http.get("/info", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(doc["hello"], json!({"banned_words": 2}));
    let plugins = doc["plugins"].as_array().expect("plugins list");
    assert!(plugins.contains(&json!(NAME)), "{doc}");

    ws.close().await;
    other.close().await;
    relay.stop().await;
}

/// on_event_committed contributes the fresh counts to live fan-out, and only within the
/// community where the event was stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_events_push_live_stats_to_subscribers() {
    let relay = start("hello::live", true).await;
    let keys = Keys::generate();
    let mut watcher = relay.ws().await;
    let stored = watcher
        .req("stats", vec![json!({"kinds": [STATS_KIND]})])
        .await
        .expect("REQ");
    assert!(stored.is_empty(), "stats events are never stored");
    let mut elsewhere = WsClient::connect(relay.addr, OTHER_HOST)
        .await
        .expect("other community connects");
    elsewhere
        .req("stats", vec![json!({"kinds": [STATS_KIND]})])
        .await
        .expect("REQ");

    let mut ws = relay.ws().await;
    let note = keys.sign(1, vec![], "live hello", now());
    assert_eq!(ws.publish(&note).await, (true, String::new()));

    let live = watcher
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("live stats event");
    assert_eq!(live[1], "stats");
    let stats: buzz_nostr::event::Event =
        serde_json::from_value(live[2].clone()).expect("an event");
    assert_eq!(stats.kind, STATS_KIND);
    assert_eq!(stats.pubkey, relay.running().pubkey());
    verify_signature(&stats).expect("relay signature verifies");
    let content: Value = serde_json::from_str(&stats.content).expect("JSON content");
    assert_eq!(content, json!({"1": 1}));

    // Both were published together; a second is ample for a wrongly routed copy.
    elsewhere.timeout = std::time::Duration::from_secs(1);
    assert!(
        elsewhere.recv_where(|v| v[0] == "EVENT").await.is_none(),
        "another community's subscriber sees nothing"
    );
    ws.close().await;
    watcher.close().await;
    elsewhere.close().await;
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_plugin_leaves_no_trace() {
    let relay = start("hello::disabled", false).await;
    let keys = Keys::generate();
    let mut ws = relay.ws().await;

    // No word filter: the "banned" word passes.
    let note = keys.sign(1, vec![], "forbidden but fine here", now());
    assert_eq!(ws.publish(&note).await, (true, String::new()));

    // The extension filter is served by core as a plain filter: ordinary events, no stats.
    let got = ws
        .req("stats", vec![json!({"kinds": [1], "hello_stats": true})])
        .await
        .expect("REQ");
    assert_eq!(got, vec![note]);
    let got = ws
        .req("all", vec![json!({"hello_stats": true})])
        .await
        .expect("REQ");
    assert!(got.iter().all(|e| e.kind != STATS_KIND), "{got:?}");

    // No route, no NIP-11 field, not listed.
    let http = relay.http();
    let (status, _) = http.get(STATS_PATH, &[]).await;
    assert_eq!(status, 404);
    let (status, doc) = http.get("/info", &[]).await;
    assert_eq!(status, 200);
    assert!(doc.get("hello").is_none(), "{doc}");
    let plugins = doc["plugins"].as_array().expect("plugins list");
    assert!(!plugins.contains(&json!(NAME)), "{doc}");

    ws.close().await;
    relay.stop().await;
}

/// on_event_stored: counts live in the plugin's table (they survive a restart), and a
/// milestone stores a relay-signed note in the same transaction, delivered live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_commit_with_their_event_and_milestones_are_relay_events() {
    let (mut relay, _) = start_with("hello::on_event_stored", true, json!({"milestone": 2})).await;
    let keys = Keys::generate();
    let mut watcher = relay.ws().await;
    watcher
        .req("notes", vec![json!({"kinds": [1], "#t": [MILESTONE_TAG]})])
        .await
        .expect("REQ");
    let mut ws = relay.ws().await;
    for text in ["one", "two", "three"] {
        let note = keys.sign(1, vec![], text, now());
        assert_eq!(ws.publish(&note).await, (true, String::new()));
    }
    // The second kind-1 event made a milestone note: stored, relay-signed, live.
    let live = watcher
        .recv_where(|v| v[0] == "EVENT" && v[1] == "notes")
        .await
        .expect("live milestone note");
    let note: buzz_nostr::event::Event = serde_json::from_value(live[2].clone()).expect("event");
    assert_eq!(note.pubkey, relay.running().pubkey());
    assert_eq!(note.content, "2 events of kind 1");
    verify_signature(&note).expect("relay signature verifies");
    let stored = ws
        .req("stored", vec![json!({"kinds": [1], "#t": [MILESTONE_TAG]})])
        .await
        .expect("REQ");
    assert_eq!(stored, vec![note]);
    ws.close().await;
    watcher.close().await;

    // The three client notes, from the table after a restart. The relay's own note was
    // stored by a hook, not ingested, so no hook saw it (and it cannot trigger itself).
    relay.restart().await;
    let (status, counts) = relay.http().get(STATS_PATH, &[]).await;
    assert_eq!((status, counts), (200, json!({"1": 3})));
    relay.stop().await;
}

/// reject_filter, the object answer, and reserved kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_are_checked_objects_are_http_only_and_the_stats_kind_is_reserved() {
    let relay = start("hello::filters", true).await;
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(
        ws.publish(&keys.sign(0, vec![], "{}", now())).await,
        (true, String::new())
    );

    let refused = ws.req("bad", vec![json!({"hello_stats": "yes"})]).await;
    assert_eq!(refused, Err("invalid: hello_stats must be true".into()));

    let http = relay.http();
    let (status, body) = http
        .post_signed(
            &keys,
            "/query",
            json!([{"hello_counts": true}]).to_string().as_bytes(),
        )
        .await;
    assert_eq!((status, body), (200, json!({"counts": {"0": 1}})));
    let refused = ws.req("object", vec![json!({"hello_counts": true})]).await;
    let text = refused.expect_err("an object answer is HTTP only");
    assert!(
        text.starts_with("invalid:") && text.contains("POST /query"),
        "{text}"
    );

    let forged = keys.sign(STATS_KIND, vec![tag(&["d", STATS_D_TAG])], "{}", now());
    let (ok, message) = ws.publish(&forged).await;
    assert!(!ok && message.starts_with("invalid:"), "{message}");
    ws.close().await;
    relay.stop().await;
}

/// routes: NIP-98 and the community come from core; the plugin decides the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_route_needs_nip98_and_an_owner() {
    let (relay, owner) = start_with("hello::reset", true, json!({})).await;
    let stranger = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(
        ws.publish(&stranger.sign(1, vec![], "hi", now())).await,
        (true, String::new())
    );
    let http = relay.http();
    let (status, body) = http.post(RESET_PATH, b"", None).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("auth-required:")),
        "{body}"
    );
    let (status, body) = http.post_signed(&stranger, RESET_PATH, b"").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(http.get(STATS_PATH, &[]).await, (200, json!({"1": 1})));

    let (status, body) = http.post_signed(&owner, RESET_PATH, b"").await;
    assert_eq!((status, body), (200, json!({"reset": true})));
    assert_eq!(http.get(STATS_PATH, &[]).await, (200, json!({})));
    let (status, _) = http
        .with_host("unknown.example")
        .post_signed(&owner, RESET_PATH, b"")
        .await;
    assert_eq!(status, 404);
    ws.close().await;
    relay.stop().await;
}

/// background: the heartbeat publishes stats with no write to trigger it, and stops
/// with the relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_publishes_stats_in_the_background() {
    let (relay, _) = start_with("hello::heartbeat", true, json!({"heartbeat_ms": 100})).await;
    let mut watcher = relay.ws().await;
    watcher
        .req("beat", vec![json!({"kinds": [STATS_KIND]})])
        .await
        .expect("REQ");
    let live = watcher
        .recv_where(|v| v[0] == "EVENT" && v[1] == "beat")
        .await
        .expect("a heartbeat arrives without any write");
    assert_eq!(live[2]["content"], "{}");
    watcher.close().await;
    relay.stop().await;
}

/// Tables are the plugin's own, applied whether or not it is enabled, and shown with
/// their owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_applied_when_disabled_and_owned_by_the_plugin() {
    let relay = start("hello::migrations", false).await;
    let url = relay.settings.storage.database_url.clone();
    let catalog = PluginCatalog::new().with(PluginEntry::of::<HelloPlugin>());
    let status = tokio::task::spawn_blocking(move || {
        Store::migrations(&url, &catalog.migration_sets())
            .expect("open")
            .status()
            .expect("status")
    })
    .await
    .expect("join");
    assert!(status.pending.is_empty(), "{status:?}");
    assert!(status.applied.iter().any(|m| m.owner == NAME), "{status:?}");
    assert!(
        status.applied.iter().any(|m| m.owner == "core"),
        "{status:?}"
    );
    relay.stop().await;
}
