//! `buzz.rate_limit(key, limit, window_secs)`: fixed-window counters behind a small trait,
//! in-process for embedded mode ([`MemoryRateLimiter`]) and shared by every relay process
//! when Redis is configured ([`crate::RedisRateLimiter`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A fixed-window counter store.
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one hit on `key` in the current window of `window_secs` seconds (the window
    /// starts at the key's first hit). Returns `Ok(true)` while the count is at most
    /// `limit`, `Ok(false)` once it is over. `Err` means the counter could not be reached;
    /// the engine then fails the whole check (fail closed).
    fn hit(&self, key: &str, limit: u64, window_secs: u64) -> Result<bool, String>;
}

/// In-process counters (embedded, single-process mode). Expired windows are pruned as the
/// map grows, so memory stays bounded by the number of keys active within a window.
#[derive(Debug, Default)]
pub struct MemoryRateLimiter {
    /// One mutex: a hit is a hash lookup and an add, far cheaper than the script around it.
    windows: Mutex<Windows>,
}

#[derive(Debug, Default)]
struct Windows {
    map: HashMap<String, Window>,
    /// Prune expired windows when the map reaches this size (doubles with live keys).
    prune_at: usize,
}

#[derive(Debug)]
struct Window {
    expires: Instant,
    count: u64,
}

const MIN_PRUNE_AT: usize = 1024;

impl MemoryRateLimiter {
    pub fn new() -> MemoryRateLimiter {
        MemoryRateLimiter::default()
    }
}

impl RateLimiter for MemoryRateLimiter {
    fn hit(&self, key: &str, limit: u64, window_secs: u64) -> Result<bool, String> {
        if window_secs == 0 {
            return Err("window_secs must be at least 1".to_owned());
        }
        let now = Instant::now();
        let mut windows = self
            .windows
            .lock()
            .map_err(|_| "rate limiter lock poisoned".to_owned())?;
        if windows.map.len() >= windows.prune_at.max(MIN_PRUNE_AT) {
            windows.map.retain(|_, w| w.expires > now);
            windows.prune_at = (windows.map.len() * 2).max(MIN_PRUNE_AT);
        }
        let window = windows.map.entry(key.to_owned()).or_insert(Window {
            expires: now,
            count: 0,
        });
        if window.expires <= now {
            window.expires = now + Duration::from_secs(window_secs);
            window.count = 0;
        }
        window.count = window.count.saturating_add(1);
        Ok(window.count <= limit)
    }
}
