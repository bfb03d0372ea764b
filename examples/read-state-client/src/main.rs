//! `read-state-client`: show the sidebar, mark a view read, follow a thread.
//!
//! ```text
//! read-state-client --relay http://127.0.0.1:7777 --host localhost:7777 --key <hex> sidebar
//! read-state-client ... mark <channel-id> <message-id> [--root <root-id>]
//! read-state-client ... mark-channel <channel-id> <message-id>
//! read-state-client ... follow <channel-id> <root-id>
//! ```

use anyhow::Context;
use buzz_nostr::keys::Keys;
use buzz_read_state_client as rs;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "A tiny client of the /buzz/v1 read-state API")]
struct Cli {
    /// Where the relay listens.
    #[arg(long, default_value = "http://127.0.0.1:7777")]
    relay: String,
    /// Host header (picks the community); default: the relay URL's authority.
    #[arg(long)]
    host: Option<String>,
    /// Secret key, 64 hex.
    #[arg(long)]
    key: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every sidebar page.
    Sidebar,
    /// Mark a timeline (or, with --root, a thread) read through a message.
    Mark {
        channel: String,
        message: String,
        #[arg(long)]
        root: Option<String>,
    },
    /// Mark the whole channel, threads included, read through a message.
    MarkChannel { channel: String, message: String },
    /// Follow a thread.
    Follow { channel: String, root: String },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let keys = Keys::from_hex(&cli.key).context("--key")?;
    let host = match cli.host {
        Some(h) => h,
        None => cli
            .relay
            .split("://")
            .nth(1)
            .unwrap_or(&cli.relay)
            .trim_end_matches('/')
            .to_owned(),
    };
    let client = rs::Client::new(&cli.relay, &host, keys);
    match cli.command {
        Command::Sidebar => {
            let mut cursor: Option<String> = None;
            loop {
                let page = client.sidebar(20, cursor.as_deref()).await?;
                anyhow::ensure!(page.status == 200, "sidebar: {} {}", page.status, page.body);
                for row in page.body["channels"].as_array().into_iter().flatten() {
                    println!(
                        "{} #{} unread={} mentions={} threads={}",
                        row["channel_id"].as_str().unwrap_or("?"),
                        row["name"].as_str().unwrap_or("?"),
                        row["unread"],
                        row["mentions"],
                        row["threads"].as_array().map_or(0, Vec::len)
                    );
                }
                match page.body["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
        }
        Command::Mark {
            channel,
            message,
            root,
        } => report(
            client
                .intents(&[rs::mark_through(&channel, root.as_deref(), &message)])
                .await?,
        )?,
        Command::MarkChannel { channel, message } => report(
            client
                .intents(&[rs::mark_channel_read(&channel, &message)])
                .await?,
        )?,
        Command::Follow { channel, root } => {
            report(client.intents(&[rs::follow(&channel, &root)]).await?)?
        }
    }
    Ok(())
}

fn report(answer: rs::Answer) -> anyhow::Result<()> {
    anyhow::ensure!(answer.status == 200, "{} {}", answer.status, answer.body);
    for outcome in answer.body["results"].as_array().into_iter().flatten() {
        println!("{outcome}");
    }
    Ok(())
}
