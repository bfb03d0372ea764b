//! `buzz-relay`: reads the config, registers the plugins built into this binary and runs
//! the core relay. Core knows no plugin; this file is where they meet.

use anyhow::Context;
use buzz_core::config::Settings;
use buzz_core::relay::RelayBuilder;
use buzz_core::store::Store;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "buzz-relay", version, about = "Team chat relay over Nostr")]
struct Cli {
    /// Path to config.toml (default: ./config.toml if present, else built-in defaults).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending database migrations and exit.
    Migrate {
        /// Print applied and pending migrations instead of applying.
        #[arg(long)]
        status: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,actix_server=warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let settings = Settings::load(cli.config.as_deref())?;
    match cli.command {
        Some(Command::Migrate { status }) => migrate(&settings, status).await,
        None => serve(settings).await,
    }
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let relay = RelayBuilder::new(settings).start().await?;
    println!(
        "buzz-relay listening on ws://{} (relay pubkey {})",
        relay.addr,
        relay.pubkey()
    );
    relay.wait().await
}

async fn migrate(settings: &Settings, status_only: bool) -> anyhow::Result<()> {
    let url = settings.storage.database_url.clone();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let migrations = Store::migrations(&url).context("opening database")?;
        if status_only {
            let status = migrations.status()?;
            for name in &status.applied {
                println!("applied  {name}");
            }
            for name in &status.pending {
                println!("pending  {name}");
            }
            println!(
                "{} applied, {} pending",
                status.applied.len(),
                status.pending.len()
            );
        } else {
            let done = migrations.run_pending()?;
            for name in &done {
                println!("applied  {name}");
            }
            println!("{} migration(s) applied", done.len());
        }
        Ok(())
    })
    .await?
}
