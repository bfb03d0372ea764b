//! The Frontiers pane (issue #14) on a ratatui `TestBackend` (80×24), from read state a
//! real relay produced over the wire (SQLite and PostgreSQL): the operator picks the
//! reader by pasting an npub, the refresher reads their frontiers off the UI thread,
//! and the pane shows started_at, the channel position, both thread rows and what the
//! sidebar says now; `/` filters the rows.

use buzz_admin::data::frontiers::{gather_frontiers, Reader};
use buzz_admin::data::sources::Refresher;
use buzz_admin::data::Snapshot;
use buzz_admin::ui::{Action, App};
use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend as Db, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_read_state_client::{self as client, Client};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use std::time::{Duration, Instant};

both_backends!(frontiers_pane_shows_a_readers_state);

fn draw(app: &mut App, snapshot: &Snapshot) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
    terminal
        .draw(|frame| app.draw(frame, snapshot))
        .expect("draws");
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

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

async fn publish(ws: &mut WsClient, event: Event) -> Event {
    assert_eq!(ws.publish(&event).await, (true, String::new()), "publish");
    event
}

/// Increasing author times within the skew window, so display order is posting order.
fn at(n: i64) -> i64 {
    now() - 300 + n
}

async fn frontiers_pane_shows_a_readers_state(backend: Db, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| {
            if let Some(section) = s.plugins.get_mut(buzz_read_state::NAME) {
                section.enabled = Some(true);
            }
        },
        buzz_relay::catalog().entries().to_vec(),
    )
    .await
    else {
        return;
    };
    let (alice, bob) = (Keys::generate(), Keys::generate());
    let mut aws = relay.ws().await;
    let mut bws = relay.ws().await;
    assert!(aws.auth(&alice).await.0 && bws.auth(&bob).await.0, "AUTH");
    let ch = uuid::Uuid::new_v4().to_string();
    let h = tag(&["h", &ch]);
    publish(
        &mut aws,
        alice.sign(9007, vec![h.clone(), tag(&["name", "general"])], "", at(0)),
    )
    .await;
    publish(&mut bws, bob.sign(9021, vec![h.clone()], "", at(1))).await;
    let root = publish(&mut aws, alice.sign(9, vec![h.clone()], "root", at(2))).await;
    let other = publish(&mut aws, alice.sign(9, vec![h.clone()], "other", at(3))).await;
    // Bob starts (his first read intent), follows `other` and unfollows it again.
    let own = publish(&mut bws, bob.sign(9, vec![h.clone()], "hi", at(4))).await;
    let api = Client::new(
        &format!("http://{}", relay.addr),
        &relay.host(),
        bob.clone(),
    );
    let answer = api
        .intents(&[
            client::mark_through(&ch, None, &own.id),
            client::follow(&ch, &other.id),
            client::unfollow(&ch, &other.id),
        ])
        .await
        .expect("intents");
    assert_eq!(answer.status, 200, "{}", answer.body);
    // Bob replies to `root` (follows it); Alice replies after him and mentions him in
    // the timeline (which follows the thread rooted at the mention, nothing in it yet):
    // one unread mention in the channel, one unread thread.
    let replies = |root: &Event| {
        vec![
            h.clone(),
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
        ]
    };
    publish(&mut bws, bob.sign(9, replies(&root), "me too", at(5))).await;
    publish(&mut aws, alice.sign(9, replies(&root), "and again", at(6))).await;
    let mention = vec![h.clone(), tag(&["p", bob.pubkey()])];
    publish(&mut aws, alice.sign(9, mention, "@bob", at(7))).await;

    let mut settings = relay.settings.clone();
    settings.server.bind = relay.addr.to_string();
    let catalog = buzz_relay::catalog();
    // The data alone: what the plugin reads for the console.
    let reader = Reader {
        host: "localhost".into(),
        pubkey: bob.pubkey().to_owned(),
    };
    let (s, c, r) = (settings.clone(), catalog.clone(), reader.clone());
    let data = tokio::task::spawn_blocking(move || gather_frontiers(&s, &c, &r))
        .await
        .expect("join")
        .expect("frontiers");
    assert!(data.view.started_at.is_some());
    assert_eq!(data.view.channels.len(), 1);
    assert!(data.view.channels[0].joined && data.view.channels[0].position.is_some());
    // `root` (replied), `other` (unfollowed), and the thread rooted at the mention.
    assert_eq!(data.view.threads.len(), 3, "{:?}", data.view.threads);
    let row = &data.view.sidebar[0];
    assert!(
        row.unread && row.mentions == 1 && row.threads.len() == 1,
        "{row:?}"
    );

    // The console: pick the reader by pasting an npub; the refresher reads it.
    let refresher = Refresher::start(
        settings,
        catalog,
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
        tokio::task::block_in_place(|| wait(&|s| s.db.value.is_some())),
        "the database is read"
    );
    let mut app = App::new(None);
    app.select(6);
    let action = {
        let snapshot = refresher.snapshot.lock().expect("snapshot");
        let text = draw(&mut app, &snapshot);
        assert!(text.contains("7 Frontiers"), "{text}");
        assert!(
            text.contains("p: type or paste a reader's pubkey"),
            "{text}"
        );
        assert_eq!(app.handle_key(key(KeyCode::Char('p')), &snapshot), None);
        app.paste(&npub(bob.pubkey()));
        app.handle_key(key(KeyCode::Enter), &snapshot)
    };
    assert_eq!(action, Some(Action::WatchFrontiers(reader.clone())));
    refresher.watch_frontiers(reader);
    assert!(
        tokio::task::block_in_place(|| wait(&|s| s.frontiers.value.is_some())),
        "the reader's frontiers are read off the UI thread"
    );
    {
        let snapshot = refresher.snapshot.lock().expect("snapshot");
        let text = draw(&mut app, &snapshot);
        assert!(text.contains("Frontiers in localhost"), "{text}");
        assert!(
            text.contains(&format!("reader {}", &bob.pubkey()[..16])),
            "{text}"
        );
        assert!(text.contains("started 20"), "{text}");
        assert!(text.contains("1 joined, 3 threads (2 followed)"), "{text}");
        assert!(text.contains("#general"), "{text}");
        assert!(text.contains("unread 1@, 1 thr"), "{text}");
        assert!(text.contains(&format!("↳ {}", &root.id[..8])), "{text}");
        assert!(
            text.contains("following") && text.contains("unfollowed"),
            "{text}"
        );
        assert!(
            text.contains("unread 0@") && text.contains("nothing new"),
            "{text}"
        );
        assert!(text.contains("4 scopes"), "{text}");
        // `/` keeps only matching rows.
        app.handle_key(key(KeyCode::Char('/')), &snapshot);
        for c in "unfollowed".chars() {
            app.handle_key(key(KeyCode::Char(c)), &snapshot);
        }
        app.handle_key(key(KeyCode::Enter), &snapshot);
        let text = draw(&mut app, &snapshot);
        assert!(text.contains("1 scopes /unfollowed"), "{text}");
        assert!(!text.contains("#general "), "{text}");
        // A bad pubkey is refused with a notice, not watched.
        app.handle_key(key(KeyCode::Char('p')), &snapshot);
        app.paste("npub1notakey");
        assert_eq!(app.handle_key(key(KeyCode::Enter), &snapshot), None);
        let text = draw(&mut app, &snapshot);
        assert!(text.contains("not a valid npub"), "{text}");
    }
    relay.stop().await;
}

/// `hex` as an npub (NIP-19).
fn npub(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    bech32::encode::<bech32::Bech32>(bech32::Hrp::parse("npub").expect("hrp"), &bytes)
        .expect("npub")
}
