//! Every pane of the console drawn on a ratatui `TestBackend` (80×24) from data a real
//! relay produced (SQLite and PostgreSQL): its own database, its `/metrics`, its NIP-11,
//! and a ban made through NIP-86. A source that goes down shows a stale marker, never a
//! crash.

use buzz_admin::data::figures::Live;
use buzz_admin::data::sources::{gather_db, nip11, scrape, Refresher};
use buzz_admin::data::{Process, Snapshot, Sourced};
use buzz_admin::ui::{Action, App};
use buzz_core::both_backends;
use buzz_core::config::Settings;
use buzz_core::testkit::{now, tag, TestBackend as Db, TestRelay};
use buzz_nostr::keys::Keys;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use serde_json::json;
use std::time::{Duration, Instant};

both_backends!(
    every_pane_draws_seeded_data,
    a_source_going_down_is_marked_stale,
    console_actions_reach_the_relay,
);

/// The screen as text, one line per row.
fn screen(terminal: &Terminal<TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn draw(app: &mut App, snapshot: &Snapshot) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
    terminal
        .draw(|frame| app.draw(frame, snapshot))
        .expect("draws");
    screen(&terminal)
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// The relay's settings as `buzz-admin` would read them: HTTP at its real address.
fn admin_settings(relay: &TestRelay) -> Settings {
    let mut settings = relay.settings.clone();
    settings.server.bind = relay.addr.to_string();
    settings
}

/// The member `seeded` bans (its key), for tests that act on it.
fn seeded_member() -> Keys {
    Keys::from_hex(&"1".repeat(64)).expect("fixed key")
}

async fn seeded(backend: Db, name: &str, owner: &Keys) -> Option<TestRelay> {
    let pk = owner.pubkey().to_owned();
    let relay = TestRelay::start_with(
        backend,
        name,
        move |s| s.communities[0].owners = vec![pk],
        buzz_relay::catalog().entries().to_vec(),
    )
    .await?;
    let alice = seeded_member();
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&alice).await, (true, String::new()));
    let channel = uuid::Uuid::new_v4().to_string();
    let create = alice.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "g"])],
        "",
        now(),
    );
    assert_eq!(ws.publish(&create).await, (true, String::new()));
    for i in 0..5 {
        let msg = alice.sign(9, vec![tag(&["h", &channel])], &format!("m{i}"), now());
        assert_eq!(ws.publish(&msg).await, (true, String::new()));
    }
    let (status, body) = relay
        .http()
        .nip86(
            Some(owner),
            &json!({"method": "banpubkey", "params": [alice.pubkey(), "flooding"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    Some(relay)
}

async fn every_pane_draws_seeded_data(backend: Db, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = seeded(backend, name, &owner).await else {
        return;
    };
    let settings = admin_settings(&relay);
    let catalog = buzz_relay::catalog();
    let client = buzz_admin::data::sources::http_client().expect("client");
    let metrics = relay
        .running()
        .metrics_addr
        .expect("metrics on")
        .to_string();
    let figures = scrape(&client, &metrics).await.expect("scrape");
    let mut live = Sourced::default();
    live.update(Ok(Live::from(figures, Instant::now(), None)));
    let mut down = Sourced::<Live>::default();
    let refused = scrape(&client, "127.0.0.1:1").await;
    assert!(refused.is_err(), "nothing listens on port 1");
    down.update(refused.map(|f| Live::from(f, Instant::now(), None)));
    let (s, c) = (settings.clone(), catalog.clone());
    let db = tokio::task::spawn_blocking(move || gather_db(&s, &c))
        .await
        .expect("join");
    let mut snapshot = Snapshot::default();
    snapshot.db.update(db);
    snapshot.nip11.update(nip11(&client, &settings).await);
    let mut up = Process::new(metrics.clone());
    up.live = live;
    let mut gone = Process::new("127.0.0.1:1");
    gone.live = down;
    snapshot.processes = vec![up, gone];
    let mut app = App::new(Some(owner.pubkey().to_owned()));

    // Overview: key, community, both processes (one stale), errors by prefix.
    let text = draw(&mut app, &snapshot);
    assert!(text.contains(&relay.running().pubkey()[..40]), "{text}");
    assert!(
        text.contains("localhost") && text.contains(" events"),
        "{text}"
    );
    assert!(text.contains(&metrics), "{text}");
    assert!(text.contains("127.0.0.1:1 STALE"), "{text}");
    assert!(text.contains("ingest p50/99"), "{text}");
    assert!(text.contains("q quit") && text.contains("? help"), "{text}");

    // Migrations: owners, states, index flags on PostgreSQL.
    app.select(1);
    let text = draw(&mut app, &snapshot);
    assert!(text.contains("applied, 0 pending"), "{text}");
    assert!(text.contains("core") && text.contains("applied"), "{text}");
    match backend {
        Db::Postgres => {
            assert!(text.contains("Indexes (pg_index): 0 not"), "{text}");
            assert!(text.contains("yes"), "{text}");
        }
        Db::Sqlite => assert!(text.contains("SQLite: no pg_index"), "{text}"),
    }

    // Plugins: state, NIP-11 field, the selected plugin's own panel.
    app.select(2);
    let text = draw(&mut app, &snapshot);
    assert!(
        text.contains("channel_windows") && text.contains("enabled"),
        "{text}"
    );
    assert!(text.contains("\"channel_windows\""), "NIP-11 field: {text}");
    assert!(text.contains("thread deadline"), "panel facts: {text}");
    assert!(
        text.contains("HTTP routes") && text.contains("none"),
        "{text}"
    );
    // The read-state plugin's routes, from its manifest (it need not be enabled).
    app.handle_key(key(KeyCode::Char('/')), &snapshot);
    for c in "read_state".chars() {
        app.handle_key(key(KeyCode::Char(c)), &snapshot);
    }
    app.handle_key(key(KeyCode::Enter), &snapshot);
    let text = draw(&mut app, &snapshot);
    assert!(
        text.contains("GET /buzz/v1/me/sidebar (NIP-98)"),
        "routes: {text}"
    );

    // Policies: scripts and live verdict counts.
    app.select(3);
    let text = draw(&mut app, &snapshot);
    assert!(
        text.contains("access.lua") && text.contains("ok (can_read"),
        "{text}"
    );
    assert!(
        text.contains("can_write") && text.contains("allow"),
        "{text}"
    );
    assert!(text.contains("t dry-run event"), "{text}");
    assert!(
        text.contains(&format!("script loads: {metrics} 1, last ")),
        "{text}"
    );

    // Moderation: the NIP-86 ban, with its reason and author.
    app.select(4);
    let text = draw(&mut app, &snapshot);
    assert!(text.contains("1 bans and timeouts"), "{text}");
    assert!(text.contains("flooding") && text.contains("ban"), "{text}");
    assert!(text.contains(&owner.pubkey()[..12]), "{text}");
    // `/` filters the list; a filter matching nothing empties it.
    assert_eq!(app.handle_key(key(KeyCode::Char('/')), &snapshot), None);
    for c in "nobody".chars() {
        app.handle_key(key(KeyCode::Char(c)), &snapshot);
    }
    app.handle_key(key(KeyCode::Enter), &snapshot);
    let text = draw(&mut app, &snapshot);
    assert!(
        text.contains("0 bans and timeouts") && text.contains("/nobody"),
        "{text}"
    );
    // `u` on nothing selected does nothing; `b` asks for a pubkey and becomes NIP-86.
    app.handle_key(key(KeyCode::Esc), &snapshot);
    assert_eq!(app.handle_key(key(KeyCode::Char('b')), &snapshot), None);
    let victim = "c".repeat(64);
    app.paste(&format!("{victim} noisy"));
    let action = app.handle_key(key(KeyCode::Enter), &snapshot);
    assert_eq!(
        action,
        Some(Action::Nip86 {
            community: "localhost".into(),
            method: "banpubkey".into(),
            params: json!([victim, "noisy"]),
        })
    );
    // `?` shows help over the pane; any key closes it; `q` quits.
    app.handle_key(key(KeyCode::Char('?')), &snapshot);
    let text = draw(&mut app, &snapshot);
    assert!(text.contains("Moderation — keys"), "{text}");
    app.handle_key(key(KeyCode::Char('x')), &snapshot);
    assert_eq!(
        app.handle_key(key(KeyCode::Char('q')), &snapshot),
        Some(Action::Quit)
    );

    // Without an owner key, moderation is read-only and says so.
    let mut reader = App::new(None);
    reader.select(4);
    assert!(reader
        .handle_key(key(KeyCode::Char('b')), &snapshot)
        .is_none());
    let text = draw(&mut reader, &snapshot);
    assert!(
        text.contains("read-only: start buzz-admin with --key-file"),
        "{text}"
    );
    relay.stop().await;
}

async fn a_source_going_down_is_marked_stale(backend: Db, name: &str) {
    let owner = Keys::generate();
    let Some(mut relay) = seeded(backend, name, &owner).await else {
        return;
    };
    let mut settings = admin_settings(&relay);
    let metrics = relay
        .running()
        .metrics_addr
        .expect("metrics on")
        .to_string();
    settings.metrics.processes = vec![metrics.clone()];
    let refresher = Refresher::start(
        settings,
        buzz_relay::catalog(),
        Duration::from_millis(100),
        Duration::from_millis(100),
    )
    .expect("refresher starts");
    let wait = |ready: &dyn Fn(&Snapshot) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if ready(&refresher.snapshot.lock().expect("snapshot")) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    assert!(
        tokio::task::block_in_place(|| wait(&|s| s.processes[0].live.value.is_some()
            && s.db.value.is_some()
            && s.nip11.value.is_some()
            // Two scrapes: the second knows rates, the charts' first point.
            && s.processes[0]
                .history
                .samples()
                .any(|x| x.reading.as_ref().is_some_and(|r| r.interval.is_some())))),
        "the first refreshes arrive"
    );
    let mut app = App::new(None);
    let text = draw(&mut app, &refresher.snapshot.lock().expect("snapshot"));
    assert!(!text.contains("STALE"), "{text}");

    // The relay stops: its metrics and NIP-11 stop answering; the database stays.
    relay.halt().await;
    refresher.refresh_now();
    assert!(
        tokio::task::block_in_place(|| wait(&|s| s.processes[0].live.is_stale())),
        "the failed scrape is recorded"
    );
    let snapshot = refresher.snapshot.lock().expect("snapshot");
    let text = draw(&mut app, &snapshot);
    assert!(text.contains("STALE"), "{text}");
    assert!(text.contains(&format!("{metrics} STALE")), "{text}");
    // The last figures are still shown (the row has its connection count, not "-").
    let row = text
        .lines()
        .find(|l| l.contains(&format!("{metrics} STALE")))
        .expect("process row");
    assert!(!row.contains(" - "), "{row}");
    // The charts' history kept every scrape across refreshes, the failed one a gap.
    let history = &snapshot.processes[0].history;
    assert!(history.is_stale(), "the newest sample is the failed scrape");
    assert!(history.samples().filter(|x| x.reading.is_some()).count() >= 2);
    assert!(
        text.contains("Last 5 min · all processes") && text.contains("ingest events/s"),
        "{text}"
    );
    // The database still answers: the Overview still shows the key and community, and
    // the other panes draw (the plugin pane marks the relay's NIP-11 stale).
    assert!(text.contains("localhost"), "{text}");
    for pane in 1..5 {
        app.select(pane);
        let text = draw(&mut app, &snapshot);
        assert!(text.contains("STALE"), "pane {pane}: {text}");
    }
}

async fn console_actions_reach_the_relay(backend: Db, name: &str) {
    use buzz_admin::data::dryrun::dry_run;
    use buzz_admin::data::nip86::Nip86Client;
    let owner = Keys::generate();
    let Some(relay) = seeded(backend, name, &owner).await else {
        return;
    };
    let settings = admin_settings(&relay);
    let catalog = buzz_relay::catalog();

    // Dry-run: the banned member is refused with the ban's reason, a newcomer allowed;
    // nothing is stored either way.
    let banned = seeded_member().sign(1, vec![], "dry", now());
    let verdict = dry_run(
        &settings,
        &catalog,
        "localhost",
        &serde_json::to_string(&banned).expect("json"),
    )
    .await
    .expect("dry-run runs");
    assert!(
        verdict.contains("refused") && verdict.contains("blocked: banned: flooding"),
        "{verdict}"
    );
    let newcomer = Keys::generate().sign(1, vec![], "hi", now());
    let verdict = dry_run(
        &settings,
        &catalog,
        "localhost",
        &serde_json::to_string(&newcomer).expect("json"),
    )
    .await
    .expect("dry-run runs");
    assert!(verdict.ends_with("allowed"), "{verdict}");
    assert_eq!(
        relay.stored_rows(&newcomer.id).await,
        0,
        "a dry-run stores nothing"
    );
    let broken = dry_run(&settings, &catalog, "localhost", "{not json").await;
    assert!(broken.is_err_and(|e| e.contains("not a Nostr event")));

    // NIP-86 from the console: as the owner it works; as anyone else it is refused
    // with the relay's 403.
    let client = Nip86Client::new(&settings, owner.clone()).expect("client");
    let victim = "d".repeat(64);
    client
        .call(
            "localhost",
            "timeoutpubkey",
            json!([victim, now() + 600, "cool"]),
        )
        .await
        .expect("timeout accepted");
    let listed = client
        .call("localhost", "listtimedoutpubkeys", json!([]))
        .await
        .expect("listed");
    assert_eq!(listed[0]["pubkey"], json!(victim));
    let stranger = Nip86Client::new(&settings, Keys::generate()).expect("client");
    let refused = stranger
        .call("localhost", "banpubkey", json!([victim]))
        .await
        .expect_err("not an owner");
    assert!(refused.starts_with("HTTP 403: restricted:"), "{refused}");
    relay.stop().await;
}
