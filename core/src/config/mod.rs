//! `config.toml`, read with the `config` crate. `config.example.toml` documents every key
//! with its default (a test keeps the two equal).
//!
//! Sources, later wins: built-in defaults, the TOML file, `BUZZ__SECTION__KEY`
//! environment overrides, then the aliases operators know from other tools
//! (`DATABASE_URL`, `REDIS_URL`, `BUZZ_AUTO_MIGRATE`, `BUZZ_RELAY_PRIVATE_KEY`) and those
//! each plugin declares for its own section.
//!
//! Relative paths (`relay.data_dir`, `policies.*`, a `sqlite://` database path) resolve
//! against the config file's directory when a file is read, else against the working
//! directory; a value set by an environment variable resolves against the working
//! directory. `[plugins.<name>]` sections are read here as they stand; the binary's
//! plugin catalog checks and completes them (`plugin::settings`): core knows no plugin,
//! and this module knows no catalog.
//!
//! Files: this one the settings' shape, `defaults.rs` the built-in values, `load.rs` the
//! sources and paths, `validate.rs` the checks across keys.

mod defaults;
mod load;
mod validate;

pub use load::EnvAlias;

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub server: ServerSettings,
    pub storage: StorageSettings,
    pub relay: RelaySettings,
    pub communities: Vec<CommunitySettings>,
    pub policies: PolicySettings,
    /// `[plugins.<name>]` sections, each with `enabled` and the plugin's own keys. After
    /// loading: one per built plugin, defaults filled in.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSection>,
    pub limits: LimitSettings,
    pub metrics: MetricsSettings,
    pub log: LogSettings,
}

/// `[log]`: how the relay writes its log (to stderr; stdout carries command output).
#[derive(Debug, Clone, Deserialize)]
pub struct LogSettings {
    /// `text` (for people) or `json` (one object per line, for collectors).
    pub format: LogFormat,
    /// Which events are written: a `tracing` filter (`info`, `warn,buzz_core=debug`, …).
    /// `RUST_LOG`, when set, replaces it.
    pub level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// `[metrics]`: Prometheus text at `GET /metrics`, on a bind of its own (off the public
/// port, so scrapers and `buzz-admin` reach it and clients do not).
#[derive(Debug, Clone, Deserialize)]
pub struct MetricsSettings {
    pub enabled: bool,
    /// `host:port` of the metrics listener (port 0: any free port; tests use it).
    pub bind: String,
    /// The metrics addresses (`host:port`) of every relay process that serves this
    /// database, for `buzz-admin`'s Overview; empty means this config's own `bind`.
    pub processes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ServerSettings {
    pub bind: String,
    /// `http` or `https`: the scheme clients use to address this relay from outside.
    pub public_scheme: String,
    /// actix worker threads; 0 = one per core.
    pub workers: usize,
    /// Seconds graceful shutdown waits for open requests.
    pub shutdown_timeout_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StorageSettings {
    pub database_url: String,
    pub redis_url: String,
    pub auto_migrate: bool,
    /// Read connections in the pool.
    pub pool_size: u32,
    /// Prefix of every Redis key and channel this relay uses.
    pub redis_prefix: String,
    /// Deadline of every Redis operation (connecting included), in milliseconds. A Redis
    /// that does not answer within it refuses the request (`error:` / 503).
    pub redis_timeout_ms: u64,
    /// PostgreSQL `statement_timeout` of the relay's sessions, in milliseconds (0 =
    /// none): the database cancels a longer statement, which answers `error:` / 503.
    pub statement_timeout_ms: u64,
    /// PostgreSQL `lock_timeout` of the relay's sessions, in milliseconds (0 = none).
    pub lock_timeout_ms: u64,
    /// SQLite: longest one read may run, in milliseconds (0 = none); past it the
    /// statement is interrupted and the request answers `blocked:`.
    pub read_timeout_ms: u64,
    /// A client whose read ran longer than this (milliseconds; 0 = never) is a slow
    /// reader for 10 s: slow readers' reads together use all read threads but one.
    pub slow_read_ms: u64,
    /// How often (seconds; 0 = never) each process deletes NIP-40-expired events and
    /// every row that references them, so they leave the disk, not only the answers.
    pub expired_purge_interval_secs: u64,
    /// Most expired events one purge transaction deletes; a tick runs batches until one
    /// comes back short, each its own writer job so ingest interleaves with them.
    pub expired_purge_batch: u32,
}

impl StorageSettings {
    /// `redis_timeout_ms` as the deadline of every Redis operation (at least 1 ms: a zero
    /// socket timeout is refused). Here, with the setting, so the relay's wiring and the
    /// access service's rate limiters read it alike.
    pub fn redis_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.redis_timeout_ms.max(1))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct RelaySettings {
    pub data_dir: PathBuf,
    pub private_key: String,
    pub name: String,
    pub description: String,
    pub contact: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CommunitySettings {
    pub host: String,
    pub name: String,
    #[serde(default)]
    pub owners: Vec<String>,
    #[serde(default = "yes")]
    pub open: bool,
    /// This community's own scripts; what it leaves out comes from `[policies]`.
    #[serde(default)]
    pub policies: CommunityPolicyFiles,
}

/// `policies = { access = "...", moderation = "...", shadow_access = "...",
/// shadow_moderation = "..." }` in a `[[communities]]` entry. The `shadow_*` scripts run
/// beside the enforced ones on live traffic and decide nothing (shadow mode).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CommunityPolicyFiles {
    pub access: Option<PathBuf>,
    pub moderation: Option<PathBuf>,
    pub shadow_access: Option<PathBuf>,
    pub shadow_moderation: Option<PathBuf>,
}

impl CommunityPolicyFiles {
    pub fn has_shadow(&self) -> bool {
        self.shadow_access.is_some() || self.shadow_moderation.is_some()
    }

    fn paths_mut(&mut self) -> [&mut Option<PathBuf>; 4] {
        [
            &mut self.access,
            &mut self.moderation,
            &mut self.shadow_access,
            &mut self.shadow_moderation,
        ]
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
pub struct PolicySettings {
    /// false = no policy scripts run: only core's transport rules apply (benchmarks,
    /// fully trusted deployments).
    pub enabled: bool,
    pub access: PathBuf,
    pub moderation: PathBuf,
    /// Set when `access` is the default path (no file or variable named it): a missing
    /// file then means "run the scripts compiled into the binary" instead of an error.
    #[serde(skip)]
    pub access_is_default: bool,
    /// As `access_is_default`, for `moderation`.
    #[serde(skip)]
    pub moderation_is_default: bool,
    /// Lua instructions one policy call may run before it is stopped (denied).
    pub instruction_budget: u64,
    /// Memory one Lua state may use, bytes.
    pub memory_bytes: usize,
    /// Wall time one policy call may take, pattern matching included; over it the call
    /// is denied (`error: policy failure`) and its Lua state discarded.
    pub call_timeout_ms: u64,
    /// Wall time loading a script (its main chunk) may take; over it the load fails and
    /// the last good script stays.
    pub load_timeout_ms: u64,
    /// How often the scripts are checked for changes (hot reload), milliseconds.
    pub reload_poll_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LimitSettings {
    /// Largest WebSocket frame or HTTP body accepted, in bytes.
    pub max_message_bytes: usize,
    pub max_content_bytes: usize,
    pub max_event_tags: usize,
    /// Values all tags of one event may hold together (tag names included).
    pub max_tag_values: usize,
    /// Allowed `created_at` distance from relay time, seconds.
    pub max_clock_skew_secs: i64,
    pub max_subscriptions: usize,
    pub max_filters: usize,
    /// Largest `limit` honoured; also the default when a filter has none.
    pub max_limit: u64,
    /// Messages queued for one WebSocket client. Live events that find it full, or a
    /// REQ answer that waits `outbound_stall_secs` for room, disconnect the client.
    pub max_outbound_queue: usize,
    /// Bytes queued for one WebSocket client (same rules as `max_outbound_queue`).
    pub max_outbound_bytes: usize,
    /// Bytes queued for all WebSocket clients of this process together.
    pub max_outbound_bytes_total: usize,
    /// Seconds a connection with queued output may go without the client reading any
    /// of it (or a REQ answer may wait for room) before it is closed.
    pub outbound_stall_secs: u64,
    /// EVENT messages one connection may have in flight at once.
    pub max_inflight_events: usize,
    /// Refused messages (`NOTICE`, `CLOSED`, `OK false`, `NEG-ERR`) one WebSocket
    /// connection may cost per second; after a burst of five seconds' worth its next
    /// message is read later (0 = no bound).
    pub refusals_per_sec: u32,
    /// Values one filter may hold: ids, authors, kinds and every `#tag` list together.
    pub max_filter_values: usize,
    /// Values all filters of one REQ or `POST /query` may hold together.
    pub max_query_values: usize,
    /// JSON bytes of the filters of all open subscriptions of one WebSocket connection.
    pub max_filter_bytes: usize,
    /// Bytes all HTTP request bodies still being received may hold together; a body
    /// that finds no room is refused with 503 before it is read.
    pub max_pending_body_bytes: usize,
    /// Seconds an HTTP request body may take to arrive once its headers are in (408).
    pub body_timeout_secs: u64,
    /// Storage reads one client (its pubkey, else its connection) may have running or queued;
    /// the next is refused `rate-limited:` (0 = no bound).
    pub max_reads_per_client: usize,
    /// Events one COUNT counts (at least 1); past it the answer is this number with
    /// NIP-45 `"approximate": true`.
    pub max_count: u64,
    /// Bytes (content + tags JSON) one pubkey may hold in a community in stored events
    /// that carry a NIP-40 `expiration` and have not expired; an expiring event past it
    /// is refused `rate-limited:` (0 = no bound). Expiring bytes are what a purge
    /// interval lets pile up.
    pub max_expiring_bytes_per_pubkey: u64,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
pub struct PluginSection {
    /// `None` until the catalog completes the section with the plugin's default.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Everything else in the section, for the plugin to read.
    #[serde(flatten)]
    pub options: Map<String, Value>,
}

impl Settings {
    /// The section of plugin `name` (a disabled, empty one when absent).
    pub fn plugin(&self, name: &str) -> PluginSection {
        self.plugins.get(name).cloned().unwrap_or_default()
    }
}

impl PluginSection {
    /// Whether the plugin runs (a section the catalog has not completed: only when it
    /// says so).
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(false)
    }
}
