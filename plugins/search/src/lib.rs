//! `search`: NIP-50 full-text search over what each reader may read.
//!
//! | hook | behaviour |
//! |---|---|
//! | `claims_filter` / `answer_claimed` | every filter with `"search"`: parsed (`query.rs`, refusals `invalid:`), before AUTH `auth-required:` when it could match channel data (core's rule, on the kinds searched), identical filters merged and at most `max_search_filters` distinct ones, then read within the reader's scope and the filter's other fields as keys, the index walk naming the reader's places (`scope.rs`) and examining at most `max_count_rows` matches (`search.rs`), ranked within `max_ranked_bytes` and the process's `rank_memory_bytes` (`rank.rs`, `memory.rs`), `limit` last, answered as keys whose bodies core sends a page at a time |
//! | `answer_count` | NIP-45 `COUNT` of search filters: the same matches, counted, at most `max_count_rows` examined per filter (past them: NIP-45 `approximate`) |
//! | `live_condition` | an open REQ with `search` gets new matching events, matched in process (`text.rs`, `query.rs`) |
//! | `on_event_stored` | indexes an event of the configured kinds in its own transaction; a kind 5 that deleted, a 9005 that removed, a newer revision, a delete or a redaction of an artifact takes the old entry out (`index.rs`); on PostgreSQL the documents of a whole insert group are one statement (`grouped.rs`) |
//! | `background` | the backfill of events stored before the plugin was enabled (`backfill.rs`) |
//! | `extend_nip11` | `"search"`: the limits and indexed kinds |
//!
//! The index is derived from `events`: SQLite FTS5 (`search_fts`, contentless, rowid =
//! `events.seq`) or PostgreSQL (`search_documents`, a `tsvector` per event under GIN),
//! each token written with its community and place (`scope.rs`),
//! plus `search_artifacts` (the indexed revision of each artifact) and `search_backfill`
//! (progress). The plugin tokenizes itself (`text.rs`), so both backends and live
//! matching agree on what a word is.
//!
//! Configuration: `[plugins.search]` — `enabled` (default true) and [`Config`].

mod backfill;
mod config;
mod grouped;
mod index;
mod memory;
mod plugin;
mod query;
mod rank;
mod scope;
mod search;
mod sql;
mod text;

pub use config::Config;
pub use plugin::Search;
pub use query::{Bounds, Search as SearchQuery, Term};
pub use text::{document, tokens, MAX_DOC_TOKENS, MAX_TOKEN_BYTES};

use buzz_core::error::Reason;
use buzz_core::plugin::{AdminPanel, Plugin, PluginManifest, PluginMigrations, Services};
use buzz_core::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use std::sync::Arc;

/// The config name: `[plugins.search]`, the NIP-11 field.
pub const NAME: &str = "search";
/// The NIP-50 filter key.
pub const SEARCH_KEY: &str = "search";

static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// The manifest the binary registers: `PluginEntry::of::<SearchPlugin>()`.
pub struct SearchPlugin;

impl PluginManifest for SearchPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    const SUPPORTED_NIPS: &'static [u32] = &[50];
    /// All of it is an index of stored events: `copy` leaves it out, and the backfill
    /// (which finds no `search_backfill` row on the destination) rebuilds it there. FTS5
    /// keeps its index in shadow tables, which exist on SQLite only, as
    /// `search_documents` exists on PostgreSQL only.
    const DERIVED_TABLES: &'static [&'static str] = &[
        "search_fts",
        "search_fts_config",
        "search_fts_content",
        "search_fts_data",
        "search_fts_docsize",
        "search_fts_idx",
        "search_documents",
        "search_artifacts",
        "search_backfill",
    ];
    type Config = Config;

    fn validate(config: &Config) -> anyhow::Result<()> {
        config.validate()
    }

    fn migrations() -> Option<PluginMigrations> {
        Some(PluginMigrations {
            sqlite: &SQLITE,
            postgres: &POSTGRES,
        })
    }

    /// Index size and backfill state.
    fn admin_panel(config: &Config, conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let size = index::size(conn)?;
        let state = backfill::state(conn)?;
        let backfill = match state {
            None => "not started".to_owned(),
            Some(s) if s.indexed_through >= s.target => {
                format!("done (through event {})", s.indexed_through)
            }
            Some(s) => format!(
                "running: event {} of {} ({} documents so far)",
                s.indexed_through, s.target, s.documents
            ),
        };
        Ok(AdminPanel::default()
            .fact("indexed documents", size.documents)
            .fact("index bytes", size.bytes)
            .fact("backfill", backfill)
            .fact(
                "indexed kinds",
                config
                    .kinds
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
            .fact("max search bytes", config.max_search_bytes))
    }

    fn build(config: Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Search::new(config, services.clone())))
    }
}

/// Documents and bytes of the search index (benchmarks, the console).
pub fn index_size(conn: &mut Conn<'_>) -> Result<(i64, i64), Reason> {
    let size = index::size(conn)?;
    Ok((size.documents, size.bytes))
}

/// The backfill's progress: (events looked at through this `seq`, target `seq`), if it
/// ever started.
pub fn backfill_progress(conn: &mut Conn<'_>) -> Result<Option<(i64, i64)>, Reason> {
    Ok(backfill::state(conn)?.map(|s| (s.indexed_through, s.target)))
}
