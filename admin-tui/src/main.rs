//! `buzz-admin`: what an operator needs to see about a relay, read from the same config
//! and database the relay uses — migrations, communities and their channels and events,
//! plugins, policy scripts. (The interactive ratatui console grows from this report.)

mod report;

use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "buzz-admin", version, about = "Buzz relay admin console")]
struct Cli {
    /// Path to the relay's config.toml (default: ./config.toml if present, else defaults).
    #[arg(long)]
    config: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The relay binary's own plugin list: the same sections, tables and panels.
    let catalog = buzz_relay::catalog();
    let settings = buzz_core::config::Settings::load(cli.config.as_deref(), &catalog)?;
    let report = report::Report::gather(&settings, &catalog)?;
    print!("{report}");
    Ok(())
}
