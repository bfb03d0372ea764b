//! The hello plugin over the real wire: enabled it filters, counts, claims and mounts;
//! disabled it leaves no trace (DESIGN.md: a disabled plugin is as if absent).

use buzz_core::config::{CommunitySettings, PluginSection, Settings};
use buzz_core::event::{verify_signature, EventLimits};
use buzz_core::keys::Keys;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_example_hello::{factory, NAME, STATS_D_TAG, STATS_KIND, STATS_PATH};
use serde_json::{json, Map, Value};

const OTHER_HOST: &str = "other.example";

async fn start(test: &str, enabled: bool) -> TestRelay {
    let tweak = move |s: &mut Settings| {
        let mut options = Map::new();
        options.insert("banned_words".into(), json!(["Forbidden", "scam"]));
        s.plugins
            .insert(NAME.into(), PluginSection { enabled, options });
        s.communities.push(CommunitySettings {
            host: OTHER_HOST.into(),
            name: "Other".into(),
            owners: vec![],
            open: true,
        });
    };
    TestRelay::start_with(TestBackend::Sqlite, test, tweak, vec![(NAME, factory())])
        .await
        .expect("SQLite is always available")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_plugin_filters_counts_claims_and_mounts() {
    let relay = start("hello::enabled", true).await;
    let keys = Keys::generate();
    let mut ws = relay.ws().await;

    // check_event: a banned word (any case) is refused and nothing is stored.
    let banned = keys.sign(1, vec![], "this is FORBIDDEN talk", now());
    let (ok, msg) = ws.publish(&banned).await;
    assert!(!ok && msg.starts_with("blocked:"), "{msg}");
    let got = ws
        .req("ids", vec![json!({"ids": [banned.id]})])
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

/// after_commit contributes the fresh counts to live fan-out, and only within the
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
    let stats: buzz_core::event::Event = serde_json::from_value(live[2].clone()).expect("an event");
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
