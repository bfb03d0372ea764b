//! `[plugins.artifacts]`: the enforced limits, advertised in NIP-11 under `artifacts`.
//! Going over one refuses the request naming the limit (HTTP 400, or 413 for the answer
//! byte cap; `invalid:`); the execution budget and the process's answer memory answer
//! 503. Nothing is ever silently cut short.

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
    /// Most revisions one history query answers (and most a history page may ask for);
    /// more is refused, never cut.
    pub max_history_rows: usize,
    /// Most bytes one answer's revisions take as a JSON array (current and history;
    /// `maxAnswerBytes`). A larger answer is refused (413) before its bodies are read,
    /// naming how many fit: the client asks with that `limit` and pages with `after`.
    pub max_answer_bytes: usize,
    /// Bytes all artifact answers being built in one relay process may hold together
    /// (each is charged what its revisions take in memory before they are read). A query
    /// that cannot be admitted within its budget answers 503, having read no body.
    pub answer_memory_bytes: usize,
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
            max_answer_bytes: 8_388_608,
            answer_memory_bytes: 67_108_864,
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
            ("max_answer_bytes", self.max_answer_bytes),
        ] {
            if value == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        if !(1..=60_000).contains(&self.query_budget_ms) {
            anyhow::bail!("query_budget_ms must be between 1 and 60000");
        }
        // Charges are taken from one semaphore as u32 counts of bytes.
        if self.answer_memory_bytes < self.max_answer_bytes
            || self.answer_memory_bytes > u32::MAX as usize
        {
            anyhow::bail!(
                "answer_memory_bytes must be between max_answer_bytes and {}",
                u32::MAX
            );
        }
        Ok(())
    }

    /// Checks against core's settings: every revision the relay accepts must fit in one
    /// answer, or its artifact could never be read.
    pub fn check_core(&self, max_message_bytes: usize) -> anyhow::Result<()> {
        if self.max_answer_bytes < max_message_bytes {
            anyhow::bail!(
                "max_answer_bytes ({}) must be at least limits.max_message_bytes ({max_message_bytes}): \
                 a revision that large could never be answered",
                self.max_answer_bytes
            );
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
            "maxAnswerBytes": self.max_answer_bytes,
            "budgetMs": self.query_budget_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn the_answer_cap_holds_any_accepted_revision_and_fits_the_memory() {
        let limits = Limits::default();
        assert!(limits.validate().is_ok());
        assert!(limits.check_core(524_288).is_ok());
        assert!(limits.check_core(limits.max_answer_bytes + 1).is_err());
        let small_memory = Limits {
            answer_memory_bytes: limits.max_answer_bytes - 1,
            ..Limits::default()
        };
        assert!(small_memory.validate().is_err());
        let no_cap = Limits {
            max_answer_bytes: 0,
            ..Limits::default()
        };
        assert!(no_cap.validate().is_err());
    }
}
