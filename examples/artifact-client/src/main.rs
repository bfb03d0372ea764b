//! `artifact-client`: walk one task through its whole life on a running relay — create,
//! edit, a lost race, move, delete, restore — list current state, then sync every
//! current task with a stable capture (start, pages, verified bodies, complete).
//!
//! ```text
//! cargo run --release                       # the relay, in one terminal
//! cargo run -p buzz-artifact-client -- --url http://127.0.0.1:7777 [--key <hex secret>]
//! ```

use anyhow::{bail, Context};
use buzz_artifact_client::{ArtifactClient, Outcome};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use clap::Parser;
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "artifact-client",
    about = "Walk a Buzz artifact through its life"
)]
struct Args {
    /// Relay base URL: http(s)://host[:port].
    #[arg(long, default_value = "http://127.0.0.1:7777")]
    url: String,
    /// Hex secret key to sign with (default: a fresh key).
    #[arg(long)]
    key: Option<String>,
}

fn show(step: &str, event: &Event) {
    println!(
        "{step:<10} {} op={} h={} title={:?}",
        &event.id[..16],
        event.tag_value("op").unwrap_or("?"),
        event.tag_value("h").unwrap_or("?"),
        event.tag_value("title").unwrap_or("")
    );
}

async fn must(client: &ArtifactClient, step: &str, event: Event) -> anyhow::Result<Event> {
    match client.publish(&event).await? {
        Outcome::Accepted => {
            show(step, &event);
            Ok(event)
        }
        other => bail!("{step}: {other:?}"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let keys = match &args.key {
        Some(secret) => Keys::from_hex(secret).context("--key")?,
        None => Keys::generate(),
    };
    let me = keys.pubkey().to_owned();
    let client = ArtifactClient::new(&args.url, keys);
    println!("signing as {me}");
    let team = client.create_channel("team").await?;
    let archive = client.create_channel("archive").await?;

    let task = client.create(
        &team,
        "buzz.task",
        "Fix the payment timeout",
        &[("assignee", &me), ("status", "open")],
        &json!({"version": 1, "status": "open"}),
    );
    let v1 = must(&client, "create", task).await?;
    let d = v1.tag_value("d").unwrap_or_default().to_owned();
    let v2 = must(
        &client,
        "edit",
        client.next(
            &v1,
            "update",
            None,
            Some("Fix the payment timeout (p1)"),
            &json!({"version": 1, "status": "open", "priority": 1}),
        ),
    )
    .await?;
    // Editing from a stale copy loses: the relay answers conflict, and a careful client
    // reloads the current revision before trying again.
    let stale = client.next(
        &v1,
        "update",
        None,
        Some("stale edit"),
        &json!({"version": 1}),
    );
    match client.publish(&stale).await? {
        Outcome::Conflict(message) => println!("{:<10} {message}", "conflict"),
        other => bail!("a stale edit should conflict, got {other:?}"),
    }
    let current = client.current_of(&d).await?.context("current revision")?;
    let v3 = must(
        &client,
        "move",
        client.next(
            &current,
            "move",
            Some(&archive),
            None,
            &json!({"version": 1, "status": "open", "priority": 1}),
        ),
    )
    .await?;
    let v4 = must(
        &client,
        "delete",
        client.next(&v3, "delete", None, None, &json!(null)),
    )
    .await?;
    println!(
        "current after delete: {}",
        client.current_of(&d).await?.is_some()
    );
    let v5 = must(
        &client,
        "restore",
        client.restore(
            &v4,
            &v3,
            &json!({"version": 1, "status": "open", "priority": 1}),
        ),
    )
    .await?;
    let mine = client
        .list_current(json!({"#type": ["buzz.task"], "#assignee": [me], "#status": ["open"]}))
        .await?;
    println!("open tasks assigned to me: {}", mine.len());
    for event in &mine {
        show("current", event);
    }
    // Sync every current task with the stable manifest transport (NIP-AR snapshot).
    let synced = client
        .sync(json!({"artifact": "current", "#type": ["buzz.task"]}))
        .await?;
    println!(
        "sync: {} verified bodies over {} page(s), complete: {}",
        synced.bodies.len(),
        synced.pages,
        synced.complete
    );
    let _ = v2;
    let _ = v5;
    Ok(())
}
