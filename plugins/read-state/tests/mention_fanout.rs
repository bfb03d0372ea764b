//! Mention fan-out (attack finding, item 5): one message's mentions are the first
//! `max_message_mentions` distinct p-tagged channel members in tag order (not the
//! author); only they get mention rows and follows, whatever else the message tags.
//! The message itself is stored and served as sent. On SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{tag, TestBackend};
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;

/// Read-state rows one message left: (mention rows, thread rows rooted at it).
async fn rows_of(relay: &buzz_core::testkit::TestRelay, event_id: &str) -> (i64, i64) {
    let cid = community_id(relay);
    let mentions = count(
        relay,
        &format!(
            "SELECT COUNT(*) AS v FROM read_state_mentions \
             WHERE community_id = {cid} AND event_id = '{event_id}'"
        ),
    )
    .await;
    let follows = count(
        relay,
        &format!(
            "SELECT COUNT(*) AS v FROM read_state_frontiers \
             WHERE community_id = {cid} AND root_id = '{event_id}'"
        ),
    )
    .await;
    (mentions, follows)
}

/// Who has a mention row of `event_id`.
async fn mentioned(
    relay: &buzz_core::testkit::TestRelay,
    event_id: &str,
    who: &[String],
) -> Vec<bool> {
    let cid = community_id(relay);
    let mut out = Vec::new();
    for pk in who {
        let n = count(
            relay,
            &format!(
                "SELECT COUNT(*) AS v FROM read_state_mentions WHERE community_id = {cid} \
                 AND event_id = '{event_id}' AND pubkey = '{pk}'"
            ),
        )
        .await;
        out.push(n > 0);
    }
    out
}

/// The reproduction: a top-level message with 1,999 p tags (the relay's 2,000-tag limit
/// with its `h` tag) naming 60 channel members among strangers. Before the bound it
/// wrote a mention row and a follow for every tag (~4,000 rows).
async fn a_2000_tag_message_writes_at_most_n_rows(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut mallory = User::new(&relay).await;
    let ch = alice.create_channel("general", "stream").await;
    mallory.join(&ch).await;
    let members: Vec<String> = (0..60)
        .map(|_| Keys::generate().pubkey().to_owned())
        .collect();
    for m in &members {
        alice.add_member(&ch, m).await;
    }
    let stranger = || Keys::generate().pubkey().to_owned();
    let mut p: Vec<String> = (0..30).map(|_| stranger()).collect();
    p.extend(members.iter().cloned());
    p.extend((0..1_909).map(|_| stranger()));
    assert_eq!(p.len(), 1_999);
    let strangers: Vec<String> = p.iter().filter(|x| !members.contains(x)).cloned().collect();

    let mut tags = vec![tag(&["h", &ch])];
    tags.extend(p.iter().map(|pk| tag(&["p", pk])));
    let event = mallory
        .publish(mallory.keys.sign(9, tags, "everyone!", tick()))
        .await;

    let (mention_rows, follow_rows) = rows_of(&relay, &event.id).await;
    assert!(
        mention_rows <= 50 && follow_rows <= 50,
        "at most max_message_mentions (50) mention rows and follows for one message: \
         {mention_rows} mention rows, {follow_rows} follows"
    );
    // Exactly the first 50 members in tag order; no stranger.
    assert_eq!((mention_rows, follow_rows), (50, 50));
    let got = mentioned(&relay, &event.id, &members).await;
    assert!(got[..50].iter().all(|m| *m), "first 50 members mentioned");
    assert!(
        got[50..].iter().all(|m| !*m),
        "members past the cap are not"
    );
    assert!(
        mentioned(&relay, &event.id, &strangers[..40])
            .await
            .iter()
            .all(|m| !*m),
        "non-members get no mention rows"
    );
    assert!(frontiers_of(&relay, &strangers[0]).await.threads.is_empty());
    // The message itself is stored whole.
    let got = mallory
        .ws
        .req("all", vec![json!({"ids": [event.id]})])
        .await
        .expect("REQ");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].tags.len(), 2_000);
}

/// The rule, small: first N distinct members in tag order, never the author; for a
/// reply the mention counts on the thread row and follows it; NIP-11 advertises N.
async fn first_n_distinct_members_in_tag_order(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_message_mentions": 3}), |_| {}).await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut mallory = User::new(&relay).await;
    let ch = alice.create_channel("dev", "stream").await;
    mallory.join(&ch).await;
    let mut m = Vec::new();
    for _ in 0..4 {
        let mut user = User::new(&relay).await;
        user.join(&ch).await;
        user.start(&ch).await;
        m.push(user);
    }
    let pk: Vec<String> = m.iter().map(User::pubkey).collect();
    let stranger = Keys::generate().pubkey().to_owned();
    let me = mallory.pubkey();
    let order = [
        &stranger, &pk[0], &pk[0], &me, &pk[1], &stranger, &pk[2], &pk[3],
    ];
    let ps: Vec<&str> = order.iter().map(|s| s.as_str()).collect();

    let root = mallory.post_at(&ch, tick(), &ps).await;
    assert_eq!(
        mentioned(&relay, &root.id, &pk).await,
        vec![true, true, true, false]
    );
    let reply = mallory
        .reply_full(&ch, &root, &root, tick(), &ps, false)
        .await;
    assert_eq!(
        mentioned(&relay, &reply.id, &pk).await,
        vec![true, true, true, false]
    );
    let row = m[0].row(&ch).await;
    assert_eq!(row["mentions"], 1, "the top-level mention: {row}");
    let t = thread(&row, &root).expect("the mention followed the thread");
    assert_eq!(t["mentions"], 1, "{row}");
    assert!(
        thread(&m[3].row(&ch).await, &root).is_none(),
        "past the cap"
    );

    let info = mallory.api.get_with("/info", None).await.expect("NIP-11");
    assert_eq!(
        info.body["buzz_v1"]["max_message_mentions"], 3,
        "{}",
        info.body
    );
}

both_backends!(
    a_2000_tag_message_writes_at_most_n_rows,
    first_n_distinct_members_in_tag_order,
);
