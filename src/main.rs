//! `buzz-relay`: reads the config, hands core the plugins built into this binary
//! (`lib.rs`) and runs the relay, or one of the operator commands.

mod file_limit;
mod first_start;
mod logging;
mod redact;

use anyhow::Context;
use buzz_core::access::CommunityScripts;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginCatalog;
use buzz_core::relay::RelayBuilder;
use buzz_core::store::Store;
use buzz_policy::ScriptOrigin;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

mod plugin_command;
mod progress;
mod storage;

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
    /// Write every stored event (relay-signed ones included) as NIP-01 JSON lines to
    /// stdout, in arrival order: the format `import`, strfry and nostr-rs-relay read.
    Export {
        /// Only this community's events (default: every community).
        #[arg(long)]
        community: Option<String>,
        /// Only events created at or after this unix time.
        #[arg(long)]
        since: Option<i64>,
        /// Only events created at or before this unix time.
        #[arg(long)]
        until: Option<i64>,
    },
    /// Store JSON lines of signed events (FILE, or `-`/nothing for stdin) through the
    /// ingest pipeline as the community owner's import; prints imported / duplicate /
    /// invalid counts, invalid lines with their numbers.
    Import {
        /// The community to import into (default: the only configured one).
        #[arg(long)]
        community: Option<String>,
        file: Option<PathBuf>,
    },
    /// Copy the configured database (every table of core and of every built plugin) into
    /// an empty database of either backend, checked table by table.
    Copy {
        /// The destination, `sqlite://PATH` or `postgres://...`; migrated first, must be empty.
        #[arg(long)]
        to: String,
    },
    /// Write a consistent copy of the SQLite database to PATH while the relay runs.
    Backup { path: PathBuf },
    /// Validate or test Lua policies.
    Policy {
        #[command(subcommand)]
        action: PolicyCommand,
    },
    /// `<plugin> <command>`: a plugin's maintenance command (`media gc`, say), on the
    /// configured database, beside a running relay or not.
    #[command(external_subcommand)]
    Plugin(Vec<String>),
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Load a policy script in the sandbox and check its entry points; without FILE,
    /// every script of every community in the configuration.
    Check { file: Option<PathBuf> },
    /// Run data-driven fixtures (event/context → expected verdict) against the policies.
    Test {
        fixtures: PathBuf,
        /// Access script to test instead of the fixture's own set.
        #[arg(long)]
        access: Option<PathBuf>,
        /// Moderation script to test instead of the fixture's own set.
        #[arg(long)]
        moderation: Option<PathBuf>,
        /// Test the scripts this community runs (from the configuration).
        #[arg(long, conflicts_with_all = ["access", "moderation"])]
        community: Option<String>,
    },
}

/// Failures print one line with the cause chain (`error: reading x: no such file`) and
/// exit 1; a stack trace only when `RUST_BACKTRACE` asks for one.
fn main() -> std::process::ExitCode {
    no_huge_pages();
    let cli = Cli::parse();
    let result = tokio::runtime::Runtime::new()
        .context("starting the async runtime")
        .and_then(|runtime| runtime.block_on(run(cli)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
                eprintln!("{}", err.backtrace());
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// Transparent huge pages off for this process. mimalloc asks for huge pages on its arenas
/// (`MADV_HUGEPAGE`), and where the kernel grants them (THP `always` or `madvise`, as on
/// most distributions) a 2 MiB page is resident as soon as one byte of it is written: every
/// buffer a connection allocates then costs its whole size, never only the pages written
/// (actix-http's two 8 KiB buffers per connection are mostly untouched). Measured with
/// `examples/stock-client/idle-stages.mjs` on 10,000 idle WebSocket connections: 25.4 KB of
/// RSS per connection with huge pages, 17.4 KB without (docs/benchmarks.md "Idle
/// connections"). The flag covers every mapping of the process, whichever allocator made
/// it, from here on; a kernel without it (before 3.15) leaves things as they were.
fn no_huge_pages() {
    if let Err(err) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!(
            "warning: transparent huge pages stay on ({err}): idle connections cost more memory"
        );
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let catalog = buzz_relay::catalog();
    if let Some(Command::Policy { action }) = cli.command {
        logging::init(None)?;
        return policy(action, cli.config.as_deref(), &catalog);
    }
    let settings = catalog.load_settings(cli.config.as_deref())?;
    logging::init(Some(&settings.log))?;
    match cli.command {
        Some(Command::Migrate { status }) => migrate(&settings, &catalog, status).await,
        Some(Command::Identity { reset, claim }) => {
            identity(&settings, &catalog, reset, claim).await
        }
        Some(Command::Export {
            community,
            since,
            until,
        }) => storage::export(&settings, community, since, until).await,
        Some(Command::Import { community, file }) => {
            storage::import(settings, catalog, community, file).await
        }
        Some(Command::Copy { to }) => storage::copy(&settings, &catalog, to).await,
        Some(Command::Backup { path }) => storage::backup(&settings, path).await,
        Some(Command::Plugin(args)) => plugin_command::run(settings, catalog, args).await,
        Some(Command::Policy { .. }) | None => {
            serve(settings, catalog, cli.config.as_deref()).await
        }
    }
}

fn policy(
    action: PolicyCommand,
    config: Option<&std::path::Path>,
    catalog: &PluginCatalog,
) -> anyhow::Result<()> {
    match action {
        PolicyCommand::Check { file: Some(file) } => {
            let entry_points = buzz_policy::script_entry_points(&file)
                .with_context(|| format!("{} is not a usable policy", file.display()))?;
            println!("{}: ok ({})", file.display(), entry_points.join(", "));
            Ok(())
        }
        PolicyCommand::Check { file: None } => {
            let settings = catalog.load_settings(config)?;
            let mut broken = 0;
            for community in &settings.communities {
                let scripts = CommunityScripts::resolve(&settings, community);
                for (role, origin) in scripts.listing() {
                    match buzz_policy::origin_entry_points(origin) {
                        Ok(entries) => println!(
                            "{} {role}: {origin}: ok ({})",
                            scripts.host,
                            entries.join(", ")
                        ),
                        Err(err) => {
                            broken += 1;
                            println!("{} {role}: {origin}: BROKEN: {err}", scripts.host);
                        }
                    }
                }
            }
            match broken {
                0 => Ok(()),
                n => anyhow::bail!("{n} policy script(s) do not load"),
            }
        }
        PolicyCommand::Test {
            fixtures,
            access,
            moderation,
            community,
        } => {
            let (access, moderation) = match community {
                None => (access, moderation),
                Some(host) => community_files(config, catalog, &host)?,
            };
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

/// The script files community `host` runs. A compiled-in default has no file: the
/// fixtures' own default set (the shipped scripts) tests it.
fn community_files(
    config: Option<&std::path::Path>,
    catalog: &PluginCatalog,
    host: &str,
) -> anyhow::Result<(Option<PathBuf>, Option<PathBuf>)> {
    let settings = catalog.load_settings(config)?;
    let wanted = buzz_nostr::host::normalize_host(host);
    let community = settings
        .communities
        .iter()
        .find(|c| buzz_nostr::host::normalize_host(&c.host) == wanted)
        .ok_or_else(|| {
            let known: Vec<&str> = settings
                .communities
                .iter()
                .map(|c| c.host.as_str())
                .collect();
            anyhow::anyhow!(
                "no community {host} in the configuration (known: {})",
                known.join(", ")
            )
        })?;
    let scripts = CommunityScripts::resolve(&settings, community);
    let file = |origin: &ScriptOrigin| match origin {
        ScriptOrigin::File(path) => Some(path.clone()),
        ScriptOrigin::BuiltIn { .. } => None,
    };
    Ok((file(&scripts.access), file(&scripts.moderation)))
}

async fn serve(
    settings: Settings,
    catalog: PluginCatalog,
    config_flag: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let config = first_start::config_in_use(config_flag);
    // Before anything opens a descriptor: connections, the database, the listener.
    let files = file_limit::FileLimit::raise();
    let before = first_start::BeforeStart::look(&settings, config.as_deref(), files);
    let relay = RelayBuilder::new(settings.clone())
        .catalog(catalog)
        .start()
        .await?;
    first_start::announce(&relay, &settings, &before);
    relay.wait().await
}

async fn identity(
    settings: &Settings,
    catalog: &PluginCatalog,
    reset: bool,
    claim: bool,
) -> anyhow::Result<()> {
    let storage = &settings.storage;
    let store = Store::open(
        &storage.database_url,
        1,
        storage.auto_migrate,
        &catalog.migration_sets(),
    )
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
    let failed = |r: buzz_core::error::Reason| anyhow::anyhow!("relay identity: {r}");
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

async fn migrate(
    settings: &Settings,
    catalog: &PluginCatalog,
    status_only: bool,
) -> anyhow::Result<()> {
    let url = settings.storage.database_url.clone();
    let sets = catalog.migration_sets();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let migrations = Store::migrations(&url, &sets).context("opening database")?;
        if status_only {
            // `applied  <version>  <owner>`: core's tables or a plugin's.
            let status = migrations.status()?;
            for m in &status.applied {
                println!("applied  {}  {}", m.version, m.owner);
            }
            for m in &status.pending {
                println!("pending  {}  {}", m.version, m.owner);
            }
            println!(
                "{} applied, {} pending",
                status.applied.len(),
                status.pending.len()
            );
        } else {
            let done = migrations.run_pending()?;
            for m in &done {
                println!("applied  {}  {}", m.version, m.owner);
            }
            println!("{} migration(s) applied", done.len());
        }
        Ok(())
    })
    .await?
}
