//! What the relay says once it is up, so an operator never has to guess: where it
//! listens, which communities and plugins it serves, where its data and key live, and
//! how to open the console, and the open-file limit it raised (`file_limit.rs`). A start
//! that created the data directory says so.

use crate::file_limit::FileLimit;
use buzz_core::config::{LogFormat, Settings};
use buzz_core::relay::RunningRelay;
use std::path::{Path, PathBuf};

/// What was true before the relay started: the configuration file it read (if any), and
/// whether the data directory was already there; and the open-file limit raised first.
pub(crate) struct BeforeStart {
    config: Option<PathBuf>,
    data_dir_existed: bool,
    files: FileLimit,
}

impl BeforeStart {
    /// `config`: the file `PluginCatalog::load_settings` read (the `--config` path, or `./config.toml`
    /// when present).
    pub(crate) fn look(
        settings: &Settings,
        config: Option<&Path>,
        files: FileLimit,
    ) -> BeforeStart {
        BeforeStart {
            config: config.map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())),
            data_dir_existed: settings.relay.data_dir.exists(),
            files,
        }
    }
}

/// The config file a start without `--config` reads.
pub(crate) fn config_in_use(flag: Option<&Path>) -> Option<PathBuf> {
    match flag {
        Some(path) => Some(path.to_path_buf()),
        None => Some(PathBuf::from("config.toml")).filter(|p| p.exists()),
    }
}

/// Say it once: a block of lines on stderr in text mode, one structured event in JSON
/// mode (a log collector reads fields, not a banner).
pub(crate) fn announce(relay: &RunningRelay, settings: &Settings, before: &BeforeStart) {
    let facts = Facts::of(relay, settings, before);
    match settings.log.format {
        LogFormat::Text => eprintln!("{}", facts.text()),
        LogFormat::Json => tracing::info!(
            websocket = %facts.websocket,
            http = %facts.http,
            metrics = %facts.metrics,
            communities = %facts.communities.join(", "),
            plugins = %facts.plugins.join(", "),
            database = %facts.database,
            data_dir = %facts.data_dir,
            open_files = %facts.open_files,
            relay_key = %facts.key,
            relay_pubkey = %relay.pubkey(),
            console = %facts.console,
            config = %facts.config,
            created_data_dir = facts.created,
            "relay started"
        ),
    }
}

struct Facts {
    websocket: String,
    http: String,
    metrics: String,
    communities: Vec<String>,
    plugins: Vec<String>,
    database: String,
    data_dir: String,
    open_files: String,
    key: String,
    console: String,
    config: String,
    created: bool,
}

impl Facts {
    fn of(relay: &RunningRelay, settings: &Settings, before: &BeforeStart) -> Facts {
        let addr = relay.addr;
        let data_dir = std::path::absolute(&settings.relay.data_dir)
            .unwrap_or_else(|_| settings.relay.data_dir.clone());
        let key = if settings.relay.private_key.is_empty() {
            data_dir.join("relay.key").display().to_string()
        } else {
            "relay.private_key (configuration)".to_owned()
        };
        let console = match &before.config {
            Some(path) => format!("buzz-admin --config {}", path.display()),
            None => "buzz-admin (from this directory: same built-in defaults)".to_owned(),
        };
        Facts {
            websocket: format!("ws://{addr}/"),
            http: format!("http://{addr}/ (NIP-11, POST /query, POST /events)"),
            metrics: relay
                .metrics_addr
                .map_or("off".to_owned(), |m| format!("http://{m}/metrics")),
            communities: settings
                .communities
                .iter()
                .map(|c| {
                    format!(
                        "{} ({})",
                        c.host,
                        if c.open { "open" } else { "members only" }
                    )
                })
                .collect(),
            plugins: settings
                .plugins
                .iter()
                .filter(|(_, section)| section.enabled == Some(true))
                .map(|(name, _)| name.clone())
                .collect(),
            database: crate::redact::without_password(&settings.storage.database_url),
            data_dir: data_dir.display().to_string(),
            open_files: before.files.describe(),
            key,
            console,
            config: before.config.as_ref().map_or_else(
                || "none (built-in defaults)".to_owned(),
                |p| p.display().to_string(),
            ),
            created: !before.data_dir_existed,
        }
    }

    fn text(&self) -> String {
        let mut lines = vec![
            "buzz-relay is up".to_owned(),
            format!("  websocket    {}", self.websocket),
            format!("  http         {}", self.http),
            format!("  metrics      {}", self.metrics),
            format!("  communities  {}", self.communities.join(", ")),
            format!("  plugins      {}", self.plugins.join(", ")),
            format!("  database     {}", self.database),
            format!("  data         {}", self.data_dir),
            format!("  open files   {}", self.open_files),
            format!("  relay key    {}", self.key),
            format!("  config       {}", self.config),
            format!("  console      {}", self.console),
        ];
        if self.created {
            lines.push(format!(
                "  (first start: created {} for the database and the relay key)",
                self.data_dir
            ));
        }
        lines.join("\n")
    }
}
