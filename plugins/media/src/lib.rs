//! `media`: Blossom blob storage at the root of every community host (BUD-01 retrieval,
//! BUD-02 upload, BUD-06 upload preflight, BUD-11 authorization, BUD-12 list and delete),
//! so any Blossom client can use the relay's URL as its server. On by default.
//!
//! A blob belongs to the community of the host it was uploaded to. An upload whose
//! authorization carries `["h", <channel>]` binds it to that channel (the uploader must
//! be able to post there) and only the channel's readers may fetch it; an unbound blob is
//! readable by the community's members; nothing is readable anonymously. Every request
//! asks the access service afresh, so a removal, a ban or a deleted channel takes effect
//! at once, and an unknown, unreadable or other-community blob answers the same 404.
//!
//! | file | concern |
//! |---|---|
//! | `lib.rs` | manifest: name, config section, routes, tables, admin panel |
//! | `plugin.rs` | the running plugin: routes, NIP-11 `media`, responses and metrics |
//! | `auth.rs` | `Authorization`: BUD-11 kind-24242 tokens and NIP-98 (core's checks) |
//! | `access.rs` | who may upload where and who may read a blob (the access service) |
//! | `path.rs` | `/<sha256>[.ext]` parsed strictly; types and extensions |
//! | `upload.rs` | `PUT /upload`: the body streamed to a temporary file, hashed as it arrives |
//! | `preflight.rs` | `HEAD /upload` (BUD-06) and the checks it shares with `PUT` |
//! | `fetch.rs` | `GET`/`HEAD /<sha256>`, with `Range` |
//! | `manage.rs` | `DELETE /<sha256>` and `GET /list/<pubkey>` |
//! | `fs_store.rs` | blobs on disk: content-addressed, temp file + rename; upload temporaries |
//! | `s3_store.rs` | blobs in an S3-compatible bucket (SigV4 by `rust-s3`, bytes streamed) |
//! | `refs.rs` | which blobs stored events name (`imeta`, URLs), in their transaction |
//! | `gc.rs` | garbage collection: the sweep and `buzz-relay media gc` |
//! | `rows.rs` | the plugin's tables: blobs, owners, usage |
//! | `error.rs` | refusals: status, `X-Reason`, metric name |

mod access;
mod auth;
mod error;
mod fetch;
mod fs_store;
mod gc;
mod manage;
mod path;
mod plugin;
mod preflight;
mod refs;
mod rows;
mod s3_store;
mod upload;

pub use error::MediaError;
pub use plugin::Media;

use anyhow::Context;
use buzz_core::clock::Clock;
use buzz_core::config::Settings;
use buzz_core::error::Reason;
use buzz_core::plugin::{
    AdminPanel, AdminTable, DeclaredRoute, Plugin, PluginManifest, PluginMigrations, RouteAuth,
    RouteMethod, Services,
};
use buzz_core::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

/// The config name: `[plugins.media]`, and the NIP-11 field.
pub const NAME: &str = "media";
/// `PUT /upload` (BUD-02) and `HEAD /upload` (BUD-06).
pub const UPLOAD_PATH: &str = "/upload";
/// `GET /list/<pubkey>` (BUD-12).
pub const LIST_PATH: &str = "/list/{pubkey}";
/// `GET`, `HEAD`, `DELETE /<sha256>[.ext]` (BUD-01, BUD-12). Any single segment: the
/// plugin parses it, so a malformed name is a 400 with its reason, not a bare 404.
pub const BLOB_PATH: &str = "/{blob}";
/// Blob descriptors per `/list` page at most (and by default).
pub const MAX_LIST_LIMIT: usize = 100;

static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// Where blobs are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Files under `dir`.
    #[default]
    Fs,
    /// An S3-compatible bucket, shared by every relay process.
    S3,
}

/// `[plugins.media]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Largest blob, bytes: checked from `Content-Length` before the body is read and
    /// again while it arrives.
    pub max_blob_bytes: u64,
    /// Bytes of blobs one pubkey may own in one community (0: no quota). A blob two
    /// members uploaded counts for each.
    pub quota_bytes_per_pubkey: u64,
    /// Bytes of blobs one community may hold (0: no quota).
    pub quota_bytes_per_community: u64,
    /// MIME types accepted (`image/png`, or `image/*`); empty: any.
    pub allowed_types: Vec<String>,
    /// Uploads this process receives at once; more answer 503 (each holds a file and a
    /// few chunks, never the blob).
    pub max_concurrent_uploads: usize,
    pub store: StoreKind,
    /// `store = "fs"`: the directory (empty: `<data_dir>/media`). Processes may share it
    /// on a shared filesystem. With `store = "s3"`, where uploads are received before
    /// they go to the bucket.
    pub dir: String,
    /// `store = "s3"`.
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub path_style: bool,
    /// How long a blob no stored event references is kept before garbage collection.
    pub orphan_grace_secs: u64,
    /// How often the garbage collection sweep runs.
    pub gc_interval_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_blob_bytes: 104_857_600,
            quota_bytes_per_pubkey: 1_073_741_824,
            quota_bytes_per_community: 0,
            allowed_types: Vec::new(),
            max_concurrent_uploads: 32,
            store: StoreKind::Fs,
            dir: String::new(),
            endpoint: String::new(),
            bucket: String::new(),
            region: String::new(),
            access_key_id: String::new(),
            secret_access_key: String::new(),
            path_style: false,
            orphan_grace_secs: 86_400,
            gc_interval_secs: 3_600,
        }
    }
}

impl Config {
    /// The blob directory of `store = "fs"`.
    pub fn fs_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        if self.dir.is_empty() {
            data_dir.join("media")
        } else {
            PathBuf::from(&self.dir)
        }
    }
}

/// The manifest the binary registers.
pub struct MediaPlugin;

impl PluginManifest for MediaPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    const TABLES: &'static [&'static str] = &["media_blobs", "media_owners", "media_refs"];
    // Every route checks its own authorization (BUD-11 or NIP-98), so core's is Public.
    const ROUTES: &'static [DeclaredRoute] = &[
        DeclaredRoute::new(RouteMethod::Put, UPLOAD_PATH, RouteAuth::Public).streamed(),
        DeclaredRoute::new(RouteMethod::Head, UPLOAD_PATH, RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Get, LIST_PATH, RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Get, BLOB_PATH, RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Head, BLOB_PATH, RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Delete, BLOB_PATH, RouteAuth::Public),
    ];
    const COMMANDS: &'static [(&'static str, &'static str)] = &[(
        "gc",
        "delete blobs no stored event names, once orphan_grace_secs have passed",
    )];
    type Config = Config;

    fn validate(config: &Config) -> anyhow::Result<()> {
        if config.max_blob_bytes == 0 {
            anyhow::bail!("max_blob_bytes must be at least 1");
        }
        if config.max_concurrent_uploads == 0 {
            anyhow::bail!("max_concurrent_uploads must be at least 1");
        }
        if config.gc_interval_secs == 0 {
            anyhow::bail!("gc_interval_secs must be at least 1");
        }
        for t in &config.allowed_types {
            path::check_type_pattern(t).map_err(|e| anyhow::anyhow!("allowed_types: {e}"))?;
        }
        if config.store == StoreKind::S3 {
            for (key, value) in [
                ("endpoint", &config.endpoint),
                ("bucket", &config.bucket),
                ("access_key_id", &config.access_key_id),
                ("secret_access_key", &config.secret_access_key),
            ] {
                if value.is_empty() {
                    anyhow::bail!("store = \"s3\" needs {key}");
                }
            }
            if !config.endpoint.starts_with("http://") && !config.endpoint.starts_with("https://") {
                anyhow::bail!("endpoint must be an http:// or https:// URL");
            }
        }
        Ok(())
    }

    fn migrations() -> Option<PluginMigrations> {
        Some(PluginMigrations {
            sqlite: &SQLITE,
            postgres: &POSTGRES,
        })
    }

    fn admin_panel(config: &Config, conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let usage = rows::usage_by_community(conn)?;
        let table = AdminTable {
            title: "Usage per community".into(),
            columns: vec!["community".into(), "blobs".into(), "bytes".into()],
            rows: usage
                .into_iter()
                .map(|u| vec![u.host, u.blobs.to_string(), u.bytes.to_string()])
                .collect(),
        };
        Ok(AdminPanel::default()
            .fact("store", format!("{:?}", config.store).to_lowercase())
            .fact("max blob bytes", config.max_blob_bytes)
            .fact("quota bytes per pubkey", config.quota_bytes_per_pubkey)
            .fact(
                "quota bytes per community",
                config.quota_bytes_per_community,
            )
            .fact("allowed types", config.allowed_types.join(", "))
            .table(table))
    }

    fn run_command(
        command: &str,
        config: &Config,
        settings: &Settings,
        conn: &mut Conn<'_>,
    ) -> anyhow::Result<String> {
        anyhow::ensure!(command == "gc", "no media command {command:?}");
        let dir = config.fs_dir(&settings.relay.data_dir);
        let fs = fs_store::FsStore::open(dir.clone())
            .with_context(|| format!("opening the media directory {}", dir.display()))?;
        let now = buzz_core::clock::SystemClock.now_secs();
        let (swept, removed) = gc::sweep_conn(conn, &fs, now, config.orphan_grace_secs)?;
        if config.store == StoreKind::S3 {
            // A command runs on a blocking thread of the binary's runtime.
            let s3 = s3_store::S3Store::new(config)?;
            let runtime = tokio::runtime::Handle::current();
            for (cid, sha) in &removed {
                runtime.block_on(s3.remove(*cid, sha))?;
            }
        }
        Ok(format!(
            "media gc: {} blobs ({} bytes) deleted, {} abandoned uploads removed",
            swept.blobs, swept.bytes, swept.temp_files
        ))
    }

    fn build(config: Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Media::new(config, services)?))
    }
}
