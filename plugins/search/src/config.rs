//! `[plugins.search]`: what is indexed and the bounds of a search, advertised in NIP-11
//! under `search`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The section's keys besides `enabled`, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Kinds indexed and searched: kind 1, the conversation kinds (9, 40002, 45001,
    /// 45003), edits (40003) and artifact revisions (45010: the current revision's title
    /// and content).
    pub kinds: Vec<u32>,
    /// Longest search string (UTF-8 bytes); longer is `invalid:`.
    pub max_search_bytes: usize,
    /// Most words one search may hold (phrase words included).
    pub max_terms: usize,
    /// Matches ranked per filter: the newest this many within the reader's scope and the
    /// filter's fields. Bounds the cost of a common word; `limit` is taken from them.
    pub max_candidates: usize,
    /// Stored events (of any kind, by storage order) the backfill looks at per write
    /// transaction.
    pub backfill_batch: usize,
    /// Most distinct search filters one REQ, COUNT or `POST /query` may hold (identical
    /// ones count once); more is `invalid:`. Each is its own index walk.
    pub max_search_filters: usize,
    /// Text (bytes of content and tags) one query reads to rank its candidates: the
    /// newest candidates of all its filters are ranked until this much, older ones are
    /// not read. Bounds the time and memory one query takes over large messages.
    pub max_ranked_bytes: usize,
    /// Bytes of candidate text all searches being ranked in this relay process may hold
    /// together: each page of bodies reserves its bytes before it is read, waiting for
    /// room at most a few seconds, then `error:` (busy).
    pub rank_memory_bytes: usize,
    /// Index matches one search filter examines: a REQ's candidates come from the
    /// newest this many (within the reader's scope, whatever the filter's other fields
    /// leave of them); past them a COUNT is NIP-45 `approximate` (a lower bound) rather
    /// than the end of an unbounded walk.
    pub max_count_rows: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            kinds: vec![1, 9, 40_002, 40_003, 45_001, 45_003, 45_010],
            max_search_bytes: 256,
            max_terms: 8,
            max_candidates: 1_000,
            backfill_batch: 500,
            max_search_filters: 4,
            max_ranked_bytes: 8 * 1024 * 1024,
            rank_memory_bytes: 64 * 1024 * 1024,
            max_count_rows: 10_000,
        }
    }
}

impl Config {
    /// Checks serde cannot express.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.kinds.is_empty() {
            anyhow::bail!("kinds must list at least one kind (disable the plugin instead)");
        }
        if !(1..=4_096).contains(&self.max_search_bytes) {
            anyhow::bail!("max_search_bytes must be between 1 and 4096");
        }
        if !(1..=64).contains(&self.max_terms) {
            anyhow::bail!("max_terms must be between 1 and 64");
        }
        if !(1..=100_000).contains(&self.max_candidates) {
            anyhow::bail!("max_candidates must be between 1 and 100000");
        }
        if !(1..=10_000).contains(&self.backfill_batch) {
            anyhow::bail!("backfill_batch must be between 1 and 10000");
        }
        if !(1..=64).contains(&self.max_search_filters) {
            anyhow::bail!("max_search_filters must be between 1 and 64");
        }
        if !(1_024..=1 << 30).contains(&self.max_ranked_bytes) {
            anyhow::bail!("max_ranked_bytes must be between 1024 and 1073741824");
        }
        if !(1 << 20..=u32::MAX as usize).contains(&self.rank_memory_bytes) {
            anyhow::bail!("rank_memory_bytes must be between 1048576 and 4294967295");
        }
        if !(1..=1_000_000).contains(&self.max_count_rows) {
            anyhow::bail!("max_count_rows must be between 1 and 1000000");
        }
        Ok(())
    }

    /// The NIP-11 `search` field.
    pub fn nip11(&self) -> Value {
        json!({
            "kinds": self.kinds,
            "max_search_bytes": self.max_search_bytes,
            "max_terms": self.max_terms,
            "max_candidates": self.max_candidates,
            "max_search_filters": self.max_search_filters,
            "max_ranked_bytes": self.max_ranked_bytes,
            "max_count_rows": self.max_count_rows,
            "rank_memory_bytes": self.rank_memory_bytes,
            "syntax": ["words", "\"phrase\"", "prefix*"],
        })
    }
}
