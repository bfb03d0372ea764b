//! The Captures pane (snapshot plugin) on a `TestBackend` 80×24: a capture a real relay
//! took — reader, query, pages served, entries, bytes — and the shared quota in use,
//! from the database (SQLite, PostgreSQL) or Redis (PostgreSQL + Redis); a store that
//! cannot be read is marked stale.

use buzz_admin::data::sources::gather_captures;
use buzz_admin::data::Snapshot;
use buzz_admin::ui::App;
use buzz_core::both_backends;
use buzz_core::testkit::{now, redis_url, tag, TestBackend as Db, TestRelay};
use buzz_nostr::keys::Keys;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;
use std::sync::Arc;

both_backends!(captures_pane_shows_a_capture_and_the_quota);

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

async fn captures_pane_shows_a_capture_and_the_quota(backend: Db, name: &str) {
    // PostgreSQL runs with Redis: the pane then reads the captures from Redis.
    let redis = match backend {
        Db::Postgres => match redis_url(name) {
            Some(url) => Some(url),
            None => return,
        },
        Db::Sqlite => None,
    };
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        move |s| {
            if let Some(url) = redis {
                s.storage.redis_url = url;
                s.storage.redis_prefix = format!("buzz-test-{}", uuid::Uuid::new_v4().simple());
            }
        },
        buzz_relay::catalog().entries().to_vec(),
    )
    .await
    else {
        return;
    };
    let reader = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&reader).await, (true, String::new()));
    let channel = uuid::Uuid::new_v4().to_string();
    let create = reader.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "g"])],
        "",
        now(),
    );
    assert_eq!(ws.publish(&create).await, (true, String::new()));
    let task = reader.sign(
        45_010,
        vec![
            tag(&["ar", "1"]),
            tag(&["d", &uuid::Uuid::new_v4().to_string()]),
            tag(&["h", &channel]),
            tag(&["type", "buzz.task"]),
            tag(&["title", "t"]),
            tag(&["op", "create"]),
        ],
        "{}",
        now(),
    );
    assert_eq!(ws.publish(&task).await, (true, String::new()));
    let start = json!([{"artifact": "snapshot", "action": "start",
        "query": {"artifact": "current", "#type": ["buzz.task"]}}]);
    let (status, body) = relay
        .http()
        .post_signed(&reader, "/query", start.to_string().as_bytes())
        .await;
    assert_eq!(status, 200, "{body}");

    let settings = Arc::new(relay.settings.clone());
    let catalog = Arc::new(buzz_relay::catalog());
    let mut snapshot = Snapshot::default();
    snapshot
        .captures
        .update(gather_captures(&settings, &catalog).await);
    let mut app = App::new(None);
    app.select(5);
    let text = draw(&mut app, &snapshot);
    let store = if backend == Db::Postgres {
        "Redis"
    } else {
        "database"
    };
    assert!(
        text.contains(&format!("in {store}: 1/32 captures")),
        "{text}"
    );
    assert!(text.contains(&reader.pubkey()[..12]), "{text}");
    assert!(text.contains("1/1"), "pages served: {text}");
    assert!(text.contains(r##"{"#type":["buzz"##), "query: {text}");

    // The store cannot be read: the last good value stays, marked stale.
    let mut broken = relay.settings.clone();
    if backend == Db::Postgres {
        broken.storage.redis_url = "redis://127.0.0.1:1".into();
    } else {
        broken.storage.database_url = "sqlite:///nonexistent/dir/buzz.db".into();
    }
    snapshot
        .captures
        .update(gather_captures(&Arc::new(broken), &catalog).await);
    let text = draw(&mut app, &snapshot);
    assert!(text.contains("STALE"), "{text}");
    assert!(text.contains(&reader.pubkey()[..12]), "{text}");
    relay.stop().await;
}
