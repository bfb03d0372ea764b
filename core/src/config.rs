//! `config.toml` exactly as DESIGN.md specifies, read with the `config` crate.
//!
//! Sources, later wins: built-in defaults, the TOML file, `BUZZ__SECTION__KEY`
//! environment overrides, then the aliases the specs name (`DATABASE_URL`, `REDIS_URL`,
//! `BUZZ_AUTO_MIGRATE`, `BUZZ_RELAY_PRIVATE_KEY`, `BUZZ_V1_ENABLED`).

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
    /// `[plugins.<name>]` sections, each with `enabled` and the plugin's own keys.
    pub plugins: BTreeMap<String, PluginSection>,
    pub limits: LimitSettings,
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
    /// Lua instructions one policy call may run before it is stopped (denied).
    pub instruction_budget: u64,
    /// Memory one Lua state may use, bytes.
    pub memory_bytes: usize,
    /// How often the scripts are checked for changes (hot reload), milliseconds.
    pub reload_poll_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LimitSettings {
    /// Largest WebSocket frame or HTTP body accepted, in bytes.
    pub max_message_bytes: usize,
    pub max_content_bytes: usize,
    pub max_event_tags: usize,
    /// Allowed `created_at` distance from relay time, seconds.
    pub max_clock_skew_secs: i64,
    pub max_subscriptions: usize,
    pub max_filters: usize,
    /// Largest `limit` honoured; also the default when a filter has none.
    pub max_limit: u64,
    /// Messages queued for one WebSocket client. Live events that find it full, or a
    /// REQ answer that waits 30 s for room, disconnect the client as too slow.
    pub max_outbound_queue: usize,
    /// EVENT messages one connection may have in flight at once.
    pub max_inflight_events: usize,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct PluginSection {
    #[serde(default)]
    pub enabled: bool,
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
reload_poll_ms = 1000

[limits]
max_message_bytes = 524288
max_content_bytes = 262144
max_event_tags = 2000
max_clock_skew_secs = 900
max_subscriptions = 64
max_filters = 16
max_limit = 500
max_outbound_queue = 1024
max_inflight_events = 64

[plugins.channel_windows]
enabled = true
[plugins.artifacts]
enabled = true
[plugins.snapshot]
enabled = true
[plugins.read_state]
enabled = false
"#;

const DEFAULT_COMMUNITY: &str = r#"
[[communities]]
host = "localhost"
name = "Local"
owners = []
open = true
"#;

impl Settings {
    /// Load from `path` (or `./config.toml` when present, else defaults) plus the
    /// environment.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Settings> {
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
        Self::load_from(file.as_deref(), &env)
    }

    /// Like [`Settings::load`], with the environment supplied as a map (tests pass their
    /// own so they never race on the process environment).
    pub fn load_from(
        file: Option<&Path>,
        env: &HashMap<String, String>,
    ) -> anyhow::Result<Settings> {
        let mut builder = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml));
        let file_has_communities = match file {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading {}", p.display()))?;
                builder =
                    builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
                text.contains("[[communities]]")
            }
            None => false,
        };
        if !file_has_communities {
            builder = builder.add_source(config::File::from_str(
                DEFAULT_COMMUNITY,
                config::FileFormat::Toml,
            ));
        }
        let vars: Vec<(String, String)> = ENV_KEYS
            .iter()
            .filter_map(|k| env.get(*k).map(|v| (k.to_string(), v.clone())))
            .collect();
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
                .source(Some(overrides)),
        );
        for (name, value) in vars {
            let key = match name.as_str() {
                "DATABASE_URL" => "storage.database_url",
                "REDIS_URL" => "storage.redis_url",
                "BUZZ_AUTO_MIGRATE" => "storage.auto_migrate",
                "BUZZ_RELAY_PRIVATE_KEY" => "relay.private_key",
                "BUZZ_V1_ENABLED" => "plugins.read_state.enabled",
                _ => continue,
            };
            builder = builder.set_override(key, parse_scalar(&value))?;
        }
        let settings: Settings = builder
            .build()
            .context("reading configuration")?
            .try_deserialize()
            .context("configuration has a wrong or missing key")?;
        settings.validate()?;
        Ok(settings)
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
            let host = crate::community::normalize_host(&c.host);
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
        Ok(())
    }

    /// The section of plugin `name` (a disabled, empty one when absent).
    pub fn plugin(&self, name: &str) -> PluginSection {
        self.plugins.get(name).cloned().unwrap_or_default()
    }
}

/// Alias variables the specs name.
const ENV_KEYS: [&str; 5] = [
    "DATABASE_URL",
    "REDIS_URL",
    "BUZZ_AUTO_MIGRATE",
    "BUZZ_RELAY_PRIVATE_KEY",
    "BUZZ_V1_ENABLED",
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

    fn load(file: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("config.toml");
        if let Some(text) = file {
            std::fs::write(&path, text)?;
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::load_from(file.map(|_| path.as_path()), &env)
    }

    #[test]
    fn defaults_match_the_design() {
        let s = load(None, &[]).expect("defaults");
        assert_eq!(s.server.bind, "127.0.0.1:7777");
        assert_eq!(s.storage.database_url, "sqlite://./data/buzz.db");
        assert_eq!(s.communities.len(), 1);
        assert_eq!(s.communities[0].host, "localhost");
        assert!(s.plugin("channel_windows").enabled);
        assert!(!s.plugin("read_state").enabled);
    }

    #[test]
    fn aliases_override_the_file() {
        let s = load(
            Some("[storage]\ndatabase_url = \"sqlite://x.db\"\n[[communities]]\nhost = \"a.example\"\nname = \"A\"\n"),
            &[
                ("DATABASE_URL", "postgres://u@h/db"),
                ("BUZZ_V1_ENABLED", "true"),
                ("BUZZ__SERVER__BIND", "0.0.0.0:1"),
            ],
        )
        .expect("config");
        assert_eq!(s.storage.database_url, "postgres://u@h/db");
        assert!(s.plugin("read_state").enabled);
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
}
