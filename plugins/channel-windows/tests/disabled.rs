//! A disabled plugin leaves no trace: its filters are plain NIP-01 filters and NIP-11
//! does not mention it — but its reserved kinds stay refused.

use buzz_core::both_backends;
mod common;

use buzz_channel_windows::{ChannelWindowsPlugin, NAME};
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::disabled::{assert_kinds_refused, disable};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use common::*;
use serde_json::json;

both_backends!(
    disabled_plugin_serves_plain_filters,
    enabled_plugin_is_in_nip11
);

async fn disabled_plugin_serves_plain_filters(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        disable(NAME),
        vec![PluginEntry::of::<ChannelWindowsPlugin>()],
    )
    .await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 10;
    let root = alice.post_at(&ch, "root", t).await;
    let reply = alice.post_reply(&ch, &root, t + 1).await;
    let both = ids(&[reply.clone(), root.clone()]);

    // Its overlay kinds stay reserved while it is off: enabling it later must never find
    // client forgeries stored under them.
    let kinds = [39_005, 39_006, 39_007];
    let tags = vec![tag(&["d", &ch])];
    for forged in assert_kinds_refused(&mut alice.ws, &alice.keys, &kinds, tags).await {
        assert_eq!(relay.stored_rows(&forged.id).await, 0);
    }
    let filters = [
        (
            json!({"top_level": true, "#h": [ch], "kinds": [9], "include_summaries": true,
                "include_aux": true}),
            both.clone(),
        ),
        (
            json!({"thread_window": true, "#h": [ch], "#e": [root.id], "kinds": [9]}),
            ids(std::slice::from_ref(&reply)),
        ),
        (
            json!({"#h": [ch], "#e": [root.id], "depth_limit": 100, "thread_cursor": -1}),
            ids(std::slice::from_ref(&reply)),
        ),
        (
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": [ch],
                "ids": [reply.id]}),
            vec![],
        ),
    ];
    for (filter, expected) in filters {
        for via in [Via::Http, Via::Ws] {
            let got = ask(&relay, &mut alice, via, vec![filter.clone()])
                .await
                .expect("served as a plain filter");
            assert_eq!(ids(&got), expected, "{via:?} {filter}");
        }
    }
    let info = relay.nip11().await;
    assert!(info.get(NAME).is_none(), "{info}");
    assert!(!info["plugins"]
        .as_array()
        .expect("plugins list")
        .contains(&json!(NAME)));
    relay.stop().await;
}

async fn enabled_plugin_is_in_nip11(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let info = relay.nip11().await;
    let doc = &info[NAME];
    for mode in [
        "channel_mode",
        "thread_mode",
        "legacy_thread",
        "resolve_thread_roots",
    ] {
        assert_eq!(doc[mode], json!(["http", "websocket"]), "{mode}");
    }
    assert_eq!(
        doc["limits"]["channel_limit"],
        json!({"default": 50, "min": 1, "max": 200})
    );
    assert_eq!(doc["limits"]["thread_windows_per_query"], json!(4));
    assert_eq!(doc["limits"]["thread_budgets"]["raw_rows"], json!(8192));
    assert!(info["plugins"]
        .as_array()
        .expect("plugins list")
        .contains(&json!(NAME)));
    relay.stop().await;
}
