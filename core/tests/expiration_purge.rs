//! NIP-40 purge: expired events leave the disk — their event rows, tag rows and thread
//! rows (a purged reply uncounted from its root, as a deletion does) — within the
//! configured interval, counted in `/metrics`; events that have not expired are left
//! alone. One author's unexpired expiring bytes are bounded at ingest. Both backends.

use buzz_core::both_backends;
use buzz_core::store::schema::event_tags;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use diesel::prelude::*;
use std::time::{Duration, Instant};

both_backends!(
    expired_rows_leave_the_disk,
    expiring_bytes_are_bounded_per_pubkey,
);

/// Tag index rows holding `value` (the expiration tag's: one per event that has it).
async fn tag_rows(relay: &TestRelay, value: &str) -> i64 {
    let value = value.to_owned();
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            let n: i64 = buzz_core::with_conn!(&mut conn, |c| event_tags::table
                .filter(event_tags::value.eq(&value))
                .count()
                .get_result(c))?;
            Ok(n)
        })
        .await
        .expect("count tag rows")
}

/// `buzz_expired_purged_total` as the relay serves it.
async fn purged_total(relay: &TestRelay) -> f64 {
    let text = relay.scrape().await;
    text.lines()
        .find_map(|line| line.strip_prefix("buzz_expired_purged_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no buzz_expired_purged_total in\n{text}"))
}

async fn expired_rows_leave_the_disk(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| {
            s.storage.expired_purge_interval_secs = 1;
            // Smaller than what expires: one tick must run several batches.
            s.storage.expired_purge_batch = 2;
        },
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&alice).await, (true, String::new()));
    let ch = uuid::Uuid::new_v4().to_string();
    let create = alice.sign(9007, vec![tag(&["h", &ch]), tag(&["name", "x"])], "", now());
    assert_eq!(ws.publish(&create).await, (true, String::new()));

    let soon = (now() + 2).to_string();
    let later = (now() + 3_600).to_string();
    let root = alice.sign(9, vec![tag(&["h", &ch])], "root stays", now());
    assert_eq!(ws.publish(&root).await, (true, String::new()));
    let reply = alice.sign(
        9,
        vec![
            tag(&["h", &ch]),
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
            tag(&["expiration", &soon]),
        ],
        "a fleeting reply",
        now(),
    );
    let mut fleeting = vec![reply.clone()];
    for i in 0..3 {
        fleeting.push(alice.sign(
            9,
            vec![tag(&["h", &ch]), tag(&["expiration", &soon])],
            &format!("brief {i}"),
            now(),
        ));
    }
    fleeting.push(alice.sign(1, vec![tag(&["expiration", &soon])], "brief note", now()));
    let lasting = alice.sign(
        9,
        vec![tag(&["h", &ch]), tag(&["expiration", &later])],
        "stays an hour",
        now(),
    );
    for event in fleeting.iter().chain([&lasting]) {
        assert_eq!(ws.publish(event).await, (true, String::new()));
    }
    // Stored with everything that references them, before they expire.
    let counted = relay.thread_row(&root.id).await.expect("root row");
    assert_eq!(counted.reply_count, 1);
    assert!(relay.thread_row(&reply.id).await.is_some());
    assert_eq!(tag_rows(&relay, &soon).await, 5);
    for event in &fleeting {
        assert_eq!(relay.stored_rows(&event.id).await, 1);
    }

    // Expiry in 2 s, a purge every second: gone well within 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = 0;
        for event in &fleeting {
            left += relay.stored_rows(&event.id).await;
        }
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} expired events still stored"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        tag_rows(&relay, &soon).await,
        0,
        "tag rows of purged events"
    );
    assert!(
        relay.thread_row(&reply.id).await.is_none(),
        "the reply's row"
    );
    let root_row = relay.thread_row(&root.id).await.expect("root row stays");
    assert_eq!(
        (
            root_row.reply_count,
            root_row.descendant_count,
            root_row.last_reply_at
        ),
        (0, 0, None),
        "the purged reply no longer counts"
    );
    assert_eq!(purged_total(&relay).await, 5.0);
    // What has not expired is untouched.
    for kept in [&create, &root, &lasting] {
        assert_eq!(relay.stored_rows(&kept.id).await, 1, "{}", kept.content);
    }
    assert_eq!(tag_rows(&relay, &later).await, 1);
    relay.stop().await;
}

/// `limits.max_expiring_bytes_per_pubkey`: past it an expiring event is refused
/// `rate-limited:` naming the key and stored nowhere; events without an expiration and
/// other authors are not held to it.
async fn expiring_bytes_are_bounded_per_pubkey(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| s.limits.max_expiring_bytes_per_pubkey = 3_000,
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let (alice, bob) = (Keys::generate(), Keys::generate());
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&alice).await, (true, String::new()));
    let later = (now() + 3_600).to_string();
    let bulk = "x".repeat(1_000);
    // Distinct content: two events signed in different seconds never share an id.
    let expiring = |keys: &Keys, i: i64| {
        let content = format!("{i}{bulk}");
        keys.sign(1, vec![tag(&["expiration", &later])], &content, now())
    };
    // About 1,040 bytes each: two fit in 3,000, a third does not.
    for i in 0..2 {
        assert_eq!(
            ws.publish(&expiring(&alice, i)).await,
            (true, String::new())
        );
    }
    let third = expiring(&alice, 2);
    let (accepted, message) = ws.publish(&third).await;
    assert!(!accepted, "a third expiring event was accepted");
    assert!(message.starts_with("rate-limited: "), "{message}");
    assert!(
        message.contains("limits.max_expiring_bytes_per_pubkey"),
        "{message}"
    );
    assert_eq!(relay.stored_rows(&third.id).await, 0);
    // Without an expiration: not counted.
    let lasting = alice.sign(1, vec![], &bulk, now());
    assert_eq!(ws.publish(&lasting).await, (true, String::new()));
    // Another author has a bound of their own.
    let mut other = relay.ws().await;
    assert_eq!(other.auth(&bob).await, (true, String::new()));
    assert_eq!(
        other.publish(&expiring(&bob, 0)).await,
        (true, String::new())
    );
    // Clients learn the bound from NIP-11.
    let (status, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    assert_eq!(info["limitation"]["max_expiring_bytes_per_pubkey"], 3_000);
    relay.stop().await;
}
