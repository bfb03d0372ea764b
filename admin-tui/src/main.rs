//! `buzz-admin`: the operator's console for a Buzz relay, started with the relay's own
//! config. Interactive (ratatui) on a terminal: Overview (live, from every relay
//! process's `/metrics`), Migrations, Plugins, Policies and Moderation (through NIP-86).
//! `--report` (or a stdout that is not a terminal) prints the one-shot text report.
//!
//! The console itself is the `buzz_admin` library (`lib.rs`), so its panes are tested
//! on a `TestBackend`.

use buzz_admin::{console, data};

use anyhow::Context;
use clap::Parser;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "buzz-admin", version, about = "Buzz relay admin console")]
struct Cli {
    /// Path to the relay's config.toml (default: ./config.toml if present, else defaults).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the one-shot text report and exit (also when stdout is not a terminal).
    #[arg(long)]
    report: bool,
    /// File holding a community owner's secret key (64 hex), used to sign NIP-86
    /// moderation calls; `BUZZ_ADMIN_KEY` may hold the key instead. Without either,
    /// moderation is read-only.
    #[arg(long)]
    key_file: Option<PathBuf>,
}

fn owner_key(cli: &Cli) -> anyhow::Result<Option<buzz_nostr::keys::Keys>> {
    let secret = match &cli.key_file {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => std::env::var("BUZZ_ADMIN_KEY")
            .ok()
            .filter(|k| !k.is_empty()),
    };
    secret
        .map(|s| buzz_nostr::keys::Keys::from_hex(s.trim()).context("the owner key"))
        .transpose()
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The relay binary's own plugin list: the same sections, tables and panels.
    let catalog = buzz_relay::catalog();
    let settings = catalog.load_settings(cli.config.as_deref())?;
    if cli.report || !std::io::stdout().is_terminal() {
        let report = data::report::Report::gather(&settings, &catalog)?;
        print!("{report}");
        return Ok(());
    }
    let owner = owner_key(&cli)?;
    console::run(settings, catalog, owner)
}
