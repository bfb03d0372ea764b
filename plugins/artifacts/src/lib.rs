//! `artifacts`: NIP-AR channel artifacts — editable records (tasks, docs, projects) kept
//! as kind-45010 revisions, each a full snapshot, one current revision per identity
//! (community, `d`).
//!
//! | hook | behaviour |
//! |---|---|
//! | `reject_event` | the envelope (`envelope.rs`, every "Event format" rule → `invalid: <rule>`); the edit rules against the revision `prev` names (`write.rs`): type immutable, update keeps `h`, move changes it (write permission in the source too), delete → only restore, root anchors; kind 5 naming a revision refused |
//! | `accepts_resubmission` | an accepted revision sent again → `OK true` (`duplicate:`), before any check |
//! | `on_event_stored` | the compare-and-swap on the head row (`heads.rs`: a conflict rolls the event back → `conflict:`, HTTP 409), the revision row, the current tags; a move stores the relay-signed kind-45011 removal in the source; a kind-9005 removal of a revision redacts it |
//! | `reject_filter` | a plain filter on kind 45010 with a multi-character tag → `invalid:` pointing to the artifact query |
//! | `claims_filter` / `answer_claimed` | `{"artifact":"current",…}` and `{"artifact":"history","#d":[…]}` (grammar `query.rs`, SQL `query.rs` / `history.rs`), answered by `answer.rs`: planned from stored sizes, refused over `max_answer_bytes` before any body is read, admitted within the process's `answer_memory_bytes` (`memory.rs`), loaded a chunk at a time |
//! | `extend_nip11` | `"artifacts"`: the enforced limits (`limits.rs`) |
//!
//! Kind 45011 (the removal marker) is reserved: only the relay authors it. Revisions are
//! not conversation messages (`buzz_nostr::kinds::is_conversation` is false for
//! 45010/45011): they get no thread metadata and change no counts.
//!
//! # Public API: artifact state, for other crates
//!
//! A crate that needs artifact state (the stable manifest transport, say) reads it through
//! these, with a `Conn` from `Store::read`, and never copies the SQL:
//! - [`head`]: an identity's current state — its current revision id, home channel,
//!   type, root, op (`delete` = deleted) and `retired` (current revision redacted).
//! - [`current_matches`]: the listed (not deleted, not retired) identities homed in a set
//!   of channels matching tag predicates, with revision ids and channel ids, by `d`.
//! - [`revision`]: one accepted revision by id (its artifact, number, channel, op,
//!   `redacted`).
//! - [`revisions_of`]: every accepted revision of an identity in acceptance order: its
//!   move history (channel per revision) and delete/restore history (op per revision).
//! - [`load_revisions`]: the stored bodies of revision ids (removed ones left out).
//! - Many identities at once (`batch.rs`): [`heads_of`], [`revisions_by_id`],
//!   [`relocations_of`] (the moves, deletes and restores of identities) and
//!   [`count_listed`] (listed artifacts in channels, optionally of some types, up to a
//!   cap).
//!
//! The `"artifact"` filter key belongs to NIP-AR: this plugin claims every filter that
//! carries it. An extension of the same NIP answering other `"artifact"` values (the
//! stable manifest transport's `"snapshot"`) is listed before this plugin, so it claims
//! them first; without it they are refused here as unsupported.
//!
//! Configuration: `[plugins.artifacts]` — `enabled` (default true) and the limits of
//! [`Limits`]. Disabled, it claims nothing and advertises nothing: kind 45010 is then an
//! ordinary stored event, as on a relay without the plugin.

mod answer;
mod batch;
mod envelope;
mod heads;
mod history;
mod limits;
mod memory;
mod plan;
mod plugin;
mod query;
mod write;

pub use batch::{count_listed, heads_of, relocations_of, revisions_by_id};
pub use envelope::{Envelope, Op};
pub use heads::{head, revision, revisions_of, Head, Revision};
pub use limits::Limits;
pub use plugin::Artifacts;
pub use query::{
    current_matches, load_revisions, ArtifactQuery, CurrentEntry, CurrentQuery, HistoryQuery,
    AFTER_KEY, QUERY_KEY,
};

use buzz_core::error::Reason;
use buzz_core::plugin::{
    AdminPanel, AdminTable, Plugin, PluginManifest, PluginMigrations, Services,
};
use buzz_core::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use std::sync::Arc;

/// The config name: `[plugins.artifacts]`, the NIP-11 field.
pub const NAME: &str = "artifacts";
/// An artifact revision.
pub const REVISION_KIND: u32 = 45_010;
/// The relay-signed removal a move leaves in its source channel (reserved).
pub const REMOVAL_KIND: u32 = 45_011;

static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// The manifest the binary registers: `PluginEntry::of::<ArtifactsPlugin>()`.
pub struct ArtifactsPlugin;

impl PluginManifest for ArtifactsPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    const RESERVED_KINDS: &'static [u32] = &[REMOVAL_KIND];
    // Every revision and removal lives in a channel: before AUTH a filter on it is `auth-required:`.
    const CHANNEL_KINDS: &'static [u32] = &[REVISION_KIND, REMOVAL_KIND];
    const TABLES: &'static [&'static str] = &[
        "artifact_heads",
        "artifact_revisions",
        "artifact_current_tags",
    ];
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

    /// Artifacts per community, and the limits in force.
    fn admin_panel(config: &Limits, conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let rows = heads::counts(conn)?;
        Ok(AdminPanel::default()
            .fact("page size", config.max_page_size)
            .fact("query budget (ms)", config.query_budget_ms)
            .fact("answer bytes", config.max_answer_bytes)
            .fact(
                "answer memory per process (bytes)",
                config.answer_memory_bytes,
            )
            .table(AdminTable {
                title: "artifacts".into(),
                columns: vec![
                    "community".into(),
                    "listed".into(),
                    "deleted".into(),
                    "retired".into(),
                ],
                rows: rows
                    .into_iter()
                    .map(|(c, listed, deleted, retired)| {
                        vec![
                            c.to_string(),
                            listed.to_string(),
                            deleted.to_string(),
                            retired.to_string(),
                        ]
                    })
                    .collect(),
            }))
    }

    fn build(config: Limits, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        config.check_core(services.settings.limits.max_message_bytes)?;
        Ok(Arc::new(Artifacts::new(config, services)))
    }
}
