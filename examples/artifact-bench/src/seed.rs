//! Seeding artifacts through the real ingest path (pipelined WebSocket `EVENT`s), so
//! every head, revision row and current tag is what production writes.

use anyhow::bail;
use buzz_core::testkit::{now, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

/// Events in flight per batch on one connection.
const PIPELINE: usize = 500;

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

/// Create `count` artifacts round-robin over `channels`: half `buzz.task`, half
/// `buzz.doc`, assigned round-robin to `assignees`, status open or done.
pub(crate) async fn artifacts(
    ws: &mut WsClient,
    author: &Keys,
    channels: &[String],
    assignees: &[String],
    first: usize,
    count: usize,
) -> anyhow::Result<()> {
    let at = now();
    let events: Vec<Event> = (first..first + count)
        .map(|i| {
            let kind = if i % 2 == 0 { "buzz.task" } else { "buzz.doc" };
            let status = if i % 3 == 0 { "done" } else { "open" };
            author.sign(
                45_010,
                vec![
                    tag("ar", "1"),
                    tag("d", &uuid::Uuid::new_v4().to_string()),
                    tag("h", &channels[i % channels.len()]),
                    tag("type", kind),
                    tag("title", &format!("artifact {i}")),
                    tag("op", "create"),
                    tag("assignee", &assignees[i % assignees.len()]),
                    tag("status", status),
                ],
                &format!("{{\"version\":1,\"n\":{i}}}"),
                at,
            )
        })
        .collect();
    for batch in events.chunks(PIPELINE) {
        for event in batch {
            ws.send(&json!(["EVENT", event])).await?;
        }
        for event in batch {
            let (ok, msg) = ws.wait_ok(&event.id).await;
            if !ok {
                bail!("seeding refused: {msg}");
            }
        }
    }
    Ok(())
}
