//! `hello`: the smallest real Buzz plugin, and the worked example of the plugin API. It
//! uses every hook point, so its tests prove each one end to end.
//!
//! | what | where | behaviour |
//! |---|---|---|
//! | manifest | [`HelloPlugin`] | name, section type with defaults and validation, an env alias, a reserved kind, its table, an admin panel |
//! | [`Plugin::reject_event`] | `plugin.rs` | refuses content containing a configured banned word (`blocked:`) |
//! | [`Plugin::on_event_stored`] | `plugin.rs` | counts the stored event in `hello_counts` (same transaction); every `milestone`-th event of a kind stores a relay-signed note about it, delivered live after the commit |
//! | [`Plugin::on_event_committed`] | `plugin.rs` | contributes the fresh kind-20999 stats event to live fan-out |
//! | [`Plugin::reject_filter`] | `plugin.rs` | `hello_stats` with any value but `true` is `invalid:` |
//! | [`Plugin::claims_filter`] / [`Plugin::answer_claimed`] | `plugin.rs` | `"hello_stats": true` → one relay-signed kind-20999 event; `"hello_counts": true` → a JSON object (`POST /query` only) |
//! | [`Plugin::routes`] | `routes.rs` | `GET /hello/stats` (public) the counts; `POST /hello/reset` (NIP-98, community owners) forgets them |
//! | [`Plugin::extend_nip11`] | `plugin.rs` | adds `"hello": {"banned_words": N}` |
//! | [`Plugin::background`] | `plugin.rs` | every `heartbeat_ms`, publishes each community's stats live |
//!
//! ```toml
//! [plugins.hello]
//! enabled = true
//! banned_words = ["spam", "scam"]   # case-insensitive substrings; default none
//! milestone = 0                     # note every N-th event of a kind; 0 = never
//! heartbeat_ms = 0                  # live stats every N ms; 0 = never
//! ```
//!
//! `HELLO_BANNED_WORDS` is not an alias (lists do not fit a variable); `HELLO_ENABLED=true`
//! is. Register it with `PluginCatalog::new().with(PluginEntry::of::<HelloPlugin>())`.

mod counts;
mod plugin;
mod routes;

pub use counts::KindCounts;
pub use plugin::Hello;

use buzz_core::error::Reason;
use buzz_core::plugin::{
    AdminPanel, AdminTable, DeclaredRoute, Plugin, PluginManifest, PluginMigrations, RouteAuth,
    RouteMethod, Services,
};
use buzz_core::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The config name: `[plugins.hello]`.
pub const NAME: &str = "hello";
/// Kind of the relay-signed stats event (ephemeral range: never stored). Reserved:
/// clients may not publish it.
pub const STATS_KIND: u32 = 20_999;
/// The filter extension key answered with the stats event when it is `true`.
pub const STATS_KEY: &str = "hello_stats";
/// The filter extension key answered with a JSON object when it is `true`.
pub const COUNTS_KEY: &str = "hello_counts";
/// The `d` tag of the stats event.
pub const STATS_D_TAG: &str = "hello-stats";
/// Path of the public stats route.
pub const STATS_PATH: &str = "/hello/stats";
/// Path of the owners-only reset route.
pub const RESET_PATH: &str = "/hello/reset";
/// The `t` tag of milestone notes.
pub const MILESTONE_TAG: &str = "hello-milestone";

static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// `[plugins.hello]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Case-insensitive substrings refused in content.
    pub banned_words: Vec<String>,
    /// Every `milestone`-th stored event of a kind (per community) gets a relay-signed
    /// note; 0 = never.
    pub milestone: u64,
    /// Publish every community's stats live this often; 0 = never.
    pub heartbeat_ms: u64,
}

/// The manifest the binary registers.
pub struct HelloPlugin;

impl PluginManifest for HelloPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = false;
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[("HELLO_ENABLED", "enabled")];
    const RESERVED_KINDS: &'static [u32] = &[STATS_KIND];
    const TABLES: &'static [&'static str] = &["hello_counts"];
    const ROUTES: &'static [DeclaredRoute] = &[
        DeclaredRoute::new(RouteMethod::Get, STATS_PATH, RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Post, RESET_PATH, RouteAuth::Nip98),
    ];
    type Config = Config;

    fn validate(config: &Config) -> anyhow::Result<()> {
        if config.banned_words.iter().any(|w| w.trim().is_empty()) {
            anyhow::bail!("banned_words must be non-empty strings");
        }
        if config.heartbeat_ms != 0 && config.heartbeat_ms < 10 {
            anyhow::bail!("heartbeat_ms must be 0 (off) or at least 10");
        }
        Ok(())
    }

    fn migrations() -> Option<PluginMigrations> {
        Some(PluginMigrations {
            sqlite: &SQLITE,
            postgres: &POSTGRES,
        })
    }

    /// What has been counted, per community and kind.
    fn admin_panel(config: &Config, conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let rows = counts::all(conn)?;
        Ok(AdminPanel::default()
            .fact("banned words", config.banned_words.len())
            .table(AdminTable {
                title: "stored events".into(),
                columns: vec!["community".into(), "kind".into(), "count".into()],
                rows: rows
                    .into_iter()
                    .map(|(c, k, n)| vec![c.to_string(), k.to_string(), n.to_string()])
                    .collect(),
            }))
    }

    fn build(config: Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Hello::new(config, services)))
    }
}
