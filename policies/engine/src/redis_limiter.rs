//! [`RedisRateLimiter`]: the same fixed windows as [`crate::MemoryRateLimiter`], kept in
//! Redis so that several relay processes share one count.

use std::sync::Mutex;
use std::time::Duration;

use crate::rate_limit::RateLimiter;

/// INCR, and start the window (EXPIRE) on the first hit — or if the key somehow lost its
/// TTL — atomically in one round trip.
const HIT_SCRIPT: &str = r"
local n = redis.call('INCR', KEYS[1])
if n == 1 or redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return n
";

/// Fixed-window counters in Redis, keys `<prefix><script key>`.
///
/// Uses the blocking client: a policy check runs synchronously inside a request and a hit
/// is one short round trip. Connections are kept in a small pool so concurrent checks on
/// different threads do not queue behind one socket; a connection that fails is dropped
/// and the next hit opens a fresh one.
pub struct RedisRateLimiter {
    client: redis::Client,
    prefix: String,
    timeout: Duration,
    script: redis::Script,
    /// Idle connections; popped for a hit, pushed back after a successful one.
    pool: Mutex<Vec<redis::Connection>>,
}

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 16;

impl RedisRateLimiter {
    /// `url` like `redis://127.0.0.1:6379`; every key is prefixed with `prefix` (e.g.
    /// `buzz:ratelimit:`). No connection is made until the first hit.
    pub fn new(
        url: &str,
        prefix: impl Into<String>,
    ) -> Result<RedisRateLimiter, redis::RedisError> {
        Ok(RedisRateLimiter {
            client: redis::Client::open(url)?,
            prefix: prefix.into(),
            timeout: Duration::from_millis(500),
            script: redis::Script::new(HIT_SCRIPT),
            pool: Mutex::new(Vec::new()),
        })
    }

    /// Connect/read/write timeout of one hit (default 500 ms). A hit that times out is an
    /// error, so the check fails closed instead of hanging.
    pub fn with_timeout(mut self, timeout: Duration) -> RedisRateLimiter {
        self.timeout = timeout;
        self
    }

    /// The full Redis key used for a script key.
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key)
    }

    fn connection(&self) -> redis::RedisResult<redis::Connection> {
        if let Some(con) = self.pool.lock().ok().and_then(|mut p| p.pop()) {
            return Ok(con);
        }
        let con = self.client.get_connection_with_timeout(self.timeout)?;
        con.set_read_timeout(Some(self.timeout))?;
        con.set_write_timeout(Some(self.timeout))?;
        Ok(con)
    }
}

impl std::fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RateLimiter for RedisRateLimiter {
    fn hit(&self, key: &str, limit: u64, window_secs: u64) -> Result<bool, String> {
        if window_secs == 0 {
            return Err("window_secs must be at least 1".to_owned());
        }
        let mut con = self
            .connection()
            .map_err(|e| format!("redis connection failed: {e}"))?;
        let count: u64 = self
            .script
            .key(self.redis_key(key))
            .arg(window_secs)
            .invoke(&mut con)
            .map_err(|e| format!("redis rate-limit hit failed: {e}"))?;
        if let Ok(mut pool) = self.pool.lock() {
            if pool.len() < MAX_IDLE {
                pool.push(con);
            }
        }
        Ok(count <= limit)
    }
}
