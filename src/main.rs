//! `buzz-relay`: reads the config, registers the plugins built into this binary and runs
//! the core relay. Core knows no plugin; this file is where they meet.

use anyhow::Context;
use buzz_core::config::Settings;
use buzz_core::relay::RelayBuilder;
use buzz_core::store::Store;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// mimalloc: ingest allocates many small buffers on one thread and frees them on another
/// (worker → writer → worker); glibc's malloc spends a tenth of the ingest path on that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Print the relay public key this database belongs to (the first relay to open it
    /// records its key; relays with another key refuse to start).
    Identity {
        /// Forget the recorded key, so that the next relay to start records its own.
        #[arg(long, conflicts_with = "claim")]
        reset: bool,
        /// Record this configuration's relay key, as starting the relay does.
        #[arg(long)]
        claim: bool,
    },
    /// Validate or test Lua policies.
    Policy {
        #[command(subcommand)]
        action: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Load a policy script in the sandbox and check its entry points.
    Check { file: PathBuf },
    /// Run data-driven fixtures (event/context → expected verdict) against the policies.
    Test {
        fixtures: PathBuf,
        /// Access script to test instead of the fixture's own set.
        #[arg(long)]
        access: Option<PathBuf>,
        /// Moderation script to test instead of the fixture's own set.
        #[arg(long)]
        moderation: Option<PathBuf>,
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
    if let Some(Command::Policy { action }) = cli.command {
        return policy(action);
    }
    let settings = Settings::load(cli.config.as_deref())?;
    match cli.command {
        Some(Command::Migrate { status }) => migrate(&settings, status).await,
        Some(Command::Identity { reset, claim }) => identity(&settings, reset, claim).await,
        Some(Command::Policy { .. }) | None => serve(settings).await,
    }
}

fn policy(action: PolicyCommand) -> anyhow::Result<()> {
    match action {
        PolicyCommand::Check { file } => {
            let entry_points = buzz_policy::script_entry_points(&file)
                .with_context(|| format!("{} is not a usable policy", file.display()))?;
            println!("{}: ok ({})", file.display(), entry_points.join(", "));
            Ok(())
        }
        PolicyCommand::Test {
            fixtures,
            access,
            moderation,
        } => {
            let options = buzz_policy::FixtureOptions {
                access,
                moderation,
                ..Default::default()
            };
            let report = buzz_policy::run_fixtures(&fixtures, &options)
                .with_context(|| format!("running {}", fixtures.display()))?;
            for case in report.failures() {
                println!(
                    "FAIL {}: expected {}, got {}",
                    case.name, case.expected, case.actual
                );
            }
            println!("{} passed, {} failed", report.passed(), report.failed());
            if report.is_success() {
                Ok(())
            } else {
                anyhow::bail!("{} fixture case(s) failed", report.failed())
            }
        }
    }
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let relay = RelayBuilder::new(settings)
        .plugin(buzz_channel_windows::NAME, buzz_channel_windows::factory)
        .start()
        .await?;
    println!(
        "buzz-relay listening on ws://{} (relay pubkey {})",
        relay.addr,
        relay.pubkey()
    );
    relay.wait().await
}

async fn identity(settings: &Settings, reset: bool, claim: bool) -> anyhow::Result<()> {
    let storage = &settings.storage;
    let store = Store::open(&storage.database_url, 1, storage.auto_migrate)
        .await
        .context("opening storage")?;
    let outcome = identity_action(&store, settings, reset, claim).await;
    store.shutdown().await;
    println!("{}", outcome?);
    Ok(())
}

async fn identity_action(
    store: &Store,
    settings: &Settings,
    reset: bool,
    claim: bool,
) -> anyhow::Result<String> {
    let failed = |r: buzz_core::error::Reason| anyhow::anyhow!("relay identity: {}", r.wire_text());
    if claim {
        let (keys, source) = buzz_core::relay::relay_keys(settings)?;
        buzz_core::relay::claim_identity(store, &keys, &source).await?;
        return Ok(format!("database belongs to relay {}", keys.pubkey()));
    }
    Ok(match (reset, store.identity().await.map_err(failed)?) {
        (false, Some(pubkey)) => pubkey,
        (false, None) => "no relay key recorded yet".to_owned(),
        (true, recorded) => {
            store.reset_identity().await.map_err(failed)?;
            match recorded {
                Some(pubkey) => format!("forgot relay key {pubkey}"),
                None => "no relay key was recorded".to_owned(),
            }
        }
    })
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
