//! `sync`: NIP-77 negentropy set reconciliation. A client that was offline sends the
//! (created_at, id) fingerprint of what it holds for a filter and learns, in a few round
//! trips, which ids it lacks and which the relay lacks — without either side sending the
//! events or even all their ids.
//!
//! The record set of a reconciliation is what a REQ of the same filter could return to
//! the same reader: the filter passes the checks a REQ gets (bounds, the anonymous rule —
//! `auth-required:` for channel data before AUTH —, every plugin's filter rules) and is
//! read within the reader's access scope, deleted, removed and expired events left out. A
//! channel the reader cannot read reconciles exactly like an empty one. The set is read
//! once, in one consistent snapshot, when the session opens; the protocol itself is
//! rust-nostr's `negentropy` crate (protocol v1).
//!
//! | file | concern |
//! |---|---|
//! | `lib.rs` | manifest: name, config section and its bounds, NIP-11 `supported_nips` 77 and `sync` |
//! | `message.rs` | the grammar of `NEG-OPEN` / `NEG-MSG` / `NEG-CLOSE` (every refusal there) |
//! | `records.rs` | the reader's record set: checks, scope, one snapshot, the record bound |
//! | `set_cache.rs` | sets kept between opens, reused while the store's change mark says they are still true |
//! | `sessions.rs` | open sessions: per connection, idle timeout and lifetime |
//! | `shares.rs` | the record budget: per reader, per community (a reserve each), per process |
//! | `plugin.rs` | the running plugin: dispatch, answers, the idle sweeper |

mod message;
mod plugin;
mod records;
mod sessions;
mod set_cache;
mod shares;

pub use plugin::Reconciler;
pub use sessions::RECORD_BYTES;

use buzz_core::plugin::{AdminPanel, Plugin, PluginManifest, Services};
use buzz_core::store::Conn;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The config name: `[plugins.sync]`.
pub const NAME: &str = "sync";

/// Largest `max_sync_records` (a session holds 40 bytes per record: 200 MB at this bound).
pub const MAX_SYNC_RECORDS_BOUND: usize = 5_000_000;
/// Largest `max_records_in_memory` (4 GB of records).
pub const MAX_RECORDS_IN_MEMORY_BOUND: usize = 100_000_000;
/// Smallest `frame_size_limit` the negentropy implementation accepts.
pub const MIN_FRAME_SIZE: usize = 4_096;
/// Largest `frame_size_limit`: its hex text (twice as long) stays within the relay's
/// default 512 KiB message size, which clients commonly apply too.
pub const MAX_FRAME_SIZE: usize = 250_000;
/// Largest `max_sessions_per_connection`.
pub const MAX_SESSIONS_BOUND: usize = 64;
/// Largest `idle_timeout_secs`.
pub const MAX_IDLE_TIMEOUT_SECS: u64 = 3_600;
/// Largest `max_sessions_per_pubkey`.
pub const MAX_SESSIONS_PER_PUBKEY_BOUND: usize = 1_024;
/// Largest `max_session_secs`.
pub const MAX_SESSION_SECS_BOUND: u64 = 86_400;

/// `[plugins.sync]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Records one reconciliation may cover; a filter matching more is refused with
    /// `NEG-ERR "blocked: ..."` (narrow it with `since`/`until` or by channel).
    /// 1 to [`MAX_SYNC_RECORDS_BOUND`].
    pub max_sync_records: usize,
    /// Records all open sessions of this process may hold together (40 bytes each); an
    /// open that finds no room is refused with a retryable `error:`. At least
    /// `max_sync_records`, at most [`MAX_RECORDS_IN_MEMORY_BOUND`].
    pub max_records_in_memory: usize,
    /// Largest negentropy message the relay sends, in bytes before hex encoding
    /// ([`MIN_FRAME_SIZE`] to [`MAX_FRAME_SIZE`]); a larger answer is split over more
    /// round trips.
    pub frame_size_limit: usize,
    /// Sessions one connection may have open at once (1 to [`MAX_SESSIONS_BOUND`]).
    pub max_sessions_per_connection: usize,
    /// Seconds a session may go without a message before it is dropped (its next
    /// `NEG-MSG` is answered `NEG-ERR`); 1 to [`MAX_IDLE_TIMEOUT_SECS`].
    pub idle_timeout_secs: u64,
    /// Sessions one reader may have open at once over all its connections to this
    /// process (a reader is its authenticated pubkey, or its IP address before AUTH);
    /// 1 to [`MAX_SESSIONS_PER_PUBKEY_BOUND`].
    pub max_sessions_per_pubkey: usize,
    /// Records one reader's sessions may hold together in this process: its share of
    /// `max_records_in_memory` (1 to [`MAX_RECORDS_IN_MEMORY_BOUND`]; above
    /// `max_records_in_memory` the budget binds first). An open that finds its reader's
    /// share spent is refused `blocked:` before any row is read.
    pub max_records_per_pubkey: usize,
    /// Records of `max_records_in_memory` kept free for each community's readers
    /// whatever the other communities hold (0 to [`MAX_RECORDS_IN_MEMORY_BOUND`]; with
    /// `n` communities at most a `1/n` part of `max_records_in_memory` each). The rest goes to whoever comes
    /// first, so a relay of one community gives it the whole budget.
    pub records_reserved_per_community: usize,
    /// Seconds a session may stay open at all, however busy (1 to
    /// [`MAX_SESSION_SECS_BOUND`]): a reader cannot keep a set in memory by renewing it.
    pub max_session_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_sync_records: 500_000,
            max_records_in_memory: 2_000_000,
            frame_size_limit: 65_536,
            max_sessions_per_connection: 4,
            idle_timeout_secs: 60,
            // Twice a whole-community session: one reader's opens leave room for others.
            max_sessions_per_pubkey: 8,
            max_records_per_pubkey: 1_000_000,
            // One full set per community, at most.
            records_reserved_per_community: 500_000,
            // A reconciliation takes a few round trips; ten minutes is far beyond one.
            max_session_secs: 600,
        }
    }
}

impl Config {
    /// The NIP-11 `sync` object: every bound, under its key's name.
    pub fn nip11(&self) -> serde_json::Value {
        serde_json::json!({
            "max_sync_records": self.max_sync_records,
            "max_records_in_memory": self.max_records_in_memory,
            "frame_size_limit": self.frame_size_limit,
            "max_sessions_per_connection": self.max_sessions_per_connection,
            "idle_timeout_secs": self.idle_timeout_secs,
            "max_sessions_per_pubkey": self.max_sessions_per_pubkey,
            "max_records_per_pubkey": self.max_records_per_pubkey,
            "records_reserved_per_community": self.records_reserved_per_community,
            "max_session_secs": self.max_session_secs,
        })
    }
}

/// The manifest the binary registers.
pub struct SyncPlugin;

impl PluginManifest for SyncPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    const SUPPORTED_NIPS: &'static [u32] = &[77];
    type Config = Config;

    fn validate(config: &Config) -> anyhow::Result<()> {
        if !(1..=MAX_SYNC_RECORDS_BOUND).contains(&config.max_sync_records) {
            anyhow::bail!("max_sync_records must be from 1 to {MAX_SYNC_RECORDS_BOUND}");
        }
        if !(config.max_sync_records..=MAX_RECORDS_IN_MEMORY_BOUND)
            .contains(&config.max_records_in_memory)
        {
            anyhow::bail!(
                "max_records_in_memory must be from max_sync_records ({}) to \
                 {MAX_RECORDS_IN_MEMORY_BOUND}",
                config.max_sync_records
            );
        }
        if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&config.frame_size_limit) {
            anyhow::bail!("frame_size_limit must be from {MIN_FRAME_SIZE} to {MAX_FRAME_SIZE}");
        }
        if !(1..=MAX_SESSIONS_BOUND).contains(&config.max_sessions_per_connection) {
            anyhow::bail!("max_sessions_per_connection must be from 1 to {MAX_SESSIONS_BOUND}");
        }
        if !(1..=MAX_IDLE_TIMEOUT_SECS).contains(&config.idle_timeout_secs) {
            anyhow::bail!("idle_timeout_secs must be from 1 to {MAX_IDLE_TIMEOUT_SECS}");
        }
        if !(1..=MAX_SESSIONS_PER_PUBKEY_BOUND).contains(&config.max_sessions_per_pubkey) {
            anyhow::bail!(
                "max_sessions_per_pubkey must be from 1 to {MAX_SESSIONS_PER_PUBKEY_BOUND}"
            );
        }
        if !(1..=MAX_RECORDS_IN_MEMORY_BOUND).contains(&config.max_records_per_pubkey) {
            anyhow::bail!("max_records_per_pubkey must be from 1 to {MAX_RECORDS_IN_MEMORY_BOUND}");
        }
        if config.records_reserved_per_community > MAX_RECORDS_IN_MEMORY_BOUND {
            anyhow::bail!(
                "records_reserved_per_community must be from 0 to {MAX_RECORDS_IN_MEMORY_BOUND}"
            );
        }
        if !(1..=MAX_SESSION_SECS_BOUND).contains(&config.max_session_secs) {
            anyhow::bail!("max_session_secs must be from 1 to {MAX_SESSION_SECS_BOUND}");
        }
        Ok(())
    }

    /// Its bounds; sessions live in each relay process, not in the database.
    fn admin_panel(
        config: &Config,
        _conn: &mut Conn<'_>,
    ) -> Result<AdminPanel, buzz_core::error::Reason> {
        Ok(AdminPanel::default()
            .fact("max records per reconciliation", config.max_sync_records)
            .fact("max records in memory", config.max_records_in_memory)
            .fact("frame size limit (bytes)", config.frame_size_limit)
            .fact(
                "max sessions per connection",
                config.max_sessions_per_connection,
            )
            .fact("idle timeout (s)", config.idle_timeout_secs)
            .fact("max sessions per reader", config.max_sessions_per_pubkey)
            .fact("max records per reader", config.max_records_per_pubkey)
            .fact(
                "records reserved per community",
                config.records_reserved_per_community,
            )
            .fact("session lifetime (s)", config.max_session_secs))
    }

    fn build(config: Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Reconciler::new(config, services.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(change: impl FnOnce(&mut Config)) -> bool {
        let mut config = Config::default();
        change(&mut config);
        SyncPlugin::validate(&config).is_ok()
    }

    #[test]
    fn the_defaults_are_valid() {
        assert!(valid(|_| {}));
    }

    #[test]
    fn every_key_is_bounded_at_both_ends() {
        assert!(valid(|c| c.max_sync_records = 1));
        assert!(!valid(|c| c.max_sync_records = 0));
        assert!(valid(|c| {
            c.max_sync_records = MAX_SYNC_RECORDS_BOUND;
            c.max_records_in_memory = MAX_SYNC_RECORDS_BOUND;
        }));
        assert!(!valid(|c| {
            c.max_sync_records = MAX_SYNC_RECORDS_BOUND + 1;
            c.max_records_in_memory = MAX_RECORDS_IN_MEMORY_BOUND;
        }));
        // The process's budget holds at least one full session, and is itself bounded.
        assert!(valid(|c| c.max_records_in_memory = c.max_sync_records));
        assert!(!valid(|c| c.max_records_in_memory = c.max_sync_records - 1));
        assert!(valid(
            |c| c.max_records_in_memory = MAX_RECORDS_IN_MEMORY_BOUND
        ));
        assert!(!valid(
            |c| c.max_records_in_memory = MAX_RECORDS_IN_MEMORY_BOUND + 1
        ));
        assert!(valid(|c| c.frame_size_limit = MIN_FRAME_SIZE));
        assert!(!valid(|c| c.frame_size_limit = MIN_FRAME_SIZE - 1));
        assert!(valid(|c| c.frame_size_limit = MAX_FRAME_SIZE));
        assert!(!valid(|c| c.frame_size_limit = MAX_FRAME_SIZE + 1));
        assert!(valid(|c| c.max_sessions_per_connection = 1));
        assert!(!valid(|c| c.max_sessions_per_connection = 0));
        assert!(valid(|c| c.max_sessions_per_connection = MAX_SESSIONS_BOUND));
        assert!(!valid(
            |c| c.max_sessions_per_connection = MAX_SESSIONS_BOUND + 1
        ));
        assert!(valid(|c| c.idle_timeout_secs = 1));
        assert!(!valid(|c| c.idle_timeout_secs = 0));
        assert!(valid(|c| c.idle_timeout_secs = MAX_IDLE_TIMEOUT_SECS));
        assert!(!valid(|c| c.idle_timeout_secs = MAX_IDLE_TIMEOUT_SECS + 1));
        assert!(valid(|c| c.max_sessions_per_pubkey = 1));
        assert!(!valid(|c| c.max_sessions_per_pubkey = 0));
        assert!(valid(
            |c| c.max_sessions_per_pubkey = MAX_SESSIONS_PER_PUBKEY_BOUND
        ));
        assert!(!valid(
            |c| c.max_sessions_per_pubkey = MAX_SESSIONS_PER_PUBKEY_BOUND + 1
        ));
        // Above the process's budget they mean "all of it" (the budget binds first).
        assert!(valid(|c| c.max_records_per_pubkey = 1));
        assert!(!valid(|c| c.max_records_per_pubkey = 0));
        assert!(valid(|c| {
            c.max_records_in_memory = c.max_sync_records;
            c.max_records_per_pubkey = MAX_RECORDS_IN_MEMORY_BOUND;
        }));
        assert!(!valid(
            |c| c.max_records_per_pubkey = MAX_RECORDS_IN_MEMORY_BOUND + 1
        ));
        assert!(valid(|c| c.records_reserved_per_community = 0));
        assert!(valid(
            |c| c.records_reserved_per_community = MAX_RECORDS_IN_MEMORY_BOUND
        ));
        assert!(!valid(
            |c| c.records_reserved_per_community = MAX_RECORDS_IN_MEMORY_BOUND + 1
        ));
        assert!(valid(|c| c.max_session_secs = 1));
        assert!(!valid(|c| c.max_session_secs = 0));
        assert!(valid(|c| c.max_session_secs = MAX_SESSION_SECS_BOUND));
        assert!(!valid(|c| c.max_session_secs = MAX_SESSION_SECS_BOUND + 1));
    }

    #[test]
    fn the_largest_frame_fits_a_default_message() {
        let catalog = buzz_core::plugin::PluginCatalog::new()
            .with(buzz_core::plugin::PluginEntry::of::<SyncPlugin>());
        let settings = catalog
            .load_settings_from(None, &Default::default())
            .expect("defaults");
        // Hex doubles it; the JSON around it (verb, a 64-character id) is under 256 bytes.
        assert!(2 * MAX_FRAME_SIZE + 256 <= settings.limits.max_message_bytes);
    }

    #[test]
    fn an_unknown_key_is_refused_naming_the_section() {
        let mut section = buzz_core::config::PluginSection::default();
        section
            .options
            .insert("max_records".into(), serde_json::json!(5));
        let catalog = buzz_core::plugin::PluginCatalog::new()
            .with(buzz_core::plugin::PluginEntry::of::<SyncPlugin>());
        let plugins = std::collections::BTreeMap::from([(NAME.to_owned(), section)]);
        let err = catalog.complete(&plugins).expect_err("unknown key");
        assert!(format!("{err:#}").contains("max_records"), "{err:#}");
    }
}
