//! Helpers shared by the engine's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use buzz_policy::{
    Action, ActorFacts, ChannelFacts, CommunityFacts, EventFacts, MemoryRateLimiter, PolicyEngine,
    PolicyError, PolicyLimits, RateLimiter, ReadRequest, WriteRequest,
};

/// A script that allows everything it is asked.
pub const ALLOW_ALL_ACCESS: &str = "function can_read(req) return buzz.allow() end\n\
                                    function can_write(req) return buzz.allow() end\n";
pub const ALLOW_ALL_MODERATION: &str = "function moderate(req) return buzz.allow() end\n";

/// Both scripts of an engine, written into a temporary directory that lives as long as this.
pub struct Scripts {
    pub dir: tempfile::TempDir,
    pub access: PathBuf,
    pub moderation: PathBuf,
}

impl Scripts {
    pub fn new(access: &str, moderation: &str) -> Scripts {
        let dir = tempfile::tempdir().expect("temp dir");
        let access_path = dir.path().join("access.lua");
        let moderation_path = dir.path().join("moderation.lua");
        std::fs::write(&access_path, access).expect("write access.lua");
        std::fs::write(&moderation_path, moderation).expect("write moderation.lua");
        Scripts {
            dir,
            access: access_path,
            moderation: moderation_path,
        }
    }

    pub fn write_access(&self, text: &str) {
        std::fs::write(&self.access, text).expect("rewrite access.lua");
    }

    pub fn load(&self) -> Result<PolicyEngine, PolicyError> {
        self.load_with(PolicyLimits::default(), Arc::new(MemoryRateLimiter::new()))
    }

    pub fn load_with(
        &self,
        limits: PolicyLimits,
        limiter: Arc<dyn RateLimiter>,
    ) -> Result<PolicyEngine, PolicyError> {
        PolicyEngine::load(&self.access, &self.moderation, limits, limiter)
    }
}

/// An engine whose access.lua is `access` and whose moderation allows everything.
pub fn engine_with_access(access: &str) -> (Scripts, PolicyEngine) {
    let scripts = Scripts::new(access, ALLOW_ALL_MODERATION);
    let engine = scripts
        .load()
        .unwrap_or_else(|e| panic!("load failed: {e}"));
    (scripts, engine)
}

/// Default limits, but with time limits far away: for tests about the instruction budget or
/// the memory limit, which an unoptimized build on a busy machine might otherwise reach
/// after the default 50 ms call timeout.
pub fn budget_limits() -> PolicyLimits {
    PolicyLimits {
        call_timeout: std::time::Duration::from_secs(60),
        load_timeout: std::time::Duration::from_secs(60),
        ..PolicyLimits::default()
    }
}

/// Like [`engine_with_access`], with `limits`.
pub fn engine_with_access_limits(access: &str, limits: PolicyLimits) -> (Scripts, PolicyEngine) {
    let scripts = Scripts::new(access, ALLOW_ALL_MODERATION);
    let engine = scripts
        .load_with(limits, Arc::new(MemoryRateLimiter::new()))
        .unwrap_or_else(|e| panic!("load failed: {e}"));
    (scripts, engine)
}

/// Did the check fail because its run was stopped (instruction budget or time limit)?
pub fn is_stopped<T>(result: &Result<T, PolicyError>) -> bool {
    matches!(
        result,
        Err(PolicyError::DeadlineExceeded { .. } | PolicyError::TimeLimitExceeded { .. })
    )
}

/// The repository's default scripts.
pub fn default_paths() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    (dir.join("access.lua"), dir.join("moderation.lua"))
}

pub fn default_engine() -> PolicyEngine {
    default_engine_with(PolicyLimits::default())
}

/// The shipped scripts with `limits`.
pub fn default_engine_with(limits: PolicyLimits) -> PolicyEngine {
    let (access, moderation) = default_paths();
    PolicyEngine::load(&access, &moderation, limits, limiter())
        .unwrap_or_else(|e| panic!("default policies do not load: {e}"))
}

/// A fresh in-memory rate limiter.
pub fn limiter() -> Arc<dyn RateLimiter> {
    Arc::new(MemoryRateLimiter::new())
}

pub const NOW: i64 = 1_700_000_000;

/// alice, a member of the open channel #general in the open community, posts a message.
pub fn message_request() -> WriteRequest {
    WriteRequest {
        action: Action::Message,
        event: EventFacts {
            id: "e1".into(),
            pubkey: "alice".into(),
            kind: 9,
            created_at: NOW,
            content: "hello".into(),
            tags: vec![vec!["h".into(), "c1".into()]],
        },
        actor: ActorFacts {
            pubkey: Some("alice".into()),
            community_member: true,
            channel_role: Some("member".into()),
            channel_joined_at: Some(NOW - 86_400 * 30),
            ..ActorFacts::default()
        },
        channel: Some(general()),
        community: CommunityFacts {
            host: "localhost".into(),
            open: true,
        },
        now: NOW,
    }
}

pub fn read_request() -> ReadRequest {
    let write = message_request();
    ReadRequest {
        actor: write.actor,
        channel: general(),
        community: write.community,
        now: NOW,
    }
}

pub fn general() -> ChannelFacts {
    ChannelFacts {
        id: "c1".into(),
        exists: true,
        name: "general".into(),
        private: false,
        archived: false,
        channel_type: "stream".into(),
        deleted: false,
    }
}

/// `BUZZ_TEST_REDIS_URL`, or `None` after printing the skip line (a panic under CI).
pub fn redis_url(test: &str) -> Option<String> {
    match std::env::var("BUZZ_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!("{test}: BUZZ_TEST_REDIS_URL is not set (required when CI is set)");
            }
            println!("skipped: {test}: BUZZ_TEST_REDIS_URL is not set");
            None
        }
    }
}

/// A key prefix no other test run uses.
pub fn unique_prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("buzz-test:{test}:{}:{nanos}:", std::process::id())
}
