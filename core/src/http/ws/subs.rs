//! One connection's open subscriptions, found by id (REQ, CLOSE) and by live key
//! (deliveries).
//!
//! A list, not two hash maps: a team-chat connection holds one to a few subscriptions
//! all day and at most `limits.max_subscriptions` (64 by default), so a scan costs less
//! than hashing, and the list's one allocation is exactly as long as it holds (two hash
//! maps took about 490 bytes for one subscription; 10,000 idle connections with one REQ
//! each measured in docs/benchmarks.md "Idle connections").

use super::answered::Answered;
use crate::live::SubKey;

pub(super) struct Sub {
    /// The client's subscription id.
    pub(super) id: String,
    pub(super) key: SubKey,
    pub(super) filter_bytes: usize,
    /// The ids its stored answer sent, while a live copy of one may still arrive.
    pub(super) answered: Option<Answered>,
}

#[derive(Default)]
pub(super) struct Subs {
    list: Vec<Sub>,
}

impl Subs {
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn get(&self, id: &str) -> Option<&Sub> {
        self.list.iter().find(|s| s.id == id)
    }

    /// The subscription a live delivery names by `key`.
    pub(super) fn by_key_mut(&mut self, key: SubKey) -> Option<&mut Sub> {
        self.list.iter_mut().find(|s| s.key == key)
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Sub> {
        let at = self.list.iter().position(|s| s.id == id)?;
        let sub = self.list.swap_remove(at);
        if self.list.is_empty() {
            // A connection back to no subscription holds nothing for them.
            self.list = Vec::new();
        }
        Some(sub)
    }

    /// Add `sub`, whose id is not open (the caller closed it first).
    pub(super) fn insert(&mut self, sub: Sub) {
        // Grown one at a time: the list stays as long as what it holds.
        self.list.reserve_exact(1);
        self.list.push(sub);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: &str, key: SubKey) -> Sub {
        Sub {
            id: id.to_owned(),
            key,
            filter_bytes: 10,
            answered: None,
        }
    }

    #[test]
    fn found_by_id_and_by_key_until_removed() {
        let mut subs = Subs::default();
        subs.insert(sub("a", 1));
        subs.insert(sub("b", 2));
        assert_eq!(subs.len(), 2);
        assert_eq!(subs.get("b").map(|s| s.key), Some(2));
        assert_eq!(
            subs.by_key_mut(1).map(|s| s.id.clone()),
            Some("a".to_owned())
        );
        assert_eq!(subs.remove("a").map(|s| s.key), Some(1));
        assert!(subs.get("a").is_none() && subs.by_key_mut(1).is_none());
        assert_eq!(subs.remove("b").map(|s| s.key), Some(2));
        assert_eq!(subs.len(), 0);
        assert_eq!(subs.list.capacity(), 0);
    }
}
