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
//! directory. `[plugins.<name>]` sections are checked and completed by the binary's
//! [`PluginCatalog`]: core knows no plugin.

use crate::plugin::PluginCatalog;
use anyhow::Context;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

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

const DEFAULTS: &str = r#"
[server]
bind = "127.0.0.1:7777"
public_scheme = "http"
workers = 0
shutdown_timeout_secs = 10

[storage]
database_url = "sqlite://./data/buzz.db"
redis_url = ""
auto_migrate = true
pool_size = 8
redis_prefix = "buzz"
redis_timeout_ms = 2000
statement_timeout_ms = 8000
lock_timeout_ms = 2000

[relay]
data_dir = "./data"
private_key = ""
name = "Buzz relay"
description = "Team chat over Nostr: communities, channels, threads."
contact = ""

[policies]
enabled = true
access = "policies/access.lua"
moderation = "policies/moderation.lua"
instruction_budget = 1000000
memory_bytes = 8388608
call_timeout_ms = 50
load_timeout_ms = 1000
reload_poll_ms = 1000

[limits]
max_message_bytes = 524288
max_content_bytes = 262144
max_event_tags = 2000
max_tag_values = 10000
max_clock_skew_secs = 900
max_subscriptions = 64
max_filters = 16
max_limit = 500
max_outbound_queue = 1024
max_outbound_bytes = 4194304
max_outbound_bytes_total = 268435456
outbound_stall_secs = 30
max_inflight_events = 64
max_filter_values = 2000
max_query_values = 4000
max_filter_bytes = 1048576
max_pending_body_bytes = 67108864
body_timeout_secs = 10

[metrics]
enabled = true
bind = "127.0.0.1:7778"
processes = []

[log]
format = "text"
level = "info,actix_server=warn"
"#;

const DEFAULT_COMMUNITY: &str = r#"
[[communities]]
host = "localhost"
name = "Local"
owners = []
open = true
"#;

/// Keys whose relative paths resolve against the config file's directory.
const PATH_KEYS: [(&str, &str); 4] = [
    ("relay", "data_dir"),
    ("policies", "access"),
    ("policies", "moderation"),
    ("storage", "database_url"),
];

impl Settings {
    /// Load from `path` (or `./config.toml` when present, else defaults) plus the
    /// environment, with the plugin sections checked and completed by `catalog`.
    pub fn load(path: Option<&Path>, catalog: &PluginCatalog) -> anyhow::Result<Settings> {
        let file = match path {
            Some(p) => {
                if !p.exists() {
                    anyhow::bail!("config file {} does not exist", p.display());
                }
                Some(p.to_path_buf())
            }
            None => Some(PathBuf::from("config.toml")).filter(|p| p.exists()),
        };
        let env: HashMap<String, String> = std::env::vars().collect();
        Self::load_from(file.as_deref(), &env, catalog)
    }

    /// Like [`Settings::load`], with the environment supplied as a map (tests pass their
    /// own so they never race on the process environment).
    pub fn load_from(
        file: Option<&Path>,
        env: &HashMap<String, String>,
        catalog: &PluginCatalog,
    ) -> anyhow::Result<Settings> {
        // Absolute, so that paths resolved against its directory are absolute too.
        let file = file.map(std::path::absolute).transpose()?;
        let file = file.as_deref();
        Self::read(file, env, catalog).with_context(|| match file {
            Some(p) => format!("configuration {}", p.display()),
            None => "built-in configuration".to_owned(),
        })
    }

    fn read(
        file: Option<&Path>,
        env: &HashMap<String, String>,
        catalog: &PluginCatalog,
    ) -> anyhow::Result<Settings> {
        let mut builder = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml));
        let mut file_keys = toml::Table::new();
        if let Some(p) = file {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            file_keys = text.parse::<toml::Table>().context("not valid TOML")?;
            builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
        }
        if !file_keys.contains_key("communities") {
            builder = builder.add_source(config::File::from_str(
                DEFAULT_COMMUNITY,
                config::FileFormat::Toml,
            ));
        }
        let overrides: HashMap<String, String> = env
            .iter()
            .filter(|(k, _)| k.starts_with("BUZZ__"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        builder = builder.add_source(
            config::Environment::with_prefix("BUZZ")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .source(Some(overrides.clone())),
        );
        // Keys an environment variable set: their relative paths stay relative to the
        // working directory.
        let mut env_keys: Vec<String> = overrides
            .keys()
            .map(|k| k["BUZZ__".len()..].to_ascii_lowercase().replace("__", "."))
            .collect();
        let plugin_aliases = catalog.entries().iter().flat_map(|entry| {
            entry
                .env_aliases
                .iter()
                .map(move |(var, key)| (*var, format!("plugins.{}.{key}", entry.name)))
        });
        let aliases = CORE_ALIASES
            .iter()
            .map(|(var, key)| (*var, (*key).to_owned()))
            .chain(plugin_aliases);
        for (var, key) in aliases {
            if let Some(value) = env.get(var) {
                builder = builder.set_override(key.as_str(), parse_scalar(value))?;
                env_keys.push(key);
            }
        }
        let mut settings: Settings = builder
            .build()
            .context("reading configuration")?
            .try_deserialize()
            .context("a key has a wrong or missing value")?;
        let named = |section: &str, key: &str| {
            env_keys.iter().any(|k| k == &format!("{section}.{key}"))
                || file_keys
                    .get(section)
                    .and_then(|t| t.as_table())
                    .is_some_and(|t| t.contains_key(key))
        };
        settings.policies.access_is_default = !named("policies", "access");
        settings.policies.moderation_is_default = !named("policies", "moderation");
        if let Some(dir) = file.and_then(Path::parent) {
            let from_env = |section: &str, key: &str| {
                env_keys.iter().any(|k| k == &format!("{section}.{key}"))
            };
            settings.resolve_paths(dir, |section, key| !from_env(section, key));
        }
        settings.validate()?;
        settings.plugins = catalog.complete(&settings.plugins)?;
        Ok(settings)
    }

    /// Make relative paths absolute against `dir` for the keys `applies` accepts.
    fn resolve_paths(&mut self, dir: &Path, applies: impl Fn(&str, &str) -> bool) {
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() && !dir.as_os_str().is_empty() {
                *path = dir.join(&*path);
            }
        };
        // Communities come from the file only: their scripts live beside it.
        for community in &mut self.communities {
            for path in community.policies.paths_mut().into_iter().flatten() {
                resolve(path);
            }
        }
        for (section, key) in PATH_KEYS {
            if !applies(section, key) {
                continue;
            }
            match (section, key) {
                ("relay", _) => resolve(&mut self.relay.data_dir),
                ("policies", "access") => resolve(&mut self.policies.access),
                ("policies", _) => resolve(&mut self.policies.moderation),
                _ => {
                    if let Some(rest) = self.storage.database_url.strip_prefix("sqlite://") {
                        let mut path = PathBuf::from(rest);
                        if !rest.is_empty() && rest != ":memory:" {
                            resolve(&mut path);
                            self.storage.database_url = format!("sqlite://{}", path.display());
                        }
                    }
                }
            }
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        if !matches!(self.server.public_scheme.as_str(), "http" | "https") {
            anyhow::bail!("server.public_scheme must be \"http\" or \"https\"");
        }
        if self.communities.is_empty() {
            anyhow::bail!("at least one [[communities]] entry is required");
        }
        let mut hosts = std::collections::HashSet::new();
        for c in &self.communities {
            let host = buzz_nostr::host::normalize_host(&c.host);
            if host.is_empty() {
                anyhow::bail!("community host must not be empty");
            }
            if !hosts.insert(host.clone()) {
                anyhow::bail!("community host {host} is configured twice");
            }
            for owner in &c.owners {
                if owner.len() != 64 || hex::decode(owner).is_err() {
                    anyhow::bail!("community {host}: owner {owner:?} is not a 64-hex pubkey");
                }
            }
        }
        if let Err(err) = tracing_subscriber::EnvFilter::builder().parse(&self.log.level) {
            anyhow::bail!(
                "log.level {:?} is not a tracing filter: {err}",
                self.log.level
            );
        }
        let l = &self.limits;
        // One connection's budget must fit in the relay-wide one, or it could never fill.
        if l.max_outbound_bytes == 0 || l.max_outbound_bytes > l.max_outbound_bytes_total {
            anyhow::bail!(
                "limits.max_outbound_bytes must be between 1 and limits.max_outbound_bytes_total"
            );
        }
        if l.outbound_stall_secs == 0 {
            anyhow::bail!("limits.outbound_stall_secs must be at least 1");
        }
        // One largest body must fit, or such a request could never be received.
        if l.max_pending_body_bytes < l.max_message_bytes {
            anyhow::bail!(
                "limits.max_pending_body_bytes must be at least limits.max_message_bytes"
            );
        }
        if u32::try_from(l.max_pending_body_bytes).is_err() {
            anyhow::bail!("limits.max_pending_body_bytes must be below 4 GiB");
        }
        if l.body_timeout_secs == 0 {
            anyhow::bail!("limits.body_timeout_secs must be at least 1");
        }
        Ok(())
    }

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

/// Environment aliases of core's own keys.
const CORE_ALIASES: [(&str, &str); 4] = [
    ("DATABASE_URL", "storage.database_url"),
    ("REDIS_URL", "storage.redis_url"),
    ("BUZZ_AUTO_MIGRATE", "storage.auto_migrate"),
    ("BUZZ_RELAY_PRIVATE_KEY", "relay.private_key"),
];

fn parse_scalar(value: &str) -> config::Value {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => config::Value::from(true),
        "false" | "0" | "no" => config::Value::from(false),
        _ => config::Value::from(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Plugin, PluginEntry, PluginManifest, Services};
    use std::sync::Arc;

    /// A plugin manifest for these tests: one option, one alias.
    struct Sample;

    #[derive(Debug, Default, serde::Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct SampleConfig {
        words: Vec<String>,
    }

    impl PluginManifest for Sample {
        const NAME: &'static str = "sample";
        const ENABLED_BY_DEFAULT: bool = false;
        const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[("SAMPLE_ON", "enabled")];
        type Config = SampleConfig;
        fn build(_: SampleConfig, _: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
            anyhow::bail!("not run in these tests")
        }
    }

    fn load_in(dir: &Path, file: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let path = dir.join("config.toml");
        if let Some(text) = file {
            std::fs::write(&path, text)?;
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let catalog = PluginCatalog::new().with(PluginEntry::of::<Sample>());
        Settings::load_from(file.map(|_| path.as_path()), &env, &catalog)
    }

    fn load(file: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        load_in(tempfile::tempdir()?.path(), file, env)
    }

    #[test]
    fn defaults() {
        let s = load(None, &[]).expect("defaults");
        assert_eq!(s.server.bind, "127.0.0.1:7777");
        assert_eq!(s.storage.database_url, "sqlite://./data/buzz.db");
        assert_eq!(s.communities.len(), 1);
        assert_eq!(s.communities[0].host, "localhost");
        assert!(s.policies.access_is_default && s.policies.moderation_is_default);
        // Every built plugin gets its own defaults; nothing else appears.
        assert_eq!(s.plugins.len(), 1);
        assert_eq!(s.plugin("sample").enabled, Some(false));
        assert_eq!(
            s.plugin("sample").options.get("words"),
            Some(&serde_json::json!([]))
        );
    }

    #[test]
    fn aliases_override_the_file() {
        let s = load(
            Some("[storage]\ndatabase_url = \"sqlite://x.db\"\n[[communities]]\nhost = \"a.example\"\nname = \"A\"\n"),
            &[
                ("DATABASE_URL", "postgres://u@h/db"),
                ("SAMPLE_ON", "true"),
                ("BUZZ__SERVER__BIND", "0.0.0.0:1"),
            ],
        )
        .expect("config");
        assert_eq!(s.storage.database_url, "postgres://u@h/db");
        assert!(s.plugin("sample").is_enabled());
        assert_eq!(s.communities[0].host, "a.example");
        assert!(s.communities[0].open);
        assert_eq!(s.server.bind, "0.0.0.0:1");
    }

    #[test]
    fn bad_values_are_refused_with_the_key() {
        let err =
            load(Some("[server]\npublic_scheme = \"ftp\"\n"), &[]).expect_err("must be refused");
        assert!(format!("{err:#}").contains("public_scheme"));
        let err =
            load(Some("[storage]\nauto_migrate = \"maybe\"\n"), &[]).expect_err("must be refused");
        assert!(
            format!("{err:#}").contains("auto_migrate") || format!("{err:#}").contains("boolean"),
            "{err:#}"
        );
    }

    #[test]
    fn plugin_sections_are_checked_against_the_catalog() {
        let err = load(Some("[plugins.nonesuch]\nenabled = true\n"), &[])
            .expect_err("an unbuilt plugin must refuse");
        let text = format!("{err:#}");
        assert!(
            text.contains("nonesuch") && text.contains("built: sample"),
            "{text}"
        );

        let err = load(Some("[plugins.sample]\nwrds = []\n"), &[])
            .expect_err("an unknown key must refuse");
        let text = format!("{err:#}");
        assert!(text.contains("wrds") && text.contains("words"), "{text}");

        let s = load(
            Some("[plugins.sample]\nenabled = true\nwords = [\"a\"]\n"),
            &[],
        )
        .expect("a good section");
        assert!(s.plugin("sample").is_enabled());
        assert_eq!(
            s.plugin("sample").options.get("words"),
            Some(&serde_json::json!(["a"]))
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let s = load_in(
            dir.path(),
            Some("[relay]\ndata_dir = \"state\"\n[policies]\naccess = \"rules/a.lua\"\n"),
            &[("DATABASE_URL", "sqlite://env.db")],
        )
        .expect("config");
        assert_eq!(s.relay.data_dir, dir.path().join("state"));
        assert_eq!(s.policies.access, dir.path().join("rules/a.lua"));
        assert!(!s.policies.access_is_default && s.policies.moderation_is_default);
        // Defaults a file leaves alone live beside it too ...
        assert_eq!(
            s.policies.moderation,
            dir.path().join("policies/moderation.lua")
        );
        // ... but a value from the environment stays relative to the working directory.
        assert_eq!(s.storage.database_url, "sqlite://env.db");

        let s = load_in(
            dir.path(),
            Some("[storage]\ndatabase_url = \"sqlite://db/b.db\"\n"),
            &[],
        )
        .expect("config");
        assert_eq!(
            s.storage.database_url,
            format!("sqlite://{}", dir.path().join("db/b.db").display())
        );
    }
}
