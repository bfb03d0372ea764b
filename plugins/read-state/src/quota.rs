//! The per-reader request quota of the `/buzz/v1` routes: each signer may make
//! `quota_requests` requests per community in every fixed window of `quota_window_secs`
//! (windows aligned on the epoch, so every process agrees where one ends). A request
//! over the quota answers 429 with the API's error body and `Retry-After: <seconds until
//! the window ends>`; it does no other work.
//!
//! Where the counts live: in this process when `storage.redis_url` is unset (one relay
//! process), in Redis otherwise, so several processes behind one host share one quota.
//! Redis being unreachable fails closed: the request answers 503 (the API's
//! "temporarily unavailable", with `Retry-After`), never an unmetered pass.

use crate::Config;
use buzz_core::error::Reason;
use buzz_core::redis_link::RedisLink;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Local counters kept before old windows are swept out (bounds memory by the readers
/// active in one window, not by every reader ever seen).
const SWEEP_AT: usize = 16_384;

/// Counts in Redis: one key per (community, signer, window), created with an expiry, so
/// nothing outlives its window for long. `INCR` and the first `PEXPIRE` are one script,
/// so a key is never left without an expiry.
const TAKE_SCRIPT: &str = "local n = redis.call('INCR', KEYS[1]) \
    if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n";

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    /// Over the quota; retry after this many seconds (the rest of the window, ≥ 1).
    Limited {
        retry_after_secs: u64,
    },
}

enum Counts {
    Local(Mutex<HashMap<(i64, String), (i64, u64)>>),
    Shared {
        redis: Arc<RedisLink>,
        prefix: String,
    },
}

pub(crate) struct Quota {
    requests: u64,
    window_secs: i64,
    counts: Counts,
}

impl Quota {
    /// In Redis when `redis` is given (every process shares it), else in this process.
    pub(crate) fn new(config: &Config, redis: Option<Arc<RedisLink>>, prefix: &str) -> Quota {
        let counts = match redis {
            Some(redis) => Counts::Shared {
                redis,
                prefix: format!("{prefix}:read_state:quota:"),
            },
            None => Counts::Local(Mutex::new(HashMap::new())),
        };
        Quota {
            requests: config.quota_requests,
            // `validate` refuses 0; the bound keeps the window arithmetic in range.
            window_secs: i64::try_from(config.quota_window_secs.clamp(1, 86_400)).unwrap_or(60),
            counts,
        }
    }

    /// Count one request of `pubkey` in `community` at `now_secs`.
    pub(crate) async fn take(
        &self,
        community: i64,
        pubkey: &str,
        now_secs: i64,
    ) -> Result<Verdict, Reason> {
        let window = now_secs.div_euclid(self.window_secs);
        let count = match &self.counts {
            Counts::Local(map) => {
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                if map.len() >= SWEEP_AT {
                    map.retain(|_, (w, _)| *w == window);
                }
                let slot = map
                    .entry((community, pubkey.to_owned()))
                    .or_insert((window, 0));
                if slot.0 != window {
                    *slot = (window, 0);
                }
                slot.1 += 1;
                slot.1
            }
            Counts::Shared { redis, prefix } => {
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(TAKE_SCRIPT)
                    .arg(1)
                    .arg(format!("{prefix}{community}:{pubkey}:{window}"))
                    // Kept a window longer than needed: clocks of processes differ a little.
                    .arg(self.window_secs * 2 * 1000);
                let n: i64 = redis.run("read-state quota", &cmd).await?;
                u64::try_from(n).unwrap_or(u64::MAX)
            }
        };
        if count <= self.requests {
            return Ok(Verdict::Allowed);
        }
        let ends = (window + 1) * self.window_secs;
        Ok(Verdict::Limited {
            retry_after_secs: u64::try_from(ends - now_secs).unwrap_or(1).max(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(requests: u64, window_secs: u64) -> Quota {
        let config = Config {
            quota_requests: requests,
            quota_window_secs: window_secs,
            ..Config::default()
        };
        Quota::new(&config, None, "test")
    }

    #[tokio::test]
    async fn counts_per_reader_and_window() {
        let q = quota(2, 60);
        let t = 1_000 * 60 + 15;
        assert_eq!(q.take(1, "a", t).await.ok(), Some(Verdict::Allowed));
        assert_eq!(q.take(1, "a", t).await.ok(), Some(Verdict::Allowed));
        assert_eq!(
            q.take(1, "a", t).await.ok(),
            Some(Verdict::Limited {
                retry_after_secs: 45
            })
        );
        // Another reader, or the same one in another community, has its own count.
        assert_eq!(q.take(1, "b", t).await.ok(), Some(Verdict::Allowed));
        assert_eq!(q.take(2, "a", t).await.ok(), Some(Verdict::Allowed));
        // The next window starts over.
        assert_eq!(q.take(1, "a", t + 45).await.ok(), Some(Verdict::Allowed));
    }

    /// A `redis-server` of the test's own on a free port, killed to make Redis go away.
    struct OwnRedis(std::process::Child, u16);

    impl OwnRedis {
        async fn start() -> OwnRedis {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("redis-server on the PATH");
            // Owned at once, so every path (the panic below included) kills and reaps it.
            let own = OwnRedis(child, port);
            for _ in 0..200 {
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    return own;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("redis-server did not start");
        }
    }

    impl Drop for OwnRedis {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Shared counts in Redis, and fail closed (`Unavailable`, a 503) once it is gone.
    #[tokio::test]
    async fn redis_counts_are_shared_and_fail_closed() {
        if buzz_core::testkit::redis_url("quota::redis_counts_are_shared_and_fail_closed").is_none()
        {
            return;
        }
        let mut own = OwnRedis::start().await;
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", own.1)).expect("url");
        let link = Arc::new(
            RedisLink::connect(client, std::time::Duration::from_millis(500))
                .await
                .expect("redis up"),
        );
        let config = Config {
            quota_requests: 2,
            quota_window_secs: 60,
            ..Config::default()
        };
        // Two processes' quotas on one Redis.
        let a = Quota::new(&config, Some(link.clone()), "t");
        let b = Quota::new(&config, Some(link.clone()), "t");
        let t = 1_000 * 60 + 50;
        assert_eq!(a.take(1, "x", t).await.ok(), Some(Verdict::Allowed));
        assert_eq!(b.take(1, "x", t).await.ok(), Some(Verdict::Allowed));
        assert_eq!(
            a.take(1, "x", t).await.ok(),
            Some(Verdict::Limited {
                retry_after_secs: 10
            })
        );
        assert_eq!(b.take(1, "y", t).await.ok(), Some(Verdict::Allowed));
        let _ = own.0.kill();
        let _ = own.0.wait();
        match a.take(1, "y", t).await {
            Err(Reason::Unavailable(_)) => {}
            other => panic!("Redis down must fail closed, got {other:?}"),
        }
    }
}
