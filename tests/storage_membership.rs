//! `export | import` keeps every channel's events as they were: the relay's membership
//! records (the 9000 after a join, the 9001 after a leave) are imported from the file and
//! not derived a second time; group state (39000–39002) is skipped and derived anew, to
//! the same members. The real binary, both backends.

mod storage_common;

use buzz_core::both_backends;
use buzz_core::testkit::{authed, now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use buzz_nostr::kinds::GROUP_STATE;
use serde_json::json;
use storage_common::{config, run, Db};

both_backends!(an_export_imports_with_the_same_event_ids);

async fn relay_on(backend: TestBackend, test: &str, url: &str, key: &Keys) -> TestRelay {
    let (url, secret) = (url.to_owned(), key.secret_hex());
    TestRelay::start_with(
        backend,
        test,
        move |s| {
            s.storage.database_url = url;
            s.relay.private_key = secret;
        },
        Vec::new(),
    )
    .await
    .expect("relay")
}

/// What `ws` reads of `channel`: event ids (group state aside), sorted, and the members
/// the relay's 39002 lists.
async fn channel_answer(ws: &mut WsClient, channel: &str) -> (Vec<String>, Vec<String>) {
    let sub = uuid::Uuid::new_v4().simple().to_string();
    let events = ws
        .req(&sub, vec![json!({"#h": [channel]})])
        .await
        .expect("REQ");
    let mut ids: Vec<String> = events
        .iter()
        .filter(|e| !GROUP_STATE.contains(&e.kind))
        .map(|e| e.id.clone())
        .collect();
    ids.sort();
    let sub = uuid::Uuid::new_v4().simple().to_string();
    let docs = ws
        .req(&sub, vec![json!({"kinds": [39002], "#d": [channel]})])
        .await
        .expect("REQ");
    assert_eq!(docs.len(), 1, "one current 39002");
    let mut members: Vec<String> = docs[0].tag_values("p").map(str::to_owned).collect();
    members.sort();
    (ids, members)
}

async fn an_export_imports_with_the_same_event_ids(backend: TestBackend, test: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = Db::new(backend, dir.path(), "first", test) else {
        return;
    };
    let Some(second) = Db::new(backend, dir.path(), "second", test) else {
        return;
    };
    let (first_key, second_key) = (Keys::generate(), Keys::generate());
    let (alice, bob, carol) = (Keys::generate(), Keys::generate(), Keys::generate());
    let (open, private) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );

    // Live traffic: joins and a leave (each followed by the relay's record), an owner's
    // own 9000, messages.
    let relay = relay_on(backend, test, &db.url, &first_key).await;
    let mut ws = [
        authed(&relay, &alice).await,
        authed(&relay, &bob).await,
        authed(&relay, &carol).await,
    ];
    let (a, b, c) = (0, 1, 2);
    let t = now();
    for (who, event) in [
        (a, alice.sign(9007, vec![tag(&["h", &open])], "", t)),
        (
            a,
            alice.sign(9007, vec![tag(&["h", &private]), tag(&["private"])], "", t),
        ),
        (b, bob.sign(9021, vec![tag(&["h", &open])], "", t)),
        (b, bob.sign(9, vec![tag(&["h", &open])], "hi", t)),
        (c, carol.sign(9021, vec![tag(&["h", &open])], "", t)),
        (b, bob.sign(9022, vec![tag(&["h", &open])], "", t + 1)),
        (
            a,
            alice.sign(
                9000,
                vec![tag(&["h", &private]), tag(&["p", bob.pubkey(), "admin"])],
                "",
                t,
            ),
        ),
        (b, bob.sign(9, vec![tag(&["h", &private])], "psst", t)),
    ] {
        let (ok, msg) = ws[who].publish(&event).await;
        assert!(ok, "kind {}: {msg}", event.kind);
    }
    let a = &mut ws[a];
    let before = [
        channel_answer(a, &open).await,
        channel_answer(a, &private).await,
    ];
    let records = before[0]
        .0
        .len()
        .checked_sub(5)
        .expect("create, 2 joins, a leave, a message and their records");
    assert_eq!(records, 3, "{:?}", before[0]);
    relay.stop().await;

    let cfg = config(dir.path(), "first", &db.url, &first_key.secret_hex());
    let (ok, out, err) = run(&cfg, &["export"]);
    assert!(ok, "{err}");
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, out).expect("write export");
    let second_cfg = config(dir.path(), "second", &second.url, &second_key.secret_hex());
    let (ok, _, err) = run(
        &second_cfg,
        &[
            "import",
            "--community",
            "localhost",
            file.to_str().expect("path"),
        ],
    );
    assert!(ok && err.contains("0 invalid"), "{err}");

    let relay = relay_on(backend, test, &second.url, &second_key).await;
    let mut a = authed(&relay, &alice).await;
    let after = [
        channel_answer(&mut a, &open).await,
        channel_answer(&mut a, &private).await,
    ];
    assert_eq!(after, before, "every channel answers the same event ids");
    relay.stop().await;
}
