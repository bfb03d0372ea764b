//! NIP-45 `COUNT` over the same access scope as `REQ`, and NIP-77 `NEG-OPEN` answered at
//! once with `NEG-ERR` while no plugin serves sync. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{authed, create_channel, publish_kind, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

both_backends!(
    counts_what_req_returns,
    private_counts_are_never_revealed,
    anonymous_channel_counts_are_auth_required,
    bad_counts_are_refused_with_closed,
    neg_open_is_answered_neg_err_at_once,
);

fn count_of(answer: Value) -> u64 {
    answer["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count in {answer}"))
}

async fn counts_what_req_returns(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let notes = [
        publish_kind(&mut ws, &alice, 1, vec![]).await,
        publish_kind(&mut ws, &alice, 1, vec![]).await,
        publish_kind(&mut ws, &alice, 1, vec![]).await,
    ];
    let ch = create_channel(&mut ws, &alice, false).await;
    for _ in 0..2 {
        publish_kind(&mut ws, &alice, 9, vec![tag(&["h", &ch])]).await;
    }
    let mine = json!({"kinds": [1], "authors": [alice.pubkey()]});
    assert_eq!(
        count_of(ws.count("c1", vec![mine.clone()]).await.expect("COUNT")),
        3
    );
    // Several filters are OR'd: an event matched twice counts once.
    let overlapping = vec![
        json!({"ids": [notes[0].id, notes[1].id]}),
        json!({"ids": [notes[1].id, notes[2].id]}),
    ];
    assert_eq!(
        count_of(ws.count("c2", overlapping.clone()).await.expect("COUNT")),
        3
    );
    assert_eq!(ws.req("r2", overlapping).await.expect("REQ").len(), 3);
    // `limit` bounds what REQ returns, not what COUNT counts.
    let limited = json!({"kinds": [1], "authors": [alice.pubkey()], "limit": 1});
    assert_eq!(
        count_of(ws.count("c3", vec![limited]).await.expect("COUNT")),
        3
    );
    // Channel messages, as the member sees them.
    let channel = json!({"kinds": [9], "#h": [ch]});
    assert_eq!(
        count_of(ws.count("c4", vec![channel]).await.expect("COUNT")),
        2
    );
    // A deleted note no longer counts.
    publish_kind(&mut ws, &alice, 5, vec![tag(&["e", &notes[0].id])]).await;
    assert_eq!(
        count_of(ws.count("c5", vec![mine]).await.expect("COUNT")),
        2
    );
    relay.stop().await;
}

async fn private_counts_are_never_revealed(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut owner = authed(&relay, &alice).await;
    let private = create_channel(&mut owner, &alice, true).await;
    for _ in 0..3 {
        publish_kind(&mut owner, &alice, 9, vec![tag(&["h", &private])]).await;
    }
    let random = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        count_of(
            owner
                .count("own", vec![json!({"#h": [private]})])
                .await
                .expect("COUNT")
        ),
        // The 9007 and the three messages.
        4
    );
    // A non-member: the private channel counts like a channel that does not exist.
    let mut bob = authed(&relay, &Keys::generate()).await;
    for filter in [
        json!({"#h": [private]}),
        json!({"kinds": [9]}),
        json!({"kinds": [39000, 39001, 39002], "#d": [private]}),
    ] {
        let got = bob.count("b", vec![filter.clone()]).await.expect("COUNT");
        assert_eq!(got, json!({"count": 0}), "{filter}");
    }
    let missing = bob
        .count("m", vec![json!({"#h": [random]})])
        .await
        .expect("COUNT");
    assert_eq!(missing, json!({"count": 0}));
    relay.stop().await;
}

async fn anonymous_channel_counts_are_auth_required(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let note = publish_kind(&mut writer, &alice, 1, vec![]).await;
    let ch = create_channel(&mut writer, &alice, false).await;
    let message = publish_kind(&mut writer, &alice, 9, vec![tag(&["h", &ch])]).await;
    let mut anon = relay.ws().await;
    for filter in [
        json!({"kinds": [9]}),
        json!({"#h": [ch]}),
        json!({"kinds": [39000]}),
        // A REQ of public and channel kinds before AUTH gets the public events, then
        // CLOSED; a count cannot be a part and a CLOSED at once, so it is refused whole.
        json!({"kinds": [1, 9]}),
        // An ids lookup is judged by what the ids are (a stored row check, run with the
        // count): one channel message among them is enough.
        json!({"ids": [note.id, message.id]}),
    ] {
        let text = anon
            .count("a", vec![filter.clone()])
            .await
            .expect_err("refused");
        assert!(text.starts_with("auth-required: "), "{filter}: {text}");
    }
    // Public data is counted anonymously.
    let public = anon
        .count(
            "p",
            vec![json!({"kinds": [1], "authors": [alice.pubkey()]})],
        )
        .await
        .expect("COUNT");
    assert_eq!(public, json!({"count": 1}));
    let by_id = anon
        .count("i", vec![json!({"ids": [note.id]})])
        .await
        .expect("COUNT of a public note by id");
    assert_eq!(by_id, json!({"count": 1}));
    // After AUTH the refused count is answered.
    assert_eq!(anon.auth(&Keys::generate()).await, (true, String::new()));
    let after = anon
        .count("a", vec![json!({"kinds": [9007], "#h": [ch]})])
        .await
        .expect("COUNT after AUTH");
    assert_eq!(after, json!({"count": 1}));
    relay.stop().await;
}

async fn bad_counts_are_refused_with_closed(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut ws = authed(&relay, &Keys::generate()).await;
    let text = ws.count("x", vec![]).await.expect_err("no filter");
    assert!(text.starts_with("invalid: "), "{text}");
    let text = ws
        .count("y", vec![json!({"kinds": "1"})])
        .await
        .expect_err("bad filter");
    assert!(text.starts_with("invalid: "), "{text}");
    relay.stop().await;
}

async fn neg_open_is_answered_neg_err_at_once(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    for authenticated in [false, true] {
        let mut ws = relay.ws().await;
        if authenticated {
            assert_eq!(ws.auth(&Keys::generate()).await, (true, String::new()));
        }
        ws.timeout = Duration::from_secs(2);
        let started = Instant::now();
        ws.send(&json!(["NEG-OPEN", "neg1", {"kinds": [1]}, "6100000200"]))
            .await
            .expect("send NEG-OPEN");
        let answer = ws
            .recv_where(|v| v[1] == "neg1" || v[0] == "NOTICE")
            .await
            .expect("an answer to NEG-OPEN");
        assert_eq!(answer[0], "NEG-ERR", "{answer}");
        let reason = answer[2].as_str().unwrap_or_default();
        assert!(reason.starts_with("blocked: "), "{reason}");
        assert!(started.elapsed() < Duration::from_secs(2));
        // A NEG-MSG for that id is an error too, never silence; NEG-CLOSE is quiet.
        ws.send(&json!(["NEG-MSG", "neg1", "61"]))
            .await
            .expect("send");
        let answer = ws
            .recv_where(|v| v[1] == "neg1" || v[0] == "NOTICE")
            .await
            .expect("an answer to NEG-MSG");
        assert_eq!(answer[0], "NEG-ERR", "{answer}");
        ws.send(&json!(["NEG-CLOSE", "neg1"])).await.expect("send");
        // The connection still serves: a REQ after them is answered.
        ws.req("after", vec![json!({"kinds": [1]})])
            .await
            .expect("REQ after NEG-*");
        assert!(
            ws.recv_where(|v| v[0] == "NOTICE").await.is_none(),
            "no NOTICE for NEG-CLOSE"
        );
    }
    relay.stop().await;
}
