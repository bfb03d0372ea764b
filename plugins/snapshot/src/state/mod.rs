//! Where captures live: [`CaptureStore`], with the same records and the same quota rules
//! in Redis (`redis.rs`, when `storage.redis_url` is set: shared by every relay process)
//! and in the relay's database (`db.rs`, the embedded default). Never in process memory:
//! a capture started on one process is paged and completed on any other, and an
//! unreachable store is a `snapshot_unavailable`, not a fallback.
//!
//! Registration is two steps around the database capture. `reserve` takes a **lease**
//! (a slot counted like a capture, with a deadline: the operation's) after removing a
//! bounded number of expired captures and checking the reader's, its community's and
//! the relay's counts; `register` publishes the whole manifest atomically — only while
//! its lease holds, and only within the community's and the relay's byte quotas — and
//! turns the lease into the capture. Leases and captures count against the community
//! they were started in. Both steps are atomic in the store (a Lua script; a
//! transaction under an advisory lock), so concurrent starts on many processes never
//! overshoot a quota, and a start that ran past its deadline never publishes.

pub(crate) mod db;
mod redis;

pub(crate) use self::redis::RedisCaptures;
pub(crate) use db::DbCaptures;

use crate::manifest::Manifest;
use buzz_core::error::Reason;

/// A registration lease.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub id: String,
    pub community: i64,
    pub reader: String,
    pub until_ms: i64,
}

/// The shared limits a store enforces, each on its own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quota {
    /// Captures and leases of the whole relay.
    pub max_captures: usize,
    /// Captures and leases of one community.
    pub per_community: usize,
    /// Captures and leases of one reader in one community.
    pub per_reader: usize,
    /// Bytes charged to the whole relay.
    pub max_charged_bytes: usize,
    /// Bytes charged to one community.
    pub community_bytes: usize,
}

/// Expired captures removed by one allocation step or one background pass.
pub(crate) const SWEEP_STEP: usize = 2;

/// Why a reservation or registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Every shared capture slot is taken.
    Capacity,
    /// The community holds its share of the slots.
    Community,
    /// The reader holds its captures in this community already.
    Reader,
    /// The shared byte quota would be exceeded.
    Bytes,
    /// The community's share of the bytes would be exceeded.
    CommunityBytes,
    /// The lease ran out (or vanished) before registration.
    Lapsed,
}

/// May `lease` be taken beside the `active` captures and leases (community, reader)?
/// The most particular bound is named first: the reader's, its community's, the relay's.
pub(crate) fn slot_for(
    lease: &Lease,
    active: &[(i64, String)],
    quota: Quota,
) -> Result<(), Refusal> {
    let community = active.iter().filter(|(c, _)| *c == lease.community);
    let mut in_community = 0usize;
    let mut mine = 0usize;
    for (_, reader) in community {
        in_community += 1;
        if *reader == lease.reader {
            mine += 1;
        }
    }
    if mine >= quota.per_reader {
        Err(Refusal::Reader)
    } else if in_community >= quota.per_community {
        Err(Refusal::Community)
    } else if active.len() >= quota.max_captures {
        Err(Refusal::Capacity)
    } else {
        Ok(())
    }
}

/// May a capture of `bytes` be registered in a community charged `community_used`, on a
/// relay charged `relay_used`?
pub(crate) fn bytes_for(
    bytes: u64,
    community_used: u64,
    relay_used: u64,
    quota: Quota,
) -> Result<(), Refusal> {
    let over = |used: u64, max: usize| used.saturating_add(bytes) > max as u64;
    if over(community_used, quota.community_bytes) {
        Err(Refusal::CommunityBytes)
    } else if over(relay_used, quota.max_charged_bytes) {
        Err(Refusal::Bytes)
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

    const QUOTA: Quota = Quota {
        max_captures: 5,
        per_community: 3,
        per_reader: 2,
        max_charged_bytes: 100,
        community_bytes: 60,
    };

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
    fn every_count_holds_on_its_own() {
        let active = held(&[(1, "a"), (1, "a"), (1, "b")]);
        assert_eq!(
            slot_for(&lease(1, "a"), &active, QUOTA),
            Err(Refusal::Reader)
        );
        assert_eq!(
            slot_for(&lease(1, "c"), &active, QUOTA),
            Err(Refusal::Community)
        );
        // The same reader key elsewhere is another reader.
        assert_eq!(slot_for(&lease(2, "a"), &active, QUOTA), Ok(()));
        let full = held(&[(1, "a"), (1, "b"), (1, "c"), (2, "a"), (3, "a")]);
        assert_eq!(
            slot_for(&lease(4, "a"), &full, QUOTA),
            Err(Refusal::Capacity)
        );
    }

    #[test]
    fn bytes_hold_per_community_and_for_the_relay() {
        assert_eq!(bytes_for(10, 50, 50, QUOTA), Ok(()));
        assert_eq!(bytes_for(11, 50, 50, QUOTA), Err(Refusal::CommunityBytes));
        assert_eq!(bytes_for(10, 0, 91, QUOTA), Err(Refusal::Bytes));
        assert_eq!(
            bytes_for(u64::MAX, 0, 0, QUOTA),
            Err(Refusal::CommunityBytes)
        );
    }
}
