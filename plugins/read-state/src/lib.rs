//! `read_state`: the private `/buzz/v1` read-state API (sidebar, read positions, follows
//! and fixed-operand intents). Disabled by default: `[plugins.read_state] enabled = true`
//! or `BUZZ_V1_ENABLED=true`.
//!
//! Conversation history, live events, edits and deletion stay Nostr-authoritative; this
//! API only answers "what is new for me" and records what the signer read. Positions are
//! relay arrival times (`events.received_at`, microseconds), never author time; clients
//! name message ids only and never see a position.
//!
//! | file | concern |
//! |---|---|
//! | `lib.rs` | manifest: name, config section, env alias, tables, admin panel |
//! | `plugin.rs` | the running plugin: ingest hook, routes, NIP-11 `buzz_v1` |
//! | `ingest.rs` | in the message's transaction: posting marks read, follows, mentions, joins |
//! | `frontiers.rs` | the plugin's tables: accounts, positions, follows, mentions |
//! | `scope.rs` | per-scope reads: unread probe, mention count, divider, mark arithmetic |
//! | `mentions.rs` | which p tags of a message are mentions (members, capped) |
//! | `tips.rs` | a thread's tip on its followers' rows (what the sidebar walks) |
//! | `sidebar.rs` | `GET /buzz/v1/me/sidebar` |
//! | `threads.rs` | one row's page of threads: the index walk and its cursor |
//! | `intents.rs` | `POST /buzz/v1/me/read-state` |
//! | `contexts.rs` | `GET /buzz/v1/me/read-state?targets=` |
//! | `quota.rs` | the per-reader request quota (429 + `Retry-After`), in process or Redis |
//! | `admin.rs` | one reader's frontiers and sidebar, for the console's Frontiers pane |
//! | `http.rs` | the API's error body, request ids, cache headers, query parsing, bounds |
//! | `sql.rs` | one SQL text for both backends |
//!
//! Not part of this relay (the spec mentions them): NIP-FI admission, NIP-OA admission
//! and NIP-RS. Every request is plain NIP-98; there is no NIP-RS state to keep apart.

mod admin;
mod contexts;
mod frontiers;
mod http;
mod ingest;
mod intents;
mod mentions;
mod plugin;
mod quota;
mod scope;
mod sidebar;
mod sql;
mod threads;
mod tips;

pub use admin::{reader_frontiers, ChannelFrontier, ReaderFrontiers, ThreadFrontier, MAX_ROWS};
pub use plugin::ReadState;
pub use sidebar::{SidebarRow, SidebarThread};

use buzz_core::error::Reason;
use buzz_core::plugin::{
    AdminPanel, DeclaredRoute, Plugin, PluginManifest, PluginMigrations, RouteAuth, RouteMethod,
    Services,
};
use buzz_core::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The config name: `[plugins.read_state]`.
pub const NAME: &str = "read_state";
/// The NIP-11 field advertising the API.
pub const NIP11_FIELD: &str = "buzz_v1";
/// Mount point of every route.
pub const BASE_PATH: &str = "/buzz/v1";
/// Sidebar route.
pub const SIDEBAR_PATH: &str = "/buzz/v1/me/sidebar";
/// Intents (POST) and explicit contexts (GET).
pub const READ_STATE_PATH: &str = "/buzz/v1/me/read-state";
/// Everything else under the base path, answered with the API's own 404 body.
pub const UNKNOWN_PATHS: &str = "/buzz/v1/{tail:.*}";
/// Rows per sidebar page and channels per `channel_ids` refresh.
pub const MAX_CHANNELS: usize = 20;
/// Intents per POST.
pub const MAX_INTENTS: usize = 100;
/// Contexts per GET.
pub const MAX_CONTEXTS: usize = 20;
/// Message selectors per GET, all contexts together.
pub const MAX_CONTEXT_MESSAGES: usize = 100;
/// Largest intent body, bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest request target (path and query), bytes.
pub const MAX_URL_BYTES: usize = 16 * 1024;
/// Kinds that count as messages (the relay's conversation kinds).
pub const ELIGIBLE_KINDS: [u32; 4] = buzz_nostr::kinds::CONVERSATION;

static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// `[plugins.read_state]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Shared deadline for processing one POST's intents after admission; intents not
    /// finished by then answer `{"status":"unknown","retryable":true}`.
    pub intent_deadline_ms: u64,
    /// Largest serialized API response; a larger answer is an error, never a cut list.
    pub max_response_bytes: usize,
    /// Requests one signer may make to `/buzz/v1` per community in each window; more
    /// answer 429 with `Retry-After`. Shared through Redis when `storage.redis_url` is
    /// set.
    pub quota_requests: u64,
    /// The quota's window, seconds (fixed windows aligned on the epoch).
    pub quota_window_secs: u64,
    /// Threads one sidebar row lists at most; more are paged with the row's
    /// `threads_next_cursor` (`threads_cursor=`). 1 to [`MAX_THREADS_BOUND`].
    pub max_threads: usize,
    /// Mentions one message makes at most: the first this many distinct p-tagged
    /// channel members in tag order get a mention row and a follow; other p tags change
    /// nobody's read state. 1 to [`MAX_MESSAGE_MENTIONS_BOUND`].
    pub max_message_mentions: usize,
}

/// Largest `max_threads`: a full page of 20 rows stays far below the 1 MiB answer.
pub const MAX_THREADS_BOUND: usize = 200;
/// Largest `max_message_mentions` (the relay's own tag limit is 2,000).
pub const MAX_MESSAGE_MENTIONS_BOUND: usize = 2_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            intent_deadline_ms: 8_000,
            max_response_bytes: 1024 * 1024,
            quota_requests: 600,
            quota_window_secs: 60,
            max_threads: 50,
            max_message_mentions: 50,
        }
    }
}

/// The manifest the binary registers.
pub struct ReadStatePlugin;

impl PluginManifest for ReadStatePlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = false;
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[("BUZZ_V1_ENABLED", "enabled")];
    const TABLES: &'static [&'static str] = &[
        "read_state_accounts",
        "read_state_frontiers",
        "read_state_mentions",
    ];
    const ROUTES: &'static [DeclaredRoute] = &[
        DeclaredRoute::new(RouteMethod::Get, SIDEBAR_PATH, RouteAuth::Nip98),
        DeclaredRoute::new(RouteMethod::Post, READ_STATE_PATH, RouteAuth::Nip98),
        DeclaredRoute::new(RouteMethod::Get, READ_STATE_PATH, RouteAuth::Nip98),
        DeclaredRoute::new(RouteMethod::Get, UNKNOWN_PATHS, RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Post, UNKNOWN_PATHS, RouteAuth::Public),
    ];
    type Config = Config;

    fn validate(config: &Config) -> anyhow::Result<()> {
        if config.intent_deadline_ms == 0 {
            anyhow::bail!("intent_deadline_ms must be at least 1");
        }
        if config.max_response_bytes < 1024 {
            anyhow::bail!("max_response_bytes must be at least 1024");
        }
        if config.quota_requests == 0 {
            anyhow::bail!("quota_requests must be at least 1");
        }
        if !(1..=86_400).contains(&config.quota_window_secs) {
            anyhow::bail!("quota_window_secs must be from 1 to 86400");
        }
        if !(1..=MAX_THREADS_BOUND).contains(&config.max_threads) {
            anyhow::bail!("max_threads must be from 1 to {MAX_THREADS_BOUND}");
        }
        if !(1..=MAX_MESSAGE_MENTIONS_BOUND).contains(&config.max_message_mentions) {
            anyhow::bail!("max_message_mentions must be from 1 to {MAX_MESSAGE_MENTIONS_BOUND}");
        }
        Ok(())
    }

    fn migrations() -> Option<PluginMigrations> {
        Some(PluginMigrations {
            sqlite: &SQLITE,
            postgres: &POSTGRES,
        })
    }

    /// Sizes only: positions are signer-private and no operator surface shows them.
    fn admin_panel(config: &Config, conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let (accounts, frontiers, mentions) = frontiers::table_sizes(conn)?;
        Ok(AdminPanel::default()
            .fact("intent deadline (ms)", config.intent_deadline_ms)
            .fact("max response bytes", config.max_response_bytes)
            .fact("quota requests per reader", config.quota_requests)
            .fact("quota window (s)", config.quota_window_secs)
            .fact("max threads per row", config.max_threads)
            .fact("max mentions per message", config.max_message_mentions)
            .fact("accounts", accounts)
            .fact("frontier rows", frontiers)
            .fact("mention rows", mentions))
    }

    fn build(config: Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(ReadState::new(config, services)))
    }
}
