//! Storage and settings for a benchmark's relay, shared by the example benchmarks.

use super::PgDatabase;
use crate::config::Settings;
use crate::plugin::PluginCatalog;
use anyhow::Context;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Default settings on 127.0.0.1:0 over the storage a benchmark was pointed at; keeps its
/// scratch data alive for as long as it lives.
pub struct BenchStorage {
    pub settings: Settings,
    /// `"sqlite"` or `"postgres"`, for printing.
    pub backend: &'static str,
    _dir: tempfile::TempDir,
    _scratch: Option<PgDatabase>,
}

impl BenchStorage {
    /// `None`: SQLite in a temporary directory. A `postgres://` URL is an admin URL: a
    /// scratch database is made there (and dropped with this value). A `sqlite://` URL is
    /// used as given, its relay key kept beside it so a later run signs as the same relay
    /// (a database refuses a second relay key).
    pub async fn new(database_url: Option<&str>) -> anyhow::Result<BenchStorage> {
        let dir = tempfile::tempdir().context("temp dir")?;
        let mut scratch = None;
        let mut data_dir = dir.path().to_path_buf();
        let (url, backend) = match database_url {
            None => (
                format!("sqlite://{}", dir.path().join("bench.db").display()),
                "sqlite",
            ),
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                let admin = url.to_owned();
                let db = tokio::task::spawn_blocking(move || PgDatabase::create(&admin))
                    .await
                    .context("creating scratch database")??;
                let url = db.url.clone();
                scratch = Some(db);
                (url, "postgres")
            }
            Some(url) => {
                let path = url.strip_prefix("sqlite://").unwrap_or(url);
                data_dir = Path::new(path)
                    .parent()
                    .filter(|dir| !dir.as_os_str().is_empty())
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
                (url.to_owned(), "sqlite")
            }
        };
        // Plugin sections are completed by the catalog the benchmark starts its relay with.
        let mut settings = PluginCatalog::new().load_settings_from(None, &HashMap::new())?;
        settings.server.bind = "127.0.0.1:0".into();
        settings.metrics.bind = "127.0.0.1:0".into();
        settings.storage.database_url = url;
        settings.relay.data_dir = data_dir;
        // The default policy paths are relative to the repository root; run from
        // elsewhere, use the repository's policies all the same (their cost counts).
        if !settings.policies.access.exists() {
            let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
            settings.policies.access = policies.join("access.lua");
            settings.policies.moderation = policies.join("moderation.lua");
        }
        Ok(BenchStorage {
            settings,
            backend,
            _dir: dir,
            _scratch: scratch,
        })
    }
}

impl BenchStorage {
    /// Keep the scratch PostgreSQL database (if any) instead of dropping it, so its plans
    /// can be inspected after the run; returns its URL.
    pub fn keep_database(&mut self) -> Option<String> {
        self._scratch.take().map(PgDatabase::keep)
    }
}

/// The `pct`th percentile of `sorted` latencies (nearest rank, clamped to the last;
/// zero for none), as the benchmarks print them.
pub fn percentile(sorted: &[std::time::Duration], pct: usize) -> std::time::Duration {
    let index = (sorted.len() * pct / 100).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or_default()
}

/// utime + stime of a `/proc/.../stat` file (`/proc/self/stat` for this process,
/// `/proc/thread-self/stat` for the calling thread), in seconds; 0 where there is no
/// `/proc`. Clock-tick resolution (1/100 s).
pub fn cpu_secs(path: &str) -> f64 {
    /// Clock ticks per second of `/proc` times (`CLK_TCK`, 100 on Linux).
    const TICKS_PER_SEC: f64 = 100.0;
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces and parentheses) start at
    // field 3; utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / TICKS_PER_SEC
}
