//! The storage commands (`export`, `import`, `copy`, `backup`): each reports progress on
//! stderr and ends with one summary line; a failure is an `error:` line (printed by
//! `main`) and leaves the source as it was.

use crate::progress::{Bar, Units};
use anyhow::Context;
use buzz_core::config::Settings;
use buzz_core::import::import as import_lines;
use buzz_core::plugin::PluginCatalog;
use buzz_core::relay::RelayBuilder;
use buzz_core::store::transfer::{backup as backup_sql, copy as copy_sql, export as export_sql};
use buzz_core::store::Store;
use buzz_nostr::host::normalize_host;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

fn rate(n: u64, started: Instant) -> String {
    let secs = started.elapsed().as_secs_f64();
    format!("{secs:.1} s, {:.0}/s", n as f64 / secs.max(1e-9))
}

fn failed(what: &'static str) -> impl Fn(buzz_core::error::Reason) -> anyhow::Error {
    move |r| anyhow::anyhow!("{what}: {r}")
}

/// The community a storage command works on: the one named, else the only configured one.
fn community_host(settings: &Settings, named: Option<&str>) -> anyhow::Result<String> {
    if let Some(host) = named {
        return Ok(normalize_host(host));
    }
    match settings.communities.as_slice() {
        [only] => Ok(normalize_host(&only.host)),
        many => anyhow::bail!(
            "the configuration has {} communities: name one with --community HOST ({})",
            many.len(),
            many.iter()
                .map(|c| c.host.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `export`: stored events as JSON lines on stdout, in arrival order.
pub(crate) async fn export(
    settings: &Settings,
    community: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
) -> anyhow::Result<()> {
    let url = settings.storage.database_url.clone();
    let started = Instant::now();
    let (written, scope) = tokio::task::spawn_blocking(move || {
        Store::with_database(&url, |mut conn| {
            let community_id = match &community {
                None => None,
                Some(host) => {
                    let host = normalize_host(host);
                    match export_sql::community_by_host(&mut conn, &host)? {
                        Some(id) => Some(id),
                        None => {
                            let known = export_sql::community_hosts(&mut conn)?;
                            return Err(buzz_core::error::Reason::invalid(format!(
                                "no community {host} is stored (stored: {})",
                                known.join(", ")
                            )));
                        }
                    }
                }
            };
            let range = export_sql::ExportRange {
                community_id,
                since,
                until,
            };
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
            let written = export_sql::export(&mut conn, range, &mut out, &Bar::new(Units::Rows))?;
            Ok((
                written,
                community.unwrap_or_else(|| "all communities".into()),
            ))
        })
    })
    .await
    .context("export task")?
    .map_err(failed("export"))?;
    eprintln!(
        "exported {written} events ({scope}) in {}",
        rate(written, started)
    );
    Ok(())
}

/// `import`: JSON lines of signed events through the ingest pipeline.
pub(crate) async fn import(
    settings: Settings,
    catalog: PluginCatalog,
    community: Option<String>,
    file: Option<PathBuf>,
) -> anyhow::Result<()> {
    let host = community_host(&settings, community.as_deref())?;
    let (input, total): (Box<dyn BufRead + Send>, Option<u64>) = match &file {
        Some(path) if path.as_os_str() != "-" => {
            let f =
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(std::io::BufReader::with_capacity(1 << 20, f)), len)
        }
        _ => (
            Box::new(std::io::BufReader::with_capacity(1 << 20, std::io::stdin())),
            None,
        ),
    };
    let relay = RelayBuilder::new(settings)
        .catalog(catalog)
        .offline()
        .await?;
    let started = Instant::now();
    let refused = |line: u64, why: &str| eprintln!("line {line}: {why}");
    let outcome = import_lines(
        &relay,
        &host,
        input,
        total,
        &Bar::new(Units::Bytes),
        &refused,
    )
    .await;
    relay.shutdown().await;
    let report = outcome?;
    eprintln!(
        "imported {} events into {host}: {} duplicate, {} invalid, {} relay-authored skipped \
         ({} lines in {})",
        report.imported,
        report.duplicates,
        report.invalid,
        report.relay_authored,
        report.lines,
        rate(report.lines, started)
    );
    Ok(())
}

/// `copy --to URL`: every table into an empty database, checked.
pub(crate) async fn copy(
    settings: &Settings,
    catalog: &PluginCatalog,
    to: String,
) -> anyhow::Result<()> {
    let source = settings.storage.database_url.clone();
    let sets = catalog.migration_sets();
    let tables = catalog.tables();
    let derived = catalog.derived_tables();
    let started = Instant::now();
    let destination = to.clone();
    let report = tokio::task::spawn_blocking(move || {
        copy_sql::copy(
            &copy_sql::CopyPlan {
                source_url: &source,
                destination_url: &destination,
                plugin_sets: &sets,
                plugin_tables: &tables,
                derived_tables: &derived,
            },
            &Bar::new(Units::Rows),
        )
    })
    .await
    .context("copy task")?
    .map_err(|e| anyhow::anyhow!("copy to {}: {e}", crate::redact::without_password(&to)))?;
    for table in &report.tables {
        eprintln!(
            "  {:<12} {:<24} {:>10} rows",
            table.owner, table.table, table.rows
        );
    }
    eprintln!(
        "copied {} rows in {} tables to {}, each table checked (rows and checksum), in {}",
        report.rows(),
        report.tables.len(),
        crate::redact::without_password(&to),
        rate(report.rows(), started)
    );
    Ok(())
}

/// `backup PATH`: a consistent SQLite copy while the relay runs.
pub(crate) async fn backup(settings: &Settings, path: PathBuf) -> anyhow::Result<()> {
    let url = settings.storage.database_url.clone();
    let started = Instant::now();
    let target = path.clone();
    tokio::task::spawn_blocking(move || {
        Store::with_database(&url, |mut conn| backup_sql::backup(&mut conn, &target))
    })
    .await
    .context("backup task")?
    .map_err(failed("backup"))?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let _ = std::io::stderr().flush();
    eprintln!(
        "backed up {} to {} ({size} bytes) in {:.1} s",
        crate::redact::without_password(&settings.storage.database_url),
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
