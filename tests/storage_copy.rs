//! `buzz-relay copy --to URL`, run as the real binary in both directions: every table
//! every built part declares, checked; the copy answers like the original; a copy
//! killed half-way is never served; a non-empty destination is refused.

mod storage_common;

#[path = "../plugins/artifacts/tests/common/mod.rs"]
mod artifacts;

use artifacts::{ArtifactUser, Draft, User, TASK};
use buzz_core::both_backends;
use buzz_core::plugin::{PluginCatalog, PluginEntry};
use buzz_core::store::transfer::{copy, tables};
use buzz_core::store::{MigrationSet, Store};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_read_state_client::{follow, mark_through, Client};
use serde_json::{json, Value};
use storage_common::{command, config, other, run, Db};

/// The binary's plugins, and the example plugin a third party would add.
fn every_plugin() -> PluginCatalog {
    buzz_relay::catalog().with(PluginEntry::of::<buzz_example_hello::HelloPlugin>())
}

/// Each plugin's TABLES lists exactly the tables its migrations create (core's list
/// likewise), so `copy` walks everything: a plugin that forgets one fails here, and
/// `copy` itself refuses a database holding a table nobody declares.
#[test]
fn every_migrated_table_is_declared() {
    let dir = tempfile::tempdir().expect("tempdir");
    type Declared<'a> = (&'a str, Vec<MigrationSet>, Vec<&'a str>, Vec<&'a str>);
    let sets: Vec<Declared<'_>> = std::iter::once(("core", Vec::new(), Vec::new(), Vec::new()))
        .chain(every_plugin().entries().iter().map(|e| {
            (
                e.name,
                e.migration_set().into_iter().collect(),
                e.tables.to_vec(),
                e.derived_tables.to_vec(),
            )
        }))
        .collect();
    for (name, set, declared, derived) in sets {
        let url = format!(
            "sqlite://{}",
            dir.path().join(format!("{name}.db")).display()
        );
        Store::migrations(&url, &set)
            .expect("open")
            .run_pending()
            .expect("migrate");
        // Derived tables (an index the plugin rebuilds) are declared too, and not copied.
        let present: Vec<String> =
            Store::with_database(&url, |mut conn| tables::present(&mut conn))
                .expect("list tables")
                .into_iter()
                .filter(|t| !derived.contains(&t.as_str()))
                .collect();
        let mut expected: Vec<String> = tables::CORE_TABLES
            .iter()
            .chain(declared.iter())
            .map(|t| t.to_string())
            .collect();
        expected.sort();
        assert_eq!(
            present, expected,
            "{name}: tables its migrations create vs. declared"
        );
    }
}

/// A relay with every plugin of the binary, read state enabled, on `url` when given.
async fn full_relay(
    backend: TestBackend,
    test: &str,
    url: Option<String>,
    key: Option<String>,
) -> Option<TestRelay> {
    TestRelay::start_with(
        backend,
        test,
        move |s| {
            if let Some(section) = s.plugins.get_mut("read_state") {
                section.enabled = Some(true);
            }
            if let Some(url) = url {
                s.storage.database_url = url;
            }
            if let Some(key) = key {
                s.relay.private_key = key;
            }
        },
        buzz_relay::catalog().entries().to_vec(),
    )
    .await
}

/// Relay-signed events made per request (window summaries, bounds) carry the time of
/// the answer: compare what they say, not when they were signed.
fn stable(value: &Value, relay: &str) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|v| stable(v, relay)).collect()),
        Value::Object(map) if map.get("pubkey").and_then(Value::as_str) == Some(relay) => {
            // A thread window's 39007 `d` binds the request to the relay's authority
            // (host:port), which differs between the two relays.
            let tags: Vec<&Value> = map["tags"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter(|t| !(map["kind"] == 39007 && t[0] == "d"))
                        .collect()
                })
                .unwrap_or_default();
            json!({"kind": map["kind"], "tags": tags, "content": map["content"]})
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), stable(v, relay)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What the world built by [`build`] looks like.
struct World {
    alice: Keys,
    bob: Keys,
    channel: String,
    root: Event,
    tasks: Vec<String>,
    token: String,
    revisions: Vec<String>,
}

fn reply(keys: &Keys, channel: &str, root: &Event, content: &str) -> Event {
    keys.sign(
        9,
        vec![
            tag(&["h", channel]),
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
        ],
        content,
        now(),
    )
}

/// Channels, a thread with a deleted reply and a mention, artifacts (updated, moved,
/// deleted), read state and a snapshot capture.
async fn build(relay: &TestRelay) -> World {
    let mut alice = User::new(relay).await;
    let mut bob = User::new(relay).await;
    let channel = alice.create_channel(false).await;
    let other = alice.create_channel(false).await;
    alice.add_member(&channel, &bob.pubkey()).await;
    let root = alice.post(&channel, "root").await;
    // Bob reads through the root and follows its thread: what comes next is unread.
    let api = Client::new(
        &format!("http://{}", relay.addr),
        &relay.host(),
        bob.keys.clone(),
    );
    let marked = api
        .intents(&[
            mark_through(&channel, None, &root.id),
            follow(&channel, &root.id),
        ])
        .await
        .expect("intents");
    assert_eq!(marked.status, 200, "{}", marked.body);
    let first = bob
        .publish(reply(&bob.keys, &channel, &root, "first"))
        .await;
    alice
        .publish(reply(&alice.keys, &channel, &root, "second"))
        .await;
    bob.publish(bob.keys.sign(
        5,
        vec![tag(&["h", &channel]), tag(&["e", &first.id])],
        "",
        now(),
    ))
    .await;
    let mention = alice.keys.sign(
        9,
        vec![tag(&["h", &channel]), tag(&["p", &bob.pubkey()])],
        "hey bob",
        now(),
    );
    alice.publish(mention).await;
    alice.post(&other, "elsewhere").await;

    let v1 = alice.put(&Draft::create(&channel, "moving task")).await;
    let v2 = alice.put(&Draft::after(&v1, "update")).await;
    let mut mv = Draft::after(&v2, "move");
    mv.h = other.clone();
    alice.put(&mv).await;
    let w1 = alice.put(&Draft::create(&channel, "doomed task")).await;
    alice.put(&Draft::after(&w1, "delete")).await;
    alice.put(&Draft::create(&channel, "kept task")).await;
    let tasks = vec![
        v1.tag_value("d").unwrap_or_default().to_owned(),
        w1.tag_value("d").unwrap_or_default().to_owned(),
    ];

    let (status, start) = bob
        .http(
            relay,
            vec![json!({"artifact": "snapshot", "action": "start",
                "query": {"artifact": "current", "#type": [TASK]}})],
        )
        .await;
    assert_eq!(status, 200, "{start}");
    let token = start["token"].as_str().expect("token").to_owned();
    let revisions = start["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["revisionId"].as_str().expect("revisionId").to_owned())
        .collect();
    World {
        alice: alice.keys.clone(),
        bob: bob.keys.clone(),
        channel,
        root,
        tasks,
        token,
        revisions,
    }
}

/// Every hidden-state answer of `world` on `relay`: channel and thread windows, artifacts
/// current and history, the read-state sidebar, the capture's bodies, the move marker.
async fn answers(relay: &TestRelay, world: &World) -> Value {
    let bob = User::with_keys(relay, world.bob.clone()).await;
    let ch = &world.channel;
    let mut out = Vec::new();
    for filter in [
        json!({"top_level": true, "#h": [ch], "kinds": [9], "limit": 50}),
        json!({"thread_window": true, "#h": [ch], "#e": [world.root.id], "kinds": [9], "limit": 50}),
        json!({"artifact": "current", "#type": [TASK]}),
        json!({"artifact": "history", "#d": world.tasks}),
        json!({"kinds": [45011, 39000, 39001, 39002]}),
        json!({"artifact": "snapshot", "action": "bodies", "token": world.token,
            "revisionIds": world.revisions}),
    ] {
        let (status, body) = bob.http(relay, vec![filter.clone()]).await;
        assert_eq!(status, 200, "{filter}: {body}");
        out.push(json!({"filter": filter, "answer": body}));
    }
    let api = Client::new(
        &format!("http://{}", relay.addr),
        &relay.host(),
        world.bob.clone(),
    );
    let sidebar = api.sidebar(20, None).await.expect("sidebar");
    assert_eq!(sidebar.status, 200, "{}", sidebar.body);
    let row = &sidebar.body["channels"][0];
    assert!(
        row["unread"] == true && row["mentions"] == 1 && row["threads"][0].is_object(),
        "read state to compare: {}",
        sidebar.body
    );
    out.push(json!({"sidebar": sidebar.body}));
    stable(&Value::Array(out), relay.running().pubkey())
}

/// Source relay → copy (real binary) → a relay on the copy with the same key answers
/// every hidden-state query the same, keeps the identity, and takes new events after
/// the copied ones; a second copy into it is refused.
async fn copy_answers_the_same(backend: TestBackend, test: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(mut source) = full_relay(backend, test, None, None).await else {
        return;
    };
    let Some(destination) = Db::new(other(backend), dir.path(), "copy", test) else {
        return;
    };
    let world = build(&source).await;
    let before = answers(&source, &world).await;
    let key = source.running().services.relay_keys.secret_hex();
    let pubkey = source.running().pubkey().to_owned();
    let source_url = source.settings.storage.database_url.clone();
    source.halt().await;

    let cfg = config(dir.path(), "source", &source_url, &key);
    let (ok, _, err) = run(&cfg, &["copy", "--to", &destination.url]);
    assert!(ok, "{err}");
    assert!(err.contains("each table checked"), "{err}");
    for table in [
        "events",
        "artifact_revisions",
        "read_state_frontiers",
        "snapshot_captures",
    ] {
        assert!(err.contains(table), "{table} listed: {err}");
    }

    let copy_cfg = config(dir.path(), "copy", &destination.url, &key);
    let (ok, out, err) = run(&copy_cfg, &["identity"]);
    assert!(ok && out.trim() == pubkey, "identity kept: {out}{err}");

    let copy = full_relay(
        other(backend),
        test,
        Some(destination.url.clone()),
        Some(key),
    )
    .await
    .expect("relay on the copy");
    let after = answers(&copy, &world).await;
    assert_eq!(before, after, "the copy answers like the original");

    // New events go after the copied ones (counters advanced past every seq).
    let mut alice = User::with_keys(&copy, world.alice.clone()).await;
    let fresh = alice.post(&world.channel, "after the copy").await;
    // Stored and served (a counter left behind would have refused the insert). Not
    // "the first row": the seeded messages may share its second, and ties order by id.
    let window = alice
        .query(
            &copy,
            vec![json!({"top_level": true, "#h": [world.channel], "kinds": [9], "limit": 50})],
        )
        .await;
    assert!(
        window.iter().any(|e| e.id == fresh.id),
        "the new row is served from the copy"
    );
    copy.stop().await;

    // An operator's mistake, said as one: which destination, which table holds how many
    // rows — not an "internal error".
    let (ok, _, err) = run(&cfg, &["copy", "--to", &destination.url]);
    assert!(
        !ok && err.contains("error: ") && err.contains("not empty"),
        "{err}"
    );
    assert!(!err.contains("internal error"), "{err}");
    assert!(
        err.contains(&destination.url),
        "names the destination: {err}"
    );
    assert!(
        err.contains("table communities holds ") && err.contains(" row"),
        "names the table and its rows: {err}"
    );
}

/// A file of `n` signed notes with `tags` tags each.
fn notes(n: usize, tags: usize) -> String {
    let keys = Keys::generate();
    let t = now() - 86_400;
    (0..n)
        .map(|i| {
            let tags = (0..tags)
                .map(|j| tag(&["t", &format!("topic{j}")]))
                .collect();
            keys.sign(1, tags, &format!("note {i}"), t + i as i64)
                .to_json()
                + "\n"
        })
        .collect()
}

/// Is a copy visibly under way in `url`: its marker there and rows committed?
fn copy_in_flight(url: &str) -> bool {
    Store::with_database(url, |mut conn| {
        let marker = copy::unfinished(&mut conn)?.is_some();
        Ok(marker && tables::row_count(&mut conn, "event_tags")? > 0)
    })
    .unwrap_or(false)
}

/// kill -9 in the middle of a copy: a relay refuses to open the destination, and a
/// rerun refuses it too (it is neither empty nor complete).
async fn a_killed_copy_is_never_served(backend: TestBackend, test: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (Some(source), Some(destination)) = (
        Db::new(backend, dir.path(), "source", test),
        Db::new(other(backend), dir.path(), "destination", test),
    ) else {
        return;
    };
    let key = Keys::generate().secret_hex();
    let cfg = config(dir.path(), "source", &source.url, &key);
    let file = dir.path().join("notes.jsonl");
    std::fs::write(&file, notes(4_000, 30)).expect("write");
    let (ok, _, err) = run(&cfg, &["import", file.to_str().expect("path")]);
    assert!(ok && err.contains("imported 4000 events"), "{err}");

    let mut child = command(&cfg, &["copy", "--to", &destination.url])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("copy starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !copy_in_flight(&destination.url) {
        assert!(
            child.try_wait().expect("poll copy").is_none(),
            "the copy ended before it could be interrupted: give it more rows"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");

    // A relay refuses the half-copied database…
    let copy_cfg = config(dir.path(), "copy", &destination.url, &key);
    let mut relay = command(&copy_cfg, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("relay starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = relay.try_wait().expect("poll relay") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = relay.kill();
            panic!("a relay started serving a half-copied database");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut pipe) = relay.stderr.take() {
        use std::io::Read;
        pipe.read_to_string(&mut err).expect("stderr");
    }
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("error: ") && err.contains("did not finish"),
        "{err}"
    );
    // …and so does a second copy into it.
    let (ok, _, err) = run(&cfg, &["copy", "--to", &destination.url]);
    assert!(!ok && err.contains("did not finish"), "{err}");
    // Into an empty database it completes, every row checked.
    let Some(fresh) = Db::new(other(backend), dir.path(), "fresh", test) else {
        return;
    };
    let (ok, _, err) = run(&cfg, &["copy", "--to", &fresh.url]);
    assert!(ok && err.contains("each table checked"), "{err}");
    let count = |url: &str| {
        Store::with_database(url, |mut conn| tables::row_count(&mut conn, "event_tags"))
            .expect("count")
    };
    assert_eq!(count(&fresh.url), count(&source.url));
}

both_backends!(copy_answers_the_same, a_killed_copy_is_never_served);
