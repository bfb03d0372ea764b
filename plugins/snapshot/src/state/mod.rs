//! Where captures live: [`CaptureStore`], with the same records and the same quota rules
//! in Redis (`redis.rs`, when `storage.redis_url` is set: shared by every relay process)
//! and in the relay's database (`db.rs`, the embedded default). Never in process memory:
//! a capture started on one process is paged and completed on any other, and an
//! unreachable store is a `snapshot_unavailable`, not a fallback.
//!
//! Registration is two steps around the database capture. `reserve` takes a **lease**
//! (a slot counted like a capture, with a deadline: the operation's) after removing a
//! bounded number of expired captures and checking the reader's count, the other
//! communities' reserves and the relay's count; `register` publishes the whole manifest
//! atomically — only while its lease holds, and only within the relay's bytes less the
//! other communities' unused byte reserves — and turns the lease into the capture.
//! Leases and captures count against the community they were started in. A community's
//! reserve ([`Quota::reserved_captures`], [`Quota::reserved_bytes`]) is what it may
//! always take, whatever other communities hold; what no community's reserve keeps is
//! first come, first served, so a relay of one community gives it every capture. Both steps are atomic in the store (a Lua script; a
//! transaction under an advisory lock), so concurrent starts on many processes never
//! overshoot a quota, and a start that ran past its deadline never publishes.

pub(crate) mod db;
mod redis;

pub(crate) use self::redis::RedisCaptures;
pub(crate) use db::DbCaptures;

use crate::limits::Limits;
use crate::manifest::Manifest;
use buzz_core::error::Reason;
use std::collections::HashMap;
use std::sync::Arc;

/// A registration lease.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub id: String,
    pub community: i64,
    pub reader: String,
    pub until_ms: i64,
}

/// The shared limits a store enforces, each on its own.
#[derive(Debug, Clone)]
pub(crate) struct Quota {
    /// Captures and leases of the whole relay.
    pub max_captures: usize,
    /// Captures and leases of one reader in one community.
    pub per_reader: usize,
    /// Bytes charged to the whole relay.
    pub max_charged_bytes: usize,
    /// Captures kept for each community (at most `1/n` of `max_captures`).
    pub reserved_captures: usize,
    /// Bytes kept for each community (at most `1/n` of `max_charged_bytes`).
    pub reserved_bytes: usize,
    /// Every community of the relay: each keeps its reserve.
    pub communities: Arc<[i64]>,
}

impl Quota {
    /// `limits` on a relay of `communities`, the reserves brought within the relay's
    /// limits.
    pub(crate) fn new(limits: &Limits, communities: Arc<[i64]>) -> Quota {
        let n = communities.len().max(1);
        Quota {
            max_captures: limits.max_captures,
            per_reader: limits.captures_per_reader,
            max_charged_bytes: limits.max_charged_bytes,
            reserved_captures: limits
                .captures_reserved_per_community
                .min(limits.max_captures / n),
            reserved_bytes: limits
                .charged_bytes_reserved_per_community
                .min(limits.max_charged_bytes / n),
            communities,
        }
    }

    /// What the communities other than `community` keep unused of their `reserve`, each
    /// holding `held(c)`.
    fn kept_for_others(&self, community: i64, reserve: u64, held: impl Fn(i64) -> u64) -> u64 {
        self.communities
            .iter()
            .filter(|c| **c != community)
            .map(|c| reserve.saturating_sub(held(*c)))
            .sum()
    }
}

/// Expired captures removed by one allocation step or one background pass.
pub(crate) const SWEEP_STEP: usize = 2;

/// Why a reservation or registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Every shared capture slot is taken.
    Capacity,
    /// The free slots are other communities' reserves.
    Community,
    /// The reader holds its captures in this community already.
    Reader,
    /// The shared byte quota would be exceeded.
    Bytes,
    /// The free bytes are other communities' reserves.
    CommunityBytes,
    /// The lease ran out (or vanished) before registration.
    Lapsed,
}

/// May `lease` be taken beside the `active` captures and leases (community, reader)?
/// The most particular bound is named first: the reader's, the relay's, then the other
/// communities' reserves.
pub(crate) fn slot_for(
    lease: &Lease,
    active: &[(i64, String)],
    quota: &Quota,
) -> Result<(), Refusal> {
    let mut per_community: HashMap<i64, u64> = HashMap::new();
    let mut mine = 0usize;
    for (community, reader) in active {
        *per_community.entry(*community).or_default() += 1;
        if *community == lease.community && *reader == lease.reader {
            mine += 1;
        }
    }
    let held = |c: i64| per_community.get(&c).copied().unwrap_or(0);
    let kept = quota.kept_for_others(lease.community, quota.reserved_captures as u64, held);
    if mine >= quota.per_reader {
        Err(Refusal::Reader)
    } else if active.len() >= quota.max_captures {
        Err(Refusal::Capacity)
    } else if active.len() as u64 + 1 + kept > quota.max_captures as u64 {
        Err(Refusal::Community)
    } else {
        Ok(())
    }
}

/// May a capture of `bytes` be registered in `community`, beside the registered
/// captures' `charged` (community, bytes)?
pub(crate) fn bytes_for(
    community: i64,
    bytes: u64,
    charged: &[(i64, u64)],
    quota: &Quota,
) -> Result<(), Refusal> {
    let mut per_community: HashMap<i64, u64> = HashMap::new();
    for (c, b) in charged {
        *per_community.entry(*c).or_default() += b;
    }
    let used: u64 = per_community.values().sum();
    let held = |c: i64| per_community.get(&c).copied().unwrap_or(0);
    let kept = quota.kept_for_others(community, quota.reserved_bytes as u64, held);
    let after = used.saturating_add(bytes);
    if after > quota.max_charged_bytes as u64 {
        Err(Refusal::Bytes)
    } else if after.saturating_add(kept) > quota.max_charged_bytes as u64 {
        Err(Refusal::CommunityBytes)
    } else {
        Ok(())
    }
}

/// One capture, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureInfo {
    pub id: String,
    pub community: i64,
    pub reader: String,
    /// `false` while it is a lease (being captured).
    pub registered: bool,
    pub query: String,
    pub created_ms: i64,
    /// Expiry, or the lease's deadline.
    pub until_ms: i64,
    pub entries: u64,
    pub pages: u32,
    pub pages_served: u32,
    pub bytes: u64,
}

#[async_trait::async_trait]
pub(crate) trait CaptureStore: Send + Sync {
    /// Remove up to [`SWEEP_STEP`] expired captures, then take `lease` if the reader's,
    /// its community's and the relay's counts allow (leases count as captures).
    async fn reserve(
        &self,
        lease: &Lease,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason>;

    /// Publish `manifest` atomically as the capture of its lease (same id), if the
    /// lease still holds and its community's and the relay's byte quotas allow; page 0
    /// is marked served.
    async fn register(
        &self,
        manifest: &Manifest,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason>;

    /// Give a lease back (the capture failed). Best effort: it expires anyway.
    async fn release(&self, id: &str);

    /// These records of capture `id` (`None` where absent), fetched by name only.
    async fn records(&self, id: &str, names: &[String]) -> Result<Vec<Option<String>>, Reason>;

    /// Record that page `page` was served; `false` when the capture is gone.
    async fn mark_served(&self, id: &str, page: u32) -> Result<bool, Reason>;

    /// Remove up to `step` expired captures; how many were removed.
    async fn sweep(&self, now_ms: i64, step: usize) -> Result<usize, Reason>;

    /// Remove every capture, lease and charge of `community`; how many captures.
    async fn forget_community(&self, community: i64) -> Result<usize, Reason>;

    /// Every capture and lease, for operators.
    async fn list(&self) -> Result<Vec<CaptureInfo>, Reason>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five captures and 100 bytes; a reserve of one capture and 20 bytes for each of
    /// three communities.
    fn quota(communities: &[i64]) -> Quota {
        let limits = Limits {
            max_captures: 5,
            captures_per_reader: 2,
            max_charged_bytes: 100,
            captures_reserved_per_community: 1,
            charged_bytes_reserved_per_community: 20,
            ..Limits::default()
        };
        Quota::new(&limits, communities.into())
    }

    fn lease(community: i64, reader: &str) -> Lease {
        Lease {
            id: "new".into(),
            community,
            reader: reader.into(),
            until_ms: 0,
        }
    }

    fn held(list: &[(i64, &str)]) -> Vec<(i64, String)> {
        list.iter().map(|(c, r)| (*c, (*r).to_owned())).collect()
    }

    #[test]
    fn other_communities_keep_their_reserve_of_slots() {
        let q = quota(&[1, 2, 3]);
        let active = held(&[(1, "a"), (1, "a"), (1, "b")]);
        assert_eq!(slot_for(&lease(1, "a"), &active, &q), Err(Refusal::Reader));
        // Three held, two kept for communities 2 and 3.
        assert_eq!(
            slot_for(&lease(1, "c"), &active, &q),
            Err(Refusal::Community)
        );
        // The same reader key elsewhere is another reader, within its reserve.
        assert_eq!(slot_for(&lease(2, "a"), &active, &q), Ok(()));
        let full = held(&[(1, "a"), (1, "b"), (1, "c"), (2, "a"), (3, "a")]);
        assert_eq!(slot_for(&lease(3, "b"), &full, &q), Err(Refusal::Capacity));
    }

    #[test]
    fn a_lone_community_takes_every_slot() {
        let q = quota(&[1]);
        let four = held(&[(1, "a"), (1, "b"), (1, "c"), (1, "d")]);
        assert_eq!(slot_for(&lease(1, "e"), &four, &q), Ok(()));
        // A reserve larger than its part of the relay is kept within it.
        let big = Limits {
            captures_reserved_per_community: 32,
            ..Limits::default()
        };
        assert_eq!(Quota::new(&big, [1, 2, 3, 4].into()).reserved_captures, 8);
    }

    #[test]
    fn other_communities_keep_their_reserve_of_bytes() {
        let q = quota(&[1, 2, 3]);
        // 60 free for community 1 while 2 and 3 hold nothing.
        assert_eq!(bytes_for(1, 60, &[], &q), Ok(()));
        assert_eq!(bytes_for(1, 61, &[], &q), Err(Refusal::CommunityBytes));
        // Community 2 above its reserve keeps nothing more; community 3 keeps its 20.
        assert_eq!(bytes_for(1, 10, &[(1, 40), (2, 30)], &q), Ok(()));
        assert_eq!(
            bytes_for(1, 11, &[(1, 40), (2, 30)], &q),
            Err(Refusal::CommunityBytes)
        );
        assert_eq!(bytes_for(3, 30, &[(1, 40), (2, 30)], &q), Ok(()));
        assert_eq!(
            bytes_for(3, 31, &[(1, 40), (2, 30)], &q),
            Err(Refusal::Bytes)
        );
        assert_eq!(bytes_for(1, u64::MAX, &[], &q), Err(Refusal::Bytes));
        // Alone, a community has every byte.
        assert_eq!(bytes_for(1, 100, &[], &quota(&[1])), Ok(()));
    }
}
