//! The NIP-98 replay guard: an auth event id is accepted once.
//!
//! Shared by all relay processes through Redis (`SET key 1 NX EX ttl`) when configured;
//! in-process otherwise. A Redis failure refuses the request (fail closed).

use crate::error::Reason;
use crate::redis_link::RedisLink;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// Guard shared by every process through Redis. Every check runs within the link's
/// deadline; no answer refuses the request (`error:` / 503), never lets it through.
pub struct RedisReplayGuard {
    link: Arc<RedisLink>,
    prefix: String,
}

impl RedisReplayGuard {
    pub fn new(link: Arc<RedisLink>, prefix: &str) -> Self {
        RedisReplayGuard {
            link,
            prefix: format!("{prefix}:replay:"),
        }
    }
}

#[async_trait::async_trait]
impl ReplayGuard for RedisReplayGuard {
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, Reason> {
        let mut set = redis::cmd("SET");
        set.arg(format!("{}{key}", self.prefix))
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        let first: Option<String> = self.link.run("authentication store", &set).await?;
        Ok(first.is_some())
    }
}
