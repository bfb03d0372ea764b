//! `buzz.rate_limit` with the in-process and the Redis counters; a failing limiter fails
//! the check closed, even when the script catches the error.

mod common;

use std::sync::Arc;
use std::time::Duration;

use buzz_policy::{
    DenyKind, MemoryRateLimiter, PolicyError, PolicyLimits, RateLimiter, RedisRateLimiter, Verdict,
};
use common::{message_request, Scripts, ALLOW_ALL_MODERATION};

/// Two messages per pubkey per minute.
const TWO_PER_MINUTE: &str = "function can_write(req)\n\
    if not buzz.rate_limit('msg:' .. req.actor.pubkey, 2, 60) then\n\
      return buzz.deny('rate-limited', 'slow down')\n\
    end\n\
    return buzz.allow()\n\
  end\n";

/// Checks the counter semantics every implementation must share.
fn exercise_limiter(limiter: &dyn RateLimiter, key: &str) {
    let hits: Vec<bool> = (0..4)
        .map(|_| limiter.hit(key, 3, 60).expect("hit"))
        .collect();
    assert_eq!(hits, [true, true, true, false]);
    let other = format!("{key}:other");
    assert_eq!(limiter.hit(&other, 1, 60).ok(), Some(true));
    assert_eq!(limiter.hit(&other, 1, 60).ok(), Some(false));
    let none = format!("{key}:zero");
    assert_eq!(limiter.hit(&none, 0, 60).ok(), Some(false));
    assert!(limiter.hit(key, 3, 0).is_err(), "a zero window is refused");

    // A window ends.
    let short = format!("{key}:short");
    assert_eq!(limiter.hit(&short, 1, 1).ok(), Some(true));
    assert_eq!(limiter.hit(&short, 1, 1).ok(), Some(false));
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(limiter.hit(&short, 1, 1).ok(), Some(true));
}

fn exercise_engine(limiter: Arc<dyn RateLimiter>, pubkey_prefix: &str) {
    let scripts = Scripts::new(TWO_PER_MINUTE, ALLOW_ALL_MODERATION);
    let engine = scripts
        .load_with(PolicyLimits::default(), limiter)
        .expect("load");
    let mut alice = message_request();
    alice.actor.pubkey = Some(format!("{pubkey_prefix}alice"));
    let mut bob = message_request();
    bob.actor.pubkey = Some(format!("{pubkey_prefix}bob"));
    assert_eq!(engine.check_write(&alice).ok(), Some(Verdict::Allow));
    assert_eq!(engine.check_write(&alice).ok(), Some(Verdict::Allow));
    assert_eq!(
        engine.check_write(&alice).ok(),
        Some(Verdict::deny(DenyKind::RateLimited, "slow down"))
    );
    assert_eq!(engine.check_write(&bob).ok(), Some(Verdict::Allow));
}

#[test]
fn memory_limiter_counts_fixed_windows() {
    exercise_limiter(&MemoryRateLimiter::new(), "k");
}

#[test]
fn memory_limiter_prunes_expired_windows() {
    let limiter = MemoryRateLimiter::new();
    for i in 0..5_000 {
        assert_eq!(limiter.hit(&format!("key{i}"), 1, 1).ok(), Some(true));
    }
    std::thread::sleep(Duration::from_millis(1100));
    for i in 0..5_000 {
        assert_eq!(limiter.hit(&format!("fresh{i}"), 1, 60).ok(), Some(true));
    }
    // Counting still works after pruning.
    assert_eq!(limiter.hit("fresh0", 1, 60).ok(), Some(false));
}

#[test]
fn scripts_rate_limit_through_the_memory_limiter() {
    exercise_engine(Arc::new(MemoryRateLimiter::new()), "");
}

/// A limiter whose backend is down.
struct Unreachable;

impl RateLimiter for Unreachable {
    fn hit(&self, _key: &str, _limit: u64, _window_secs: u64) -> Result<bool, String> {
        Err("backend unreachable".to_owned())
    }
}

#[test]
fn limiter_failure_fails_closed_even_if_caught() {
    for (name, access) in [
        ("uncaught", TWO_PER_MINUTE),
        (
            "caught with pcall",
            "function can_write(req) pcall(buzz.rate_limit, 'k', 1, 60) return buzz.allow() end",
        ),
    ] {
        let scripts = Scripts::new(access, ALLOW_ALL_MODERATION);
        let engine = scripts
            .load_with(PolicyLimits::default(), Arc::new(Unreachable))
            .expect("load");
        match engine.check_write(&message_request()) {
            Err(PolicyError::RateLimiter { message, .. }) => {
                assert!(message.contains("backend unreachable"), "{name}: {message}")
            }
            other => panic!("{name}: expected a rate limiter error, got {other:?}"),
        }
    }
}

#[test]
fn redis_limiter_counts_fixed_windows() {
    let Some(url) = common::redis_url("redis_limiter_counts_fixed_windows") else {
        return;
    };
    let prefix = common::unique_prefix("counts");
    let limiter = RedisRateLimiter::new(&url, prefix.clone()).expect("redis client");
    exercise_limiter(&limiter, "k");

    // Keys carry the prefix and a TTL no longer than the window.
    let client = redis::Client::open(url.as_str()).expect("client");
    let mut con = client.get_connection().expect("connection");
    let ttl: i64 = redis::cmd("TTL")
        .arg(limiter.redis_key("k"))
        .query(&mut con)
        .expect("TTL");
    assert!((1..=60).contains(&ttl), "ttl {ttl}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut con)
        .expect("KEYS");
    assert!(keys.iter().all(|k| k.starts_with(&prefix)) && !keys.is_empty());
    let _: () = redis::cmd("DEL")
        .arg(keys)
        .query(&mut con)
        .expect("cleanup");
}

#[test]
fn scripts_rate_limit_through_redis_shared_by_engines() {
    let Some(url) = common::redis_url("scripts_rate_limit_through_redis_shared_by_engines") else {
        return;
    };
    let prefix = common::unique_prefix("engine");
    let limiter = Arc::new(RedisRateLimiter::new(&url, prefix.clone()).expect("redis client"));
    exercise_engine(Arc::clone(&limiter) as Arc<dyn RateLimiter>, "");

    // A second engine (another relay process) on the same Redis sees the same counts.
    let other_process =
        Arc::new(RedisRateLimiter::new(&url, prefix.clone()).expect("redis client"));
    let scripts = Scripts::new(TWO_PER_MINUTE, ALLOW_ALL_MODERATION);
    let engine = scripts
        .load_with(PolicyLimits::default(), other_process)
        .expect("load");
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::RateLimited, "slow down"))
    );

    let client = redis::Client::open(url.as_str()).expect("client");
    let mut con = client.get_connection().expect("connection");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut con)
        .expect("KEYS");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query(&mut con)
            .expect("cleanup");
    }
}

#[test]
fn unreachable_redis_fails_closed() {
    // Nothing listens on port 1 of the loopback address: connection refused right away.
    let limiter = RedisRateLimiter::new("redis://127.0.0.1:1", "buzz-test:")
        .expect("client")
        .with_timeout(Duration::from_millis(200));
    assert!(limiter.hit("k", 1, 60).is_err());
    let scripts = Scripts::new(TWO_PER_MINUTE, ALLOW_ALL_MODERATION);
    let engine = scripts
        .load_with(PolicyLimits::default(), Arc::new(limiter))
        .expect("load");
    assert!(matches!(
        engine.check_write(&message_request()),
        Err(PolicyError::RateLimiter { .. })
    ));
}
