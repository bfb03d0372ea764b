//! `buzz-relay import`, `export` and `backup`, each run as the real binary against real
//! databases of both backends.

mod storage_common;

#[path = "../plugins/artifacts/tests/common/mod.rs"]
mod artifacts;

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::kinds::GROUP_STATE;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use storage_common::{config, run, Db};

fn channel_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Events of an export, parsed (every line must be an event).
fn parse(export: &str) -> Vec<Event> {
    export
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn ids_by(events: &[Event], not_by: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.pubkey != not_by)
        .map(|e| e.id.clone())
        .collect()
}

/// A file of every kind of line an import meets: history (a month old), a bad
/// signature, a line that is not JSON, an empty line, a duplicate, relay-signed state
/// of another relay and a line as strfry / nostr-rs-relay write it (keys in their own
/// order, spaces). Every line is checked, bad ones are reported by number and leave
/// nothing; state (the channel, its group state, the thread) is derived in file order;
/// the export lists what was stored in arrival order and imports again elsewhere.
async fn import_checks_every_line_and_export_replays_it(backend: TestBackend, test: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = Db::new(backend, dir.path(), "relay", test) else {
        return;
    };
    let relay_key = Keys::generate();
    let cfg = config(dir.path(), "relay", &db.url, &relay_key.secret_hex());
    let (owner, alice) = (Keys::generate(), Keys::generate());
    let channel = channel_id();
    let t = now() - 30 * 86_400;
    let h = tag(&["h", &channel]);
    let create = owner.sign(9007, vec![h.clone(), tag(&["name", "imported"])], "", t);
    let join = alice.sign(9021, vec![h.clone()], "", t + 1);
    let root = alice.sign(9, vec![h.clone()], "root", t + 2);
    let mut forged = alice.sign(9, vec![h.clone()], "forged", t + 3);
    forged.content = "tampered".into();
    let forged_id = forged.id.clone();
    let mut bad_sig = alice.sign(9, vec![h.clone()], "bad signature", t + 3);
    let flipped = if bad_sig.sig.ends_with('0') { '1' } else { '0' };
    bad_sig.sig.pop();
    bad_sig.sig.push(flipped);
    let reply = owner.sign(
        9,
        vec![
            h.clone(),
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
        ],
        "reply",
        t + 4,
    );
    let note = alice.sign(1, vec![], "a community-wide note", t + 5);
    let other_relay_state = alice.sign(39000, vec![tag(&["d", &channel])], "", t + 6);
    let foreign = alice.sign(9, vec![h.clone()], "from strfry", t + 7);
    let strfry_line = format!(
        "{{ \"content\": {:?}, \"created_at\": {}, \"id\": \"{}\", \"kind\": 9, \"pubkey\": \"{}\", \"sig\": \"{}\", \"tags\": {} }}",
        foreign.content,
        foreign.created_at,
        foreign.id,
        foreign.pubkey,
        foreign.sig,
        serde_json::to_string(&foreign.tags).expect("tags")
    );
    let lines = [
        create.to_json(),            // 1
        join.to_json(),              // 2
        root.to_json(),              // 3
        bad_sig.to_json(),           // 4: signature
        "this is not json".into(),   // 5
        String::new(),               // 6: empty, skipped silently
        reply.to_json(),             // 7
        root.to_json(),              // 8: duplicate
        forged.to_json(),            // 9: id
        note.to_json(),              // 10
        other_relay_state.to_json(), // 11: relay-authored kind
        strfry_line,                 // 12
    ];
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("write import file");

    let file_arg = file.to_str().expect("utf-8 path");
    let (ok, _, err) = run(&cfg, &["import", file_arg]);
    assert!(ok, "{err}");
    assert!(
        err.contains("line 4: invalid: signature verification failed"),
        "{err}"
    );
    assert!(
        err.contains("line 5: invalid: not a NIP-01 event object"),
        "{err}"
    );
    assert!(
        err.contains("line 9: invalid: event id does not match its content"),
        "{err}"
    );
    assert!(
        err.contains(
            "imported 6 events into localhost: 1 duplicate, 3 invalid, 1 relay-authored skipped (11 lines"
        ),
        "{err}"
    );

    // PostgreSQL knows the rows the import wrote (`reltuples` is -1 until the first
    // ANALYZE): autovacuum may be off, and a fresh table's plans sort whole channels.
    if matches!(backend, TestBackend::Postgres) {
        use diesel::{Connection, RunQueryDsl};
        #[derive(diesel::QueryableByName)]
        struct Tuples {
            #[diesel(sql_type = diesel::sql_types::Float)]
            reltuples: f32,
        }
        let mut pg = diesel::PgConnection::establish(&db.url).expect("connect");
        let events: Vec<Tuples> =
            diesel::sql_query("SELECT reltuples FROM pg_class WHERE relname = 'events'")
                .load(&mut pg)
                .expect("pg_class");
        assert!(
            events.first().is_some_and(|t| t.reltuples >= 6.0),
            "statistics of events after the import: {:?}",
            events.first().map(|t| t.reltuples)
        );
    }

    // Arrival order is file order; the relay derived the channel's group state itself.
    let (ok, out, err) = run(&cfg, &["export"]);
    assert!(ok, "{err}");
    assert!(err.contains("exported "), "{err}");
    let exported = parse(&out);
    let expected: Vec<String> = [&create, &join, &root, &reply, &note, &foreign]
        .iter()
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(ids_by(&exported, relay_key.pubkey()), expected);
    assert!(!out.contains(&forged_id) && !out.contains(&bad_sig.id));
    assert!(
        exported.iter().any(|e| e.kind == 39000
            && e.pubkey == relay_key.pubkey()
            && e.tag_value("d") == Some(channel.as_str())),
        "group state derived by this relay: {out}"
    );

    // since/until select by created_at, --community by host.
    let (since, until) = ((t + 4).to_string(), (t + 5).to_string());
    let (ok, out, err) = run(
        &cfg,
        &[
            "export",
            "--community",
            "LOCALHOST.",
            "--since",
            &since,
            "--until",
            &until,
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(
        ids_by(&parse(&out), relay_key.pubkey()),
        vec![reply.id.clone(), note.id.clone()]
    );
    let (ok, _, err) = run(&cfg, &["export", "--community", "nowhere.test"]);
    assert!(
        !ok && err.contains("error: ") && err.contains("no community nowhere.test"),
        "{err}"
    );

    // Importing again: every line a duplicate, nothing new.
    let (ok, _, err) = run(&cfg, &["import", file_arg]);
    assert!(ok, "{err}");
    assert!(
        err.contains("imported 0 events into localhost: 7 duplicate, 3 invalid"),
        "{err}"
    );

    let second_key = Keys::generate();
    let Some(second) = Db::new(backend, dir.path(), "second", test) else {
        return;
    };
    let second_cfg = config(dir.path(), "second", &second.url, &second_key.secret_hex());
    let export_file = dir.path().join("export.jsonl");
    let (_, out, _) = run(&cfg, &["export"]);
    std::fs::write(&export_file, &out).expect("write export");
    // Our own export imports into another relay: its group state (relay-authored kinds)
    // is derived anew. An imported join derives no membership record (the file holds
    // the relay's own when its relay wrote one: `tests/storage_membership.rs`).
    let replayable: Vec<String> = parse(&out)
        .iter()
        .filter(|e| !GROUP_STATE.contains(&e.kind))
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(replayable.len(), 6, "{out}");
    let (ok, _, err) = run(
        &second_cfg,
        &[
            "import",
            "--community",
            "localhost",
            export_file.to_str().expect("path"),
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains(
            "imported 6 events into localhost: 0 duplicate, 0 invalid, 3 relay-authored skipped"
        ),
        "{err}"
    );
    let (ok, again, err) = run(&second_cfg, &["export"]);
    assert!(ok, "{err}");
    // Every event but the re-derived group state, whoever signed it: nothing derived
    // twice.
    let again: Vec<String> = parse(&again)
        .iter()
        .filter(|e| !GROUP_STATE.contains(&e.kind))
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(again, replayable);

    // The thread was derived: the reply's metadata names its root.
    let url = second.url.clone();
    let key = second_key.secret_hex();
    let relay = TestRelay::start_with(
        backend,
        test,
        move |s| {
            s.storage.database_url = url;
            s.relay.private_key = key;
        },
        Vec::new(),
    )
    .await
    .expect("relay on the imported database");
    let thread = relay.thread_row(&reply.id).await.expect("thread row");
    assert_eq!(thread.root_id.as_deref(), Some(root.id.as_str()));
    assert_eq!(thread.depth, 1);
    relay.stop().await;
}

/// An authenticated client publishing notes until told to stop; every acknowledged id
/// is recorded, in order.
fn spawn_writer(
    relay: &TestRelay,
    acked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let addr = relay.addr;
    let host = relay.host();
    tokio::spawn(async move {
        let keys = Keys::generate();
        let mut ws = buzz_core::testkit::WsClient::connect(addr, &host)
            .await
            .expect("connect");
        assert!(ws.auth(&keys).await.0, "AUTH");
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let event = keys.sign(1, vec![], &format!("note {n}"), now());
            let (ok, msg) = ws.publish(&event).await;
            assert!(ok, "{msg}");
            acked.lock().expect("lock").push(event.id);
        }
    })
}

/// `backup` while a client keeps writing: the relay goes on acknowledging events during
/// the backup, and the copy opens as a relay database holding every event acknowledged
/// before the backup began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_while_the_relay_writes() {
    let relay = TestRelay::start(TestBackend::Sqlite, "backup_while_the_relay_writes")
        .await
        .expect("relay");
    let dir = tempfile::tempdir().expect("tempdir");
    let key = relay.running().services.relay_keys.secret_hex();
    let cfg = config(
        dir.path(),
        "live",
        &relay.settings.storage.database_url,
        &key,
    );
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&relay, acked.clone(), stop.clone());
    while acked.lock().expect("lock").len() < 300 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before: Vec<String> = acked.lock().expect("lock").clone();
    let path = dir.path().join("backup.db");
    let target = path.to_str().expect("path").to_owned();
    let cfg2 = cfg.clone();
    let (ok, _, err) = tokio::task::spawn_blocking(move || run(&cfg2, &["backup", &target]))
        .await
        .expect("backup ran");
    assert!(ok, "{err}");
    assert!(err.contains("backed up "), "{err}");
    // Writes kept being acknowledged after the backup began.
    let during = acked.lock().expect("lock").len();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("writer");
    assert!(
        acked.lock().expect("lock").len() > during,
        "the relay kept acknowledging writes after the backup"
    );
    // A second backup into the same file is refused, the first left as it is.
    let (ok, _, err) = run(&cfg, &["backup", path.to_str().expect("path")]);
    assert!(
        !ok && err.contains("error: ") && err.contains("exists"),
        "{err}"
    );

    let url = format!("sqlite://{}", path.display());
    let copy = TestRelay::start_with(
        TestBackend::Sqlite,
        "backup_while_the_relay_writes",
        move |s| {
            s.storage.database_url = url;
            s.relay.private_key = key;
        },
        Vec::new(),
    )
    .await
    .expect("a relay opens the backup");
    for id in &before {
        assert_eq!(
            copy.stored_rows(id).await,
            1,
            "acknowledged {id} is in the backup"
        );
    }
    copy.stop().await;
    relay.stop().await;
}

/// PostgreSQL has its own tools: `backup` says which, and changes nothing.
#[tokio::test]
async fn backup_on_postgresql_points_to_pg_dump() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = Db::new(
        TestBackend::Postgres,
        dir.path(),
        "pg",
        "backup_on_postgresql_points_to_pg_dump",
    ) else {
        return;
    };
    let cfg = config(dir.path(), "pg", &db.url, &Keys::generate().secret_hex());
    let path = dir.path().join("never.db");
    let (ok, _, err) = run(&cfg, &["backup", path.to_str().expect("path")]);
    assert!(!ok, "{err}");
    assert!(err.contains("error: ") && err.contains("pg_dump"), "{err}");
    assert!(!path.exists());
}

/// Artifact revisions whose checks read the revision before them, and a deletion of the
/// message just before it: imported in file order, each sees what the lines before it
/// stored (the compare-and-swap chain holds, the move leaves the relay's own removal
/// marker, the deleted message is gone).
async fn import_derives_artifacts_and_deletions_in_file_order(backend: TestBackend, test: &str) {
    use artifacts::{ArtifactUser, Draft, User, TASK};
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = Db::new(backend, dir.path(), "relay", test) else {
        return;
    };
    let relay_key = Keys::generate();
    let cfg = config(dir.path(), "relay", &db.url, &relay_key.secret_hex());
    let alice = Keys::generate();
    let (a, b) = (channel_id(), channel_id());
    let create = |h: &str| alice.sign(9007, vec![tag(&["h", h]), tag(&["name", "c"])], "", now());
    let v1 = Draft::create(&a, "travelling").sign(&alice);
    // A long compare-and-swap chain: each revision's check reads the one before it,
    // queued a moment earlier.
    let mut chain = vec![v1.clone()];
    for _ in 0..60 {
        let prev = chain.last().expect("chain").clone();
        chain.push(Draft::after(&prev, "update").sign(&alice));
    }
    let v2 = chain.last().expect("chain").clone();
    let mut mv = Draft::after(&v2, "move");
    mv.h = b.clone();
    let v3 = mv.sign(&alice);
    let oops = alice.sign(9, vec![tag(&["h", &a])], "oops", now());
    let deletion = alice.sign(5, vec![tag(&["h", &a]), tag(&["e", &oops.id])], "", now());
    let events: Vec<Event> = [create(&a), create(&b)]
        .into_iter()
        .chain(chain.iter().cloned())
        .chain([v3.clone(), oops.clone(), deletion])
        .collect();
    let lines: Vec<String> = events.iter().map(Event::to_json).collect();
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, lines.join("\n")).expect("write");
    let (ok, _, err) = run(&cfg, &["import", file.to_str().expect("path")]);
    assert!(ok, "{err}");
    assert!(
        err.contains("imported 66 events into localhost: 0 duplicate, 0 invalid"),
        "{err}"
    );
    let (ok, out, err) = run(&cfg, &["export"]);
    assert!(ok, "{err}");
    let exported = parse(&out);
    assert!(
        !exported.iter().any(|e| e.id == oops.id),
        "deleted message exported"
    );
    assert!(
        exported
            .iter()
            .any(|e| e.kind == 45011 && e.pubkey == relay_key.pubkey()),
        "the move left this relay's removal marker: {out}"
    );

    let url = db.url.clone();
    let key = relay_key.secret_hex();
    let relay = TestRelay::start_with(
        backend,
        test,
        move |s| {
            s.storage.database_url = url;
            s.relay.private_key = key;
        },
        vec![buzz_core::plugin::PluginEntry::of::<
            buzz_artifacts::ArtifactsPlugin,
        >()],
    )
    .await
    .expect("relay on the imported database");
    let reader = User::with_keys(&relay, alice.clone()).await;
    let current = reader
        .current(&relay, serde_json::json!({"#type": [TASK]}))
        .await;
    assert_eq!(artifacts::ids(&current), vec![v3.id.clone()]);
    let d = v1.tag_value("d").unwrap_or_default().to_owned();
    let history = reader.history(&relay, &d).await;
    let mut expected = artifacts::ids(&chain);
    expected.push(v3.id.clone());
    assert_eq!(artifacts::ids(&history), expected);
    relay.stop().await;
}

/// An export longer than one read window (2,000 `seq` values) and a scope cutting
/// across windows: every event once, in arrival order, the deleted one left out.
async fn export_reads_window_after_window(backend: TestBackend, test: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = Db::new(backend, dir.path(), "relay", test) else {
        return;
    };
    let relay_key = Keys::generate();
    let cfg = config(dir.path(), "relay", &db.url, &relay_key.secret_hex());
    let alice = Keys::generate();
    let t = now() - 30 * 86_400;
    let notes: Vec<Event> = (0..4_500)
        .map(|i| alice.sign(1, vec![], &format!("note {i}"), t + i))
        .collect();
    let gone = notes[2_500].id.clone();
    let deletion = alice.sign(5, vec![tag(&["e", &gone])], "", t + 5_000);
    let mut lines: Vec<String> = notes.iter().map(Event::to_json).collect();
    lines.push(deletion.to_json());
    let file = dir.path().join("notes.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("write import file");
    let (ok, _, err) = run(&cfg, &["import", file.to_str().expect("utf-8 path")]);
    assert!(ok, "{err}");
    assert!(err.contains("imported 4501 events"), "{err}");

    let kept = |from: usize, to: usize| -> Vec<String> {
        notes[from..to]
            .iter()
            .map(|e| e.id.clone())
            .filter(|id| *id != gone)
            .collect()
    };
    let (ok, out, err) = run(&cfg, &["export"]);
    assert!(ok, "{err}");
    let mut expected = kept(0, notes.len());
    expected.push(deletion.id.clone());
    assert_eq!(ids_by(&parse(&out), relay_key.pubkey()), expected);
    assert!(err.contains("exported 4500 events"), "{err}");

    let (since, until) = ((t + 1_000).to_string(), (t + 3_999).to_string());
    let (ok, out, err) = run(&cfg, &["export", "--since", &since, "--until", &until]);
    assert!(ok, "{err}");
    assert_eq!(ids_by(&parse(&out), relay_key.pubkey()), kept(1_000, 4_000));
}

both_backends!(
    import_checks_every_line_and_export_replays_it,
    import_derives_artifacts_and_deletions_in_file_order,
    export_reads_window_after_window
);
