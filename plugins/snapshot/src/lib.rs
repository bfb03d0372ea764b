//! `snapshot`: NIP-AR's stable manifest transport — a capture of every current artifact
//! matching a query across the channels a reader can read, that cannot tear. A client
//! starts a capture, pages through its immutable manifest, fetches exactly the captured
//! bodies, and asks the relay to confirm that nothing captured moved, vanished or
//! changed access, so it may safely drop local records the manifest lacks.
//!
//! | action (`POST /query`, one filter) | answer |
//! |---|---|
//! | `{"artifact":"snapshot","action":"start","query":{"artifact":"current",…}}` | first page, token, expiry, next cursor |
//! | `{…"action":"page","token":…,"cursor":…}` | that page (the same entries every time) |
//! | `{…"action":"bodies","token":…,"revisionIds":[…]}` | exactly those captured revisions |
//! | `{…"action":"complete","token":…}` | `{"complete":true}` or a reset |
//!
//! Where things are: `request.rs` (strict parsing), `token.rs` (opaque, reader-bound
//! tokens and cursors), `manifest.rs` (pages and records), `state/` (captures in Redis or
//! the database, quota, leases), `scope.rs` (the frozen scope and its recheck),
//! `verify.rs` (the recheck of every captured identity), `recheck.rs` (what pages and
//! completion both validate: the full frozen scope, in one transaction), `plugin.rs`
//! (the actions and their bounds), `error.rs` (the spec's codes), `limits.rs`
//! (`[plugins.snapshot]`).
//!
//! Artifact state is read only through the artifacts plugin's public API; scope is
//! decided by the access service from the database in the request's own transaction
//! ([`buzz_core::access::AccessService::authority`]).

mod admin;
mod error;
mod limits;
mod manifest;
mod plugin;
mod recheck;
mod request;
mod scope;
mod state;
mod token;
mod verify;

pub use admin::{captures_in_database, Captures};
pub use limits::Limits;
pub use manifest::{Entry, Header};
pub use plugin::Snapshot;
pub use request::SNAPSHOT;
pub use state::CaptureInfo;

use buzz_core::error::Reason;
use buzz_core::plugin::{
    AdminPanel, AdminTable, Plugin, PluginManifest, PluginMigrations, Services,
};
use buzz_core::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use state::{CaptureStore, DbCaptures, RedisCaptures};
use std::sync::Arc;

/// The config name: `[plugins.snapshot]`.
pub const NAME: &str = "snapshot";

static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// The manifest the binary registers: `PluginEntry::of::<SnapshotPlugin>()`.
pub struct SnapshotPlugin;

impl PluginManifest for SnapshotPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    const TABLES: &'static [&'static str] = &["snapshot_captures", "snapshot_records"];
    type Config = Limits;

    fn validate(config: &Limits) -> anyhow::Result<()> {
        config.validate()
    }

    fn migrations() -> Option<PluginMigrations> {
        Some(PluginMigrations {
            sqlite: &SQLITE,
            postgres: &POSTGRES,
        })
    }

    /// Captures kept in the database (the embedded store) and the limits in force.
    fn admin_panel(config: &Limits, conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let rows = state::db::list_in(conn)?;
        Ok(AdminPanel::default()
            .fact("shared captures", config.max_captures)
            .fact("shared bytes", config.max_charged_bytes)
            .fact(
                "captures reserved per community",
                config.captures_reserved_per_community,
            )
            .fact(
                "bytes reserved per community",
                config.charged_bytes_reserved_per_community,
            )
            .fact("captures per reader", config.captures_per_reader)
            .fact("lifetime (s)", config.lifetime_seconds)
            .table(AdminTable {
                title: "captures in the database".into(),
                columns: vec![
                    "community".into(),
                    "reader".into(),
                    "entries".into(),
                    "pages served".into(),
                    "bytes".into(),
                ],
                rows: rows
                    .into_iter()
                    .map(|c| {
                        vec![
                            c.community.to_string(),
                            c.reader.chars().take(16).collect(),
                            c.entries.to_string(),
                            format!("{}/{}", c.pages_served, c.pages),
                            c.bytes.to_string(),
                        ]
                    })
                    .collect(),
            }))
    }

    fn build(config: Limits, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        let artifacts = services
            .settings
            .plugins
            .get(buzz_artifacts::NAME)
            .filter(|section| section.enabled == Some(true))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "plugins.{NAME} needs plugins.{} enabled (it captures its artifacts)",
                    buzz_artifacts::NAME
                )
            })?;
        let artifact_limits: buzz_artifacts::Limits =
            serde_json::from_value(serde_json::Value::Object(artifacts.options.clone()))
                .map_err(|e| anyhow::anyhow!("plugins.{}: {e}", buzz_artifacts::NAME))?;
        let captures: Arc<dyn CaptureStore> = match &services.redis {
            Some(link) => Arc::new(RedisCaptures::new(link.clone(), &services.redis_prefix)),
            None => Arc::new(DbCaptures::new(services.store.clone())),
        };
        Ok(Arc::new(Snapshot {
            store: services.store.clone(),
            access: services.access.clone(),
            clock: services.clock.clone(),
            captures,
            tokens: token::Tokens::new(
                services.relay_keys.derive_secret("buzz snapshot tokens v1"),
            ),
            operations: Arc::new(tokio::sync::Semaphore::new(config.concurrent_operations)),
            artifact_limits,
            quota: state::Quota::new(&config, services.communities.iter().map(|c| c.id).collect()),
            limits: config,
        }))
    }
}
