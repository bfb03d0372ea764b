//! Bad NIP-77 messages are answered — `NEG-ERR` under their id, or a `NOTICE` when there
//! is no usable id — and the connection keeps working; a `NEG-MSG` for a session that is
//! not open is `NEG-ERR`; `NEG-CLOSE` ends a session silently. With the plugin disabled,
//! core's `NEG-ERR` answers. Both backends.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::TestBackend;
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::{json, Value};

both_backends!(
    malformed_messages_get_neg_err_and_the_connection_works,
    neg_msg_needs_an_open_session,
    a_disabled_plugin_leaves_cores_neg_err,
);

fn empty_first() -> String {
    initiator(&[], 0).1
}

async fn malformed_messages_get_neg_err_and_the_connection_works(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let first = empty_first();
    let many: Vec<String> = (0..2_001).map(|i| format!("{i:064x}")).collect();
    let cases: Vec<Value> = vec![
        json!(["NEG-OPEN", "s", {"kinds": [1]}]),
        json!(["NEG-OPEN", "s", {"kinds": [1]}, first, "extra"]),
        json!(["NEG-OPEN", "s", "not a filter", first]),
        json!(["NEG-OPEN", "s", {"kinds": "one"}, first]),
        json!(["NEG-OPEN", "s", {"kinds": [1]}, "not hex"]),
        json!(["NEG-OPEN", "s", {"kinds": [1]}, ""]),
        json!(["NEG-OPEN", "s", {"ids": many}, first]),
        // Not negentropy: a version byte outside the protocol's range, a range of an
        // unknown mode, a fingerprint cut short.
        json!(["NEG-OPEN", "s", {"kinds": [1]}, "00"]),
        json!(["NEG-OPEN", "s", {"kinds": [1]}, "61010003"]),
        json!(["NEG-OPEN", "s", {"kinds": [1]}, "6100000102"]),
        json!(["NEG-MSG", "s"]),
    ];
    for case in cases {
        let answer = ask(&mut ws, "s", case.clone()).await;
        let reason = answer.expect_err(&format!("{case} refused"));
        assert!(reason.starts_with("invalid: "), "{case}: {reason}");
        still_serves(&mut ws).await;
    }
    // No usable subscription id: a NOTICE.
    for case in [json!(["NEG-OPEN", 5, {}, first]), json!(["NEG-MSG"])] {
        ws.send(&case).await.expect("send");
        let notice = ws.recv_where(|v| v[0] == "NOTICE").await.expect("NOTICE");
        assert!(
            notice[1]
                .as_str()
                .unwrap_or_default()
                .starts_with("invalid: "),
            "{case}: {notice}"
        );
        still_serves(&mut ws).await;
    }
    // A later protocol version is answered with ours (NIP-77: the client may downgrade).
    let downgrade = ask(&mut ws, "v", json!(["NEG-OPEN", "v", {"kinds": [1]}, "62"]))
        .await
        .expect("answered");
    assert_eq!(downgrade, "61");
    relay.stop().await;
}

async fn neg_msg_needs_an_open_session(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let unknown = ask(&mut ws, "nope", json!(["NEG-MSG", "nope", "61"]))
        .await
        .expect_err("never opened");
    assert!(unknown.starts_with("invalid: "), "{unknown}");

    let open = json!(["NEG-OPEN", "s", {"kinds": [1]}, empty_first()]);
    assert!(ask(&mut ws, "s", open.clone()).await.is_ok());
    assert!(ask(&mut ws, "s", json!(["NEG-MSG", "s", "61"]))
        .await
        .is_ok());
    // NEG-CLOSE is silent; the session is gone after it.
    ws.send(&json!(["NEG-CLOSE", "s"])).await.expect("send");
    let closed = ask(&mut ws, "s", json!(["NEG-MSG", "s", "61"]))
        .await
        .expect_err("closed");
    assert!(closed.starts_with("invalid: "), "{closed}");
    // A NEG-ERR ends its session too (NIP-77).
    assert!(ask(&mut ws, "s", open.clone()).await.is_ok());
    let bad = ask(&mut ws, "s", json!(["NEG-MSG", "s", "61010003"]))
        .await
        .expect_err("bad message");
    assert!(bad.starts_with("invalid: "), "{bad}");
    let after = ask(&mut ws, "s", json!(["NEG-MSG", "s", "61"]))
        .await
        .expect_err("ended by the NEG-ERR");
    assert!(after.contains("NEG-OPEN"), "{after}");
    // Another connection cannot speak to this connection's session.
    assert!(ask(
        &mut ws,
        "mine",
        json!(["NEG-OPEN", "mine", {"kinds": [1]}, empty_first()])
    )
    .await
    .is_ok());
    let mut other = authed(&relay, &alice).await;
    assert!(ask(&mut other, "mine", json!(["NEG-MSG", "mine", "61"]))
        .await
        .is_err());
    // NEG-CLOSE of an unknown id says nothing; the next answer is the REQ's.
    ws.send(&json!(["NEG-CLOSE", "never"])).await.expect("send");
    still_serves(&mut ws).await;
    relay.stop().await;
}

async fn a_disabled_plugin_leaves_cores_neg_err(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| set_enabled(s, buzz_sync::NAME, false)).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let refused = ask(
        &mut ws,
        "s",
        json!(["NEG-OPEN", "s", {"kinds": [1]}, empty_first()]),
    )
    .await
    .expect_err("disabled");
    assert!(refused.starts_with("blocked: "), "{refused}");
    assert!(refused.contains("not enabled"), "{refused}");
    still_serves(&mut ws).await;
    relay.stop().await;
}
