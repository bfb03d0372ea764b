//! The example client against a real relay with `channel_windows`: it pages a whole
//! channel and a whole thread over both transports, and every page passes its checks.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_window_client::{Transport, WindowClient};

async fn publish(ws: &mut WsClient, event: &Event) {
    let (ok, msg) = ws.publish(event).await;
    assert!(ok, "kind {} refused: {msg}", event.kind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_a_channel_and_a_thread_over_both_transports() {
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "window_client::pages",
        |_| {},
        vec![buzz_core::plugin::PluginEntry::of::<
            buzz_channel_windows::ChannelWindowsPlugin,
        >()],
    )
    .await
    .expect("SQLite is always available");
    let author = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&author).await.0);
    let channel = uuid::Uuid::new_v4().to_string();
    publish(
        &mut ws,
        &author.sign(
            9007,
            vec![tag(&["h", &channel]), tag(&["name", "c"])],
            "",
            now(),
        ),
    )
    .await;

    // 23 top-level rows (several per second), a thread of 17 replies under the oldest,
    // reactions on some rows and replies.
    let t = now() - 200;
    let mut rows = Vec::new();
    for i in 0..23 {
        let row = author.sign(
            9,
            vec![tag(&["h", &channel])],
            &format!("row {i}"),
            t + i / 3,
        );
        publish(&mut ws, &row).await;
        rows.push(row);
    }
    let root = rows[0].clone();
    let mut replies = Vec::new();
    for i in 0..17 {
        let reply = author.sign(
            9,
            vec![
                tag(&["h", &channel]),
                tag(&["e", &root.id, "", "root"]),
                tag(&["e", &root.id, "", "reply"]),
            ],
            &format!("reply {i}"),
            t + 20 + i / 2,
        );
        publish(&mut ws, &reply).await;
        replies.push(reply);
    }
    for target in [&rows[22], &rows[5], &replies[16], &replies[3]] {
        let reaction = author.sign(
            7,
            vec![tag(&["h", &channel]), tag(&["e", &target.id])],
            "+",
            now(),
        );
        publish(&mut ws, &reaction).await;
    }
    let newest_first = |events: &mut Vec<Event>| {
        events.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        })
    };
    newest_first(&mut rows);
    newest_first(&mut replies);

    let reader = Keys::generate();
    let url = format!("http://{}", relay.addr);
    for transport in [Transport::Http, Transport::WebSocket] {
        let mut client = WindowClient::connect(&url, reader.clone(), transport)
            .await
            .expect("connects");
        assert_eq!(client.relay_pubkey(), relay.running().pubkey());

        let mut pages = 0;
        let mut summaries = 0;
        let mut aux = 0;
        let got = client
            .page_channel(&channel, 5, |_, page| {
                pages += 1;
                summaries += page.summaries.len();
                aux += page.aux.len();
            })
            .await
            .expect("every channel page passes the checks");
        assert_eq!(got, rows, "{transport:?}: every row once, in order");
        assert_eq!((pages, summaries, aux), (5, 1, 2), "{transport:?}");

        let mut pages = 0;
        let got = client
            .page_thread(&channel, &root.id, 4, |_, _| pages += 1)
            .await
            .expect("every thread page passes the checks");
        assert_eq!(
            got, replies,
            "{transport:?}: every reply once, newest first"
        );
        assert_eq!(pages, 5, "{transport:?}");

        // An inaccessible (here: nonexistent) channel serves no window: no bounds.
        let missing = uuid::Uuid::new_v4().to_string();
        let err = client
            .page_channel(&missing, 5, |_, _| {})
            .await
            .expect_err("no bounds");
        assert!(format!("{err:#}").contains("not served"), "{err:#}");
    }
    relay.stop().await;
}
