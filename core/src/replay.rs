//! The NIP-98 replay guard: an auth event id is accepted once.
//!
//! Shared by all relay processes through Redis (`SET key 1 NX EX ttl`) when configured;
//! in-process otherwise. A Redis failure refuses the request (fail closed).

use crate::error::Reason;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[async_trait::async_trait]
pub trait ReplayGuard: Send + Sync + 'static {
    /// `Ok(true)` the first time `key` is seen within `ttl`; `Ok(false)` on a replay.
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, Reason>;
}

/// In-process guard for the embedded mode.
#[derive(Default)]
pub struct MemoryReplayGuard {
    seen: Mutex<HashMap<String, Instant>>,
}

#[async_trait::async_trait]
impl ReplayGuard for MemoryReplayGuard {
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, Reason> {
        let now = Instant::now();
        let mut seen = self
            .seen
            .lock()
            .map_err(|_| Reason::Internal(anyhow::anyhow!("replay guard lock poisoned")))?;
        // Prune expired entries now and then so memory stays bounded by traffic in `ttl`.
        if seen.len() > 10_000 {
            seen.retain(|_, expires| *expires > now);
        }
        match seen.get(key) {
            Some(expires) if *expires > now => Ok(false),
            _ => {
                seen.insert(key.to_owned(), now + ttl);
                Ok(true)
            }
        }
    }
}

/// Guard shared by every process through Redis.
pub struct RedisReplayGuard {
    conn: redis::aio::ConnectionManager,
    prefix: String,
}

impl RedisReplayGuard {
    pub fn new(conn: redis::aio::ConnectionManager, prefix: &str) -> Self {
        RedisReplayGuard {
            conn,
            prefix: format!("{prefix}:replay:"),
        }
    }
}

#[async_trait::async_trait]
impl ReplayGuard for RedisReplayGuard {
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, Reason> {
        let mut conn = self.conn.clone();
        let set: Option<String> = redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(ttl.as_secs().max(1))
            .query_async(&mut conn)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "replay guard: redis failed; refusing the request");
                Reason::Unavailable("authentication store unavailable".into())
            })?;
        Ok(set.is_some())
    }
}
