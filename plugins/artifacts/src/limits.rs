//! `[plugins.artifacts]`: the enforced limits, advertised in NIP-11 under `artifacts`.
//! Going over one refuses the request naming the limit (HTTP 400 / `invalid:`); the
//! execution budget answers 503. Nothing is ever silently cut short.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The section's keys besides `enabled`, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Longest client-defined tag name, in a revision and in a query predicate (bytes).
    pub max_tag_name_bytes: usize,
    /// Longest first value of a client-defined tag, in a revision and in a query (bytes).
    pub max_tag_value_bytes: usize,
    /// All strings of all tags of one revision together (bytes).
    pub max_tag_bytes: usize,
    /// Tag names one current-state query may match on.
    pub max_predicates: usize,
    /// Values one query may list, all names together (history `#d` included).
    pub max_values: usize,
    /// Most artifacts one current-state page answers.
    pub max_page_size: usize,
    /// Most revisions one history query answers; more is refused, never cut.
    pub max_history_rows: usize,
    /// Wall time of one query, database and loading included (ms).
    pub query_budget_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_tag_name_bytes: 64,
            max_tag_value_bytes: 1024,
            max_tag_bytes: 65_536,
            max_predicates: 8,
            max_values: 64,
            max_page_size: 500,
            max_history_rows: 1_000,
            query_budget_ms: 2_000,
        }
    }
}

impl Limits {
    /// Checks serde cannot express.
    pub fn validate(&self) -> anyhow::Result<()> {
        // The tag index holds first values up to 1,024 bytes; a longer one could never
        // be matched, so it may not be accepted as matchable either.
        if self.max_tag_value_bytes == 0 || self.max_tag_value_bytes > 1_024 {
            anyhow::bail!("max_tag_value_bytes must be between 1 and 1024");
        }
        for (name, value) in [
            ("max_tag_name_bytes", self.max_tag_name_bytes),
            ("max_tag_bytes", self.max_tag_bytes),
            ("max_predicates", self.max_predicates),
            ("max_values", self.max_values),
            ("max_page_size", self.max_page_size),
            ("max_history_rows", self.max_history_rows),
        ] {
            if value == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        if !(1..=60_000).contains(&self.query_budget_ms) {
            anyhow::bail!("query_budget_ms must be between 1 and 60000");
        }
        Ok(())
    }

    /// The NIP-11 `artifacts` object.
    pub fn nip11(&self) -> Value {
        json!({
            "version": 1,
            "queries": ["current", "history"],
            "maxTagNameBytes": self.max_tag_name_bytes,
            "maxTagValueBytes": self.max_tag_value_bytes,
            "maxTagBytes": self.max_tag_bytes,
            "maxTags": crate::envelope::MAX_TAGS,
            "maxPredicates": self.max_predicates,
            "maxValues": self.max_values,
            "maxPageSize": self.max_page_size,
            "maxHistoryRows": self.max_history_rows,
            "budgetMs": self.query_budget_ms,
        })
    }
}
