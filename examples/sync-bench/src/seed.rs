//! The channel and its messages, seeded through the store's bulk insert.

use crate::client::Counted;
use buzz_core::relay::RunningRelay;
use buzz_core::store::{insert_independent, Backend};
use buzz_core::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use futures_util::StreamExt;
use serde_json::json;
use std::net::SocketAddr;

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub(crate) async fn create_channel(addr: SocketAddr, keys: &Keys) -> anyhow::Result<String> {
    let mut ws = Counted::connect(addr, keys).await?;
    let channel = format!("00000000-0000-4000-8000-{:012x}", now());
    let event = keys.sign(
        9007,
        vec![
            vec!["h".into(), channel.clone()],
            vec!["name".into(), "bench".into()],
        ],
        "",
        now(),
    );
    ws.send(&json!(["EVENT", event])).await?;
    let ok = ws.recv().await?;
    anyhow::ensure!(ok[0] == "OK" && ok[2] == true, "channel refused: {ok}");
    Ok(channel)
}

/// `n` messages in `channel`, one second apart ending now, signed on every core and
/// written through the store's bulk insert.
pub(crate) async fn seed(
    relay: &RunningRelay,
    keys: &Keys,
    channel: &str,
    n: usize,
) -> anyhow::Result<Vec<Event>> {
    let start = now() - n as i64 - 1;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = n.div_ceil(threads).max(1);
    let mut handles = Vec::new();
    for part in 0..threads {
        let (keys, channel) = (keys.clone(), channel.to_owned());
        let range = (part * per)..((part + 1) * per).min(n);
        handles.push(std::thread::spawn(move || {
            range
                .map(|i| {
                    keys.sign(
                        9,
                        vec![vec!["h".into(), channel.clone()]],
                        &format!(
                            "message {i}: a line of ordinary team chat, about as long as most of them are."
                        ),
                        start + i as i64,
                    )
                })
                .collect::<Vec<Event>>()
        }));
    }
    let mut events = Vec::with_capacity(n);
    for handle in handles {
        events.extend(
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a signing thread panicked"))?,
        );
    }
    let store = relay.services.store.clone();
    let community_id = relay.services.communities[0].id;
    let per_job = match store.backend() {
        Backend::Sqlite => 50,
        Backend::Postgres => 1_000,
    };
    let jobs = events.chunks(per_job).map(|chunk| {
        let stored: Vec<StoredEvent> = chunk
            .iter()
            .map(|event| StoredEvent {
                event: event.clone(),
                community_id,
                channel: Some(channel.to_owned()),
                received_at: event.created_at * 1_000_000,
            })
            .collect();
        let store = store.clone();
        async move {
            store
                .write(move |conn| insert_independent(conn, &stored).map(|_| ()))
                .await
        }
    });
    let results: Vec<_> = futures_util::stream::iter(jobs)
        .buffer_unordered(32)
        .collect()
        .await;
    for result in results {
        result.map_err(|reason| anyhow::anyhow!("seeding: {reason}"))?;
    }
    store
        .analyze()
        .await
        .map_err(|r| anyhow::anyhow!("analyze: {r}"))?;
    Ok(events)
}
