//! `window-client`: page a channel (and optionally a thread) through NIP-CW windows and
//! print every validated page.
//!
//! ```text
//! cargo run -p buzz-window-client -- --url http://127.0.0.1:7777 \
//!     --channel <uuid> [--root <event id>] [--key <hex secret>] [--limit 50] \
//!     [--transport http|ws]
//! ```

use anyhow::Context;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_window_client::{Transport, WindowClient};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "window-client",
    about = "Page a Buzz channel and thread via NIP-CW windows"
)]
struct Args {
    /// Relay base URL: http(s)://host[:port].
    #[arg(long, default_value = "http://127.0.0.1:7777")]
    url: String,
    /// Channel id (the `h` tag).
    #[arg(long)]
    channel: String,
    /// Root event id of a thread to page as well.
    #[arg(long)]
    root: Option<String>,
    /// Hex secret key to authenticate with (default: a fresh key).
    #[arg(long)]
    key: Option<String>,
    /// Rows per page.
    #[arg(long, default_value_t = 50)]
    limit: u64,
    /// http (NIP-98 POST /query) or ws (NIP-42 WebSocket REQ).
    #[arg(long, default_value = "http")]
    transport: Transport,
}

fn line(event: &Event) -> String {
    let text: String = event.content.chars().take(60).collect();
    format!(
        "  {} {} {}… {}",
        event.created_at,
        &event.id[..16],
        &event.pubkey[..8],
        text.replace('\n', " ")
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let keys = match &args.key {
        Some(secret) => Keys::from_hex(secret).context("--key")?,
        None => Keys::generate(),
    };
    println!("reader {}", keys.pubkey());
    let mut client = WindowClient::connect(&args.url, keys, args.transport).await?;
    println!("relay {} (NIP-11 self)", client.relay_pubkey());

    let rows = client
        .page_channel(&args.channel, args.limit, |n, page| {
            println!(
                "channel page {n}: {} rows, {} aux, {} summaries, has_more={} next={:?}",
                page.rows.len(),
                page.aux.len(),
                page.summaries.len(),
                page.bounds.has_more,
                page.bounds.next_cursor
            );
            for row in &page.rows {
                println!("{}", line(row));
            }
        })
        .await?;
    println!("channel {}: {} top-level rows", args.channel, rows.len());

    if let Some(root) = &args.root {
        let replies = client
            .page_thread(&args.channel, root, args.limit, |n, page| {
                println!(
                    "thread page {n}: {} replies, {} aux, has_more={} next={:?}",
                    page.rows.len(),
                    page.aux.len(),
                    page.bounds.has_more,
                    page.bounds.next_cursor
                );
                for row in &page.rows {
                    println!("{}", line(row));
                }
            })
            .await?;
        println!("thread {root}: {} replies", replies.len());
    }
    Ok(())
}
