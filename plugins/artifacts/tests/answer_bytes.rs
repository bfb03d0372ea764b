//! The answer byte cap (`max_answer_bytes`, NIP-11 `maxAnswerBytes`): a current or
//! history answer that would take more is refused (413 / `CLOSED invalid:`) naming how
//! many revisions fit, never cut; paging with `limit` and `after` then reads everything,
//! each page within the cap, a page shorter than its `limit` only at the end. Concurrent
//! answers are whole or a 503 naming the process's answer memory, never partial.
//! Both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::config::Settings;
use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::event::Event;
use common::*;
use futures_util::future::join_all;
use serde_json::{json, Value};

both_backends!(
    over_the_cap_is_refused_never_cut_and_pages_read_everything,
    unknown_after_reads_like_an_unreadable_one,
    concurrent_answers_are_whole_or_503
);

/// Bytes one answer may take here.
const CAP: usize = 100_000;
/// Content of each large revision: 4 fit in one answer, 5 do not.
const BIG: usize = 20_000;

async fn small_relay(backend: TestBackend, name: &str, options: Value) -> Option<TestRelay> {
    let mut section = json!({"max_answer_bytes": CAP, "answer_memory_bytes": CAP});
    if let (Value::Object(s), Value::Object(o)) = (&mut section, options) {
        s.extend(o);
    }
    relay_tuned(backend, name, section, |s: &mut Settings| {
        // Every accepted revision must fit in one answer (checked at start).
        s.limits.max_message_bytes = 40_000;
        s.limits.max_content_bytes = 30_000;
    })
    .await
}

fn big_content(i: usize) -> String {
    format!("{{\"i\":{i},\"text\":\"{}\"}}", "x".repeat(BIG))
}

/// `d`'s history page by page (`limit`, then `after` the last id): every id, and the
/// byte length of each page's body.
async fn paged_history(
    relay: &TestRelay,
    user: &User,
    d: &str,
    limit: usize,
) -> (Vec<String>, Vec<usize>) {
    let mut got: Vec<String> = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let mut filter = json!({"artifact": "history", "#d": [d], "limit": limit});
        if let Some(last) = got.last() {
            filter["after"] = json!(last);
        }
        let (status, body) = user.http(relay, vec![filter]).await;
        assert_eq!(status, 200, "{body}");
        sizes.push(body.to_string().len());
        let page: Vec<Event> = serde_json::from_value(body).expect("events");
        let short = page.len() < limit;
        got.extend(ids(&page));
        if short {
            return (got, sizes);
        }
    }
}

fn refusal(status: u16, body: &Value) -> String {
    assert_eq!(status, 413, "{body}");
    body["error"].as_str().unwrap_or_default().to_owned()
}

async fn over_the_cap_is_refused_never_cut_and_pages_read_everything(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = small_relay(backend, name, json!({})).await else {
        return;
    };
    let (_, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(info["artifacts"]["maxAnswerBytes"], json!(CAP), "{info}");

    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let mut revisions = vec![
        alice
            .put(&Draft::create(&ch, "big").content(&big_content(0)))
            .await,
    ];
    for i in 1..12 {
        let prev = revisions.last().expect("one").clone();
        revisions.push(
            alice
                .put(&Draft::after(&prev, "update").content(&big_content(i)))
                .await,
        );
    }
    let d = revisions[0].tag_value("d").unwrap_or_default().to_owned();

    // The whole history (about 245 kB) is refused, naming what fits, never cut.
    let whole = json!({"artifact": "history", "#d": [d]});
    let (status, body) = alice.http(&relay, vec![whole.clone()]).await;
    let text = refusal(status, &body);
    assert!(
        text.starts_with(
            "invalid: the history of these artifacts takes more than 100000 bytes (maxAnswerBytes)"
        ) && text.contains("the first 4 revisions fit")
            && text.contains("\"limit\": 4"),
        "{text}"
    );
    let closed = alice.req(vec![whole]).await.expect_err("CLOSED");
    assert_eq!(closed, text);

    // A page asking for more than fits: refused with the number that does.
    let (status, body) = alice
        .http(
            &relay,
            vec![json!({"artifact": "history", "#d": [d], "limit": 6})],
        )
        .await;
    let text = refusal(status, &body);
    assert!(
        text.contains("the 6 revisions of this page take more than 100000 bytes")
            && text.contains("\"limit\": 4"),
        "{text}"
    );

    // Paged with that limit: every revision once, in acceptance order, each page within
    // the cap; 12 = 3 × 4, so the end is the empty fourth page.
    let (got, sizes) = paged_history(&relay, &alice, &d, 4).await;
    assert_eq!(got, ids(&revisions));
    assert_eq!(sizes.len(), 4, "{sizes:?}");
    assert!(sizes.iter().all(|s| *s <= CAP), "{sizes:?}");
    let (got, _) = paged_history(&relay, &alice, &d, 3).await;
    assert_eq!(got, ids(&revisions));

    // Two filters that each fit but not together.
    let (status, body) = alice
        .http(
            &relay,
            vec![
                json!({"artifact": "history", "#d": [d], "limit": 3}),
                json!({"artifact": "history", "#d": [d], "limit": 3}),
            ],
        )
        .await;
    let text = refusal(status, &body);
    assert!(text.contains("these 2 artifact filters"), "{text}");

    // Current state: six large artifacts; the default page (500) does not fit.
    let mut listed = Vec::new();
    for i in 0..6 {
        listed.push(
            alice
                .put(
                    &Draft::create(&ch, &format!("big {i}"))
                        .with("batch", "large")
                        .content(&big_content(i)),
                )
                .await,
        );
    }
    let (status, body) = alice
        .http(
            &relay,
            vec![json!({"artifact": "current", "#batch": ["large"]})],
        )
        .await;
    let text = refusal(status, &body);
    assert!(
        text.contains("the 6 artifacts of this page take more than 100000 bytes")
            && text.contains("\"limit\": 4"),
        "{text}"
    );
    let first = alice
        .query(
            &relay,
            vec![json!({"artifact": "current", "#batch": ["large"], "limit": 4})],
        )
        .await;
    assert_eq!(first.len(), 4);
    let last_d = first[3].tag_value("d").unwrap_or_default().to_owned();
    let rest = alice
        .query(
            &relay,
            vec![json!({"artifact": "current", "#batch": ["large"], "limit": 4, "after": last_d})],
        )
        .await;
    assert_eq!(rest.len(), 2, "a short page: the end");
    let mut all = ids(&first);
    all.extend(ids(&rest));
    assert_eq!(sorted(all), sorted(ids(&listed)));
    relay.stop().await;
}

async fn unknown_after_reads_like_an_unreadable_one(backend: TestBackend, name: &str) {
    let Some(relay) = small_relay(backend, name, json!({})).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    let secret = alice.put(&Draft::create(&private, "secret")).await;
    let open = bob.create_channel(false).await;
    let mine = bob.put(&Draft::create(&open, "mine")).await;
    let other = bob.put(&Draft::create(&open, "other")).await;
    let d = mine.tag_value("d").unwrap_or_default().to_owned();
    let ask = |after: &str| json!({"artifact": "history", "#d": [d], "limit": 2, "after": after});
    // A revision bob cannot read, one of an artifact he did not list, and a made-up id.
    let mut answers = Vec::new();
    for after in [secret.id.as_str(), other.id.as_str(), &"ab".repeat(32)] {
        answers.push(bob.http(&relay, vec![ask(after)]).await);
    }
    assert_eq!(answers[0].0, 400, "{:?}", answers[0]);
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0], answers[2]);
    assert!(!answers[0].1.to_string().contains(&secret.id));
    // His own revision continues the listing.
    let next = bob.query(&relay, vec![ask(&mine.id)]).await;
    assert!(next.is_empty());
    relay.stop().await;
}

async fn concurrent_answers_are_whole_or_503(backend: TestBackend, name: &str) {
    // Memory for one full answer only; a generous budget to wait in.
    let Some(relay) = small_relay(backend, name, json!({"query_budget_ms": 10_000})).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let mut revisions = vec![
        alice
            .put(&Draft::create(&ch, "big").content(&big_content(0)))
            .await,
    ];
    for i in 1..4 {
        let prev = revisions.last().expect("one").clone();
        revisions.push(
            alice
                .put(&Draft::after(&prev, "update").content(&big_content(i)))
                .await,
        );
    }
    let d = revisions[0].tag_value("d").unwrap_or_default().to_owned();
    let filter = json!({"artifact": "history", "#d": [d]});
    let answers = join_all((0..8).map(|_| alice.http(&relay, vec![filter.clone()]))).await;
    let mut whole = 0;
    for (status, body) in answers {
        match status {
            200 => {
                let events: Vec<Event> = serde_json::from_value(body).expect("events");
                assert_eq!(ids(&events), ids(&revisions), "never partial");
                whole += 1;
            }
            503 => {
                let text = body["error"].as_str().unwrap_or_default();
                assert!(
                    text.starts_with("error:")
                        && (text.contains("answerMemoryBytes") || text.contains("budgetMs")),
                    "{text}"
                );
            }
            // More at once than one key may have reads in flight
            // (`limits.max_reads_per_client`): refused before reading anything.
            429 => {
                let text = body["error"].as_str().unwrap_or_default();
                assert!(
                    text.starts_with("rate-limited:") && text.contains("max_reads_per_client"),
                    "{text}"
                );
            }
            other => panic!("HTTP {other}: {body}"),
        }
    }
    assert!(whole >= 1, "each answer fits the memory alone");
    // Memory comes back: a later query is answered.
    assert_eq!(alice.history(&relay, &d).await.len(), 4);
    relay.stop().await;
}
