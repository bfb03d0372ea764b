//! Where captures live: [`CaptureStore`], with the same records and the same quota rules
//! in Redis (`redis.rs`, when `storage.redis_url` is set: shared by every relay process)
//! and in the relay's database (`db.rs`, the embedded default). Never in process memory:
//! a capture started on one process is paged and completed on any other, and an
//! unreachable store is a `snapshot_unavailable`, not a fallback.
//!
//! Registration is two steps around the database capture. `reserve` takes a **lease**
//! (a slot counted like a capture, with a deadline: the operation's) after removing a
//! bounded number of expired captures and checking the shared and per-reader counts;
//! `register` publishes the whole manifest atomically — only while its lease holds,
//! and only within the shared byte quota — and turns the lease into the capture. So
//! concurrent starts on many processes never overshoot a quota, and a start that ran
//! past its deadline never publishes.

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

/// The shared limits a store enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quota {
    pub max_captures: usize,
    pub per_reader: usize,
    pub max_charged_bytes: usize,
}

/// Expired captures removed by one allocation step or one background pass.
pub(crate) const SWEEP_STEP: usize = 2;

/// Why a reservation or registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Every shared capture slot is taken.
    Capacity,
    /// The reader holds its captures in this community already.
    Reader,
    /// The shared byte quota would be exceeded.
    Bytes,
    /// The lease ran out (or vanished) before registration.
    Lapsed,
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
    /// Remove up to [`SWEEP_STEP`] expired captures, then take `lease` if the shared
    /// and per-reader counts allow (leases count as captures).
    async fn reserve(
        &self,
        lease: &Lease,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason>;

    /// Publish `manifest` atomically as the capture of its lease (same id), if the
    /// lease still holds and the byte quota allows; page 0 is marked served.
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
