//! "Current state and queries": current-state matching across readable channels (AND
//! across names, OR within one, first value only, multi-character names, access and
//! matching before pagination), the advertised and enforced limits, the budget, and
//! the refusal of plain kind-45010 filters on multi-character tags.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use buzz_nostr::event::Event;
use common::*;
use serde_json::{json, Value};

both_backends!(
    current_state_matches_across_readable_channels,
    limits_are_advertised_and_enforced,
    budget_overrun_is_503_never_partial
);

async fn current_state_matches_across_readable_channels(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let a = alice.create_channel(false).await;
    let b = bob.create_channel(false).await;
    let private = bob.create_channel(true).await;
    let me = alice.pubkey();

    // Bob's private artifact sorts first: it must not take a page slot from alice.
    let mut hidden = Draft::create(&private, "hidden")
        .with("assignee", &me)
        .with("status", "open");
    hidden.d = "00000000-0000-4000-8000-000000000001".into();
    bob.put(&hidden).await;
    let t1 = alice
        .put(
            &Draft::create(&a, "t1")
                .with("assignee", &me)
                .with("status", "open"),
        )
        .await;
    let t2 = bob
        .put(
            &Draft::create(&b, "t2")
                .with("assignee", &me)
                .with("status", "done"),
        )
        .await;
    let t4 = alice
        .put(
            &Draft::create(&a, "t4")
                .with("assignee", "other")
                .with("status", "open"),
        )
        .await;
    // The matched value is each tag's first one: "open" here is a second element.
    let mut t5 = Draft::create(&b, "t5").with("assignee", &me);
    t5.extra.push(tag(&["status", "closed", "open"]));
    let t5 = bob.put(&t5).await;
    // Deleted, and edited away from the predicate: older revisions never match.
    let t6 = alice
        .put(
            &Draft::create(&a, "t6")
                .with("assignee", &me)
                .with("status", "open"),
        )
        .await;
    alice.put(&Draft::after(&t6, "delete")).await;
    let t7 = alice
        .put(
            &Draft::create(&a, "t7")
                .with("assignee", &me)
                .with("status", "open"),
        )
        .await;
    let mut reassigned = Draft::after(&t7, "update");
    reassigned.extra = vec![tag(&["assignee", "other"]), tag(&["status", "open"])];
    let t7b = alice.put(&reassigned).await;
    // A doc of another type.
    let mut doc = Draft::create(&a, "doc")
        .with("assignee", &me)
        .with("status", "open");
    doc.ty = "buzz.doc".into();
    let doc = alice.put(&doc).await;

    let open_tasks = json!({"#type": ["buzz.task"], "#assignee": [me], "#status": ["open"]});
    assert_eq!(
        ids(&alice.current(&relay, open_tasks.clone()).await),
        vec![t1.id.clone()]
    );
    let either = json!({"#assignee": [me], "#status": ["open", "done"]});
    assert_eq!(
        sorted(ids(&alice.current(&relay, either.clone()).await)),
        sorted(vec![t1.id.clone(), t2.id.clone(), doc.id.clone()])
    );
    assert_eq!(
        sorted(ids(&alice
            .current(&relay, json!({"#assignee": ["other"]}))
            .await)),
        sorted(vec![t4.id.clone(), t7b.id.clone()])
    );
    assert_eq!(
        ids(&alice.current(&relay, json!({"#status": ["closed"]})).await),
        vec![t5.id.clone()]
    );
    // Two tags of one name, both values asked for: the artifact once.
    let pair = alice
        .put(
            &Draft::create(&a, "pair")
                .with("owner", "x")
                .with("owner", "y"),
        )
        .await;
    for (filter, expected) in [
        (json!({"#owner": ["x", "y"]}), 1),
        (json!({"#owner": ["x", "y"], "#type": ["buzz.task"]}), 1),
        (json!({"#owner": ["y"], "#title": ["pair"]}), 1),
        (json!({"#owner": ["z"]}), 0),
    ] {
        let got = alice.current(&relay, filter.clone()).await;
        assert_eq!(got.len(), expected, "{filter}");
        assert!(got.iter().all(|e| e.id == pair.id), "{filter}");
    }
    // Bob, who reads the private channel, sees his artifact there.
    assert_eq!(bob.current(&relay, open_tasks.clone()).await.len(), 2);

    // Access and matching before the page: limit 1 pages through exactly the readable
    // matches, in d order.
    let all: Vec<Event> = alice.current(&relay, either.clone()).await;
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut filter = either.clone();
        filter["artifact"] = json!("current");
        filter["limit"] = json!(1);
        if let Some(d) = &after {
            filter["after"] = json!(d);
        }
        let page = alice.query(&relay, vec![filter]).await;
        if page.is_empty() {
            break;
        }
        assert_eq!(page.len(), 1);
        after = page[0].tag_value("d").map(str::to_owned);
        paged.extend(page);
    }
    assert_eq!(ids(&paged), ids(&all));

    // The same over WebSocket REQ.
    let mut filter = open_tasks.clone();
    filter["artifact"] = json!("current");
    assert_eq!(
        ids(&alice.req(vec![filter]).await.expect("REQ")),
        vec![t1.id.clone()]
    );
    relay.stop().await;
}

async fn limits_are_advertised_and_enforced(backend: TestBackend, name: &str) {
    let options = json!({
        "max_predicates": 2, "max_values": 3, "max_page_size": 5,
        "max_tag_name_bytes": 8, "max_tag_value_bytes": 16, "max_history_rows": 2,
    });
    let Some(relay) = relay_with(backend, name, options).await else {
        return;
    };
    let (status, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    let doc = &info["artifacts"];
    assert_eq!(doc["maxPredicates"], json!(2), "{info}");
    assert_eq!(doc["maxValues"], json!(3));
    assert_eq!(doc["maxPageSize"], json!(5));
    assert_eq!(doc["maxTagNameBytes"], json!(8));
    assert_eq!(doc["maxTagValueBytes"], json!(16));
    assert_eq!(doc["maxTagBytes"], json!(65_536));
    assert_eq!(doc["maxHistoryRows"], json!(2));
    assert_eq!(doc["budgetMs"], json!(2_000));

    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let v1 = alice.put(&Draft::create(&ch, "x")).await;
    let v2 = alice.put(&Draft::after(&v1, "update")).await;
    alice.put(&Draft::after(&v2, "update")).await;
    let d = v1.tag_value("d").unwrap_or_default().to_owned();

    let current = |extra: Value| {
        let mut f = json!({"artifact": "current"});
        if let (Value::Object(f), Value::Object(e)) = (&mut f, extra) {
            f.extend(e);
        }
        f
    };
    let cases = [
        (
            current(json!({"#a": ["1"], "#b": ["1"], "#c": ["1"]})),
            "maxPredicates",
        ),
        (
            current(json!({"#a": ["1", "2"], "#b": ["1", "2"]})),
            "maxValues",
        ),
        (current(json!({"limit": 6})), "maxPageSize"),
        (current(json!({"#assignees": ["1"]})), "maxTagNameBytes"),
        (current(json!({"#a": ["x".repeat(17)]})), "maxTagValueBytes"),
        (
            current(json!({"authors": [alice.pubkey()]})),
            "do not support authors",
        ),
        (current(json!({"since": 1})), "do not support since"),
        (current(json!({"sort": "title"})), "do not support sort"),
        (current(json!({"#a": []})), "lists no values"),
        (current(json!({"after": "not-a-uuid"})), "after must be"),
        (
            json!({"artifact": "everything"}),
            "unsupported artifact query",
        ),
        (json!({"artifact": "history"}), "exactly one non-empty #d"),
        (
            json!({"artifact": "history", "#d": [d], "limit": 3}),
            "maxHistoryRows",
        ),
        (
            json!({"artifact": "history", "#d": [d], "limit": 0}),
            "at least 1",
        ),
        (
            json!({"artifact": "history", "#d": [d], "after": "not-an-id"}),
            "after must be a revision id",
        ),
        (json!({"artifact": "history", "#d": [d]}), "maxHistoryRows"),
        (
            json!({"kinds": [45010], "#assignee": ["x"]}),
            "\"artifact\":\"current\"",
        ),
    ];
    for (filter, named) in cases {
        let (status, body) = alice.http(&relay, vec![filter.clone()]).await;
        assert_eq!(status, 400, "{filter}: {body}");
        let text = body["error"].as_str().unwrap_or("");
        assert!(
            text.starts_with("invalid:") && text.contains(named),
            "{filter}: {text}"
        );
        let closed = alice.req(vec![filter.clone()]).await.expect_err("CLOSED");
        assert!(
            closed.starts_with("invalid:") && closed.contains(named),
            "{filter}: {closed}"
        );
    }
    // Plain filters on 45010 with single-letter tags, and multi-letter tags on other
    // kinds, are still served.
    assert_eq!(
        alice
            .req(vec![json!({"kinds": [45010], "#d": [d]})])
            .await
            .expect("REQ")
            .len(),
        3
    );
    alice
        .req(vec![json!({"kinds": [9], "#assignee": ["x"]})])
        .await
        .expect("REQ");
    // Unauthenticated readers get nothing but an auth-required.
    let mut anon = relay.ws().await;
    let closed = anon
        .req("anon", vec![json!({"artifact": "current"})])
        .await
        .expect_err("CLOSED");
    assert!(closed.starts_with("auth-required:"), "{closed}");
    // A plain filter on revisions is channel data too: asked before AUTH, it is
    // auth-required, never an empty answer (outside clients authenticate when asked).
    let closed = anon
        .req("anon-plain", vec![json!({"kinds": [45010], "#d": [d]})])
        .await
        .expect_err("CLOSED");
    assert!(closed.starts_with("auth-required:"), "{closed}");
    let _ = now();
    relay.stop().await;
}

async fn budget_overrun_is_503_never_partial(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"query_budget_ms": 1})).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let drafts: Vec<Event> = (0..300)
        .map(|i| {
            Draft::create(&ch, &format!("task {i}"))
                .with("assignee", "me")
                .content(&"x".repeat(2_000))
                .sign(&alice.keys)
        })
        .collect();
    for batch in drafts.chunks(100) {
        for e in batch {
            alice.ws.send(&json!(["EVENT", e])).await.expect("send");
        }
        for e in batch {
            let (ok, msg) = alice.ws.wait_ok(&e.id).await;
            assert!(ok, "{msg}");
        }
    }
    let (status, body) = alice
        .http(
            &relay,
            vec![json!({"artifact": "current", "#assignee": ["me"]})],
        )
        .await;
    assert_eq!(status, 503, "{body}");
    let text = body["error"].as_str().unwrap_or("");
    assert!(
        text.starts_with("error:") && text.contains("budgetMs"),
        "{text}"
    );
    relay.stop().await;
}
