//! What a subscription's stored answer already sent, so its live copy is not sent again.
//!
//! A subscription listens before its stored answer is read (nothing stored meanwhile is
//! missed), so an event committed just before that read is in the answer while its live
//! copy may still be on its way through the fan-out: without this, the client would get
//! it twice. The live side drops an event whose id the answer held.
//!
//! Ids, not sequence numbers: on PostgreSQL several relay processes draw from one
//! sequence and commit in their own order, so "every seq up to the highest the read
//! saw" would also cover an event committed later by another process, which the read
//! did not see and whose live copy is the only one the client gets.

use std::time::{Duration, Instant};

/// After this long, every live copy of an event committed before the stored read has
/// long reached the connection (a publish follows its commit and is bounded by the
/// bus's own deadlines, seconds at most), so the ids are dropped.
const HORIZON: Duration = Duration::from_secs(60);

/// The ids of one stored answer, as the first 128 bits of each (ids are SHA-256: two
/// events sharing them would need a collision no one can compute).
pub(super) struct Answered {
    ids: Vec<u128>,
    until: Instant,
}

impl Answered {
    pub(super) fn new() -> Self {
        Answered {
            ids: Vec::new(),
            until: Instant::now() + HORIZON,
        }
    }

    /// Record an id the answer sent.
    pub(super) fn push(&mut self, id: &str) {
        if let Some(key) = key(id) {
            self.ids.push(key);
        }
    }

    /// Ready for lookups (once, at EOSE). `None` when nothing was sent.
    pub(super) fn seal(mut self) -> Option<Self> {
        if self.ids.is_empty() {
            return None;
        }
        self.ids.sort_unstable();
        self.ids.dedup();
        self.ids.shrink_to_fit();
        Some(self)
    }

    /// The answer sent `id`.
    pub(super) fn holds(&self, id: &str) -> bool {
        key(id).is_some_and(|k| self.ids.binary_search(&k).is_ok())
    }

    /// No live copy of an answered event can still be on its way.
    pub(super) fn expired(&self, now: Instant) -> bool {
        now >= self.until
    }
}

fn key(id: &str) -> Option<u128> {
    u128::from_str_radix(id.get(..32)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_exactly_what_was_pushed() {
        let a = "a".repeat(64);
        let b = format!("{}{}", "a".repeat(32), "b".repeat(32));
        let c = "c".repeat(64);
        let mut answered = Answered::new();
        answered.push(&c);
        answered.push(&a);
        let answered = answered.seal().expect("not empty");
        assert!(answered.holds(&a) && answered.holds(&c));
        // Same first 128 bits: treated as the same event (see the type's note).
        assert!(answered.holds(&b));
        assert!(!answered.holds(&"d".repeat(64)));
        assert!(!answered.holds("not hex at all, not hex at all, x"));
        assert!(!answered.expired(Instant::now()));
        assert!(answered.expired(Instant::now() + HORIZON));
    }

    #[test]
    fn an_empty_answer_keeps_nothing() {
        assert!(Answered::new().seal().is_none());
    }
}
