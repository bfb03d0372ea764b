//! How fast are the default policies? One thread, the repository's access.lua and
//! moderation.lua, a typical allowed message (both `moderate` and `can_write` run), a denied
//! guest post and a read.
//!
//! `cargo run --release -p buzz-policy --example policy_bench [SECONDS]`

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_policy::{
    Action, ActorFacts, ChannelFacts, CommunityFacts, EventFacts, MemoryRateLimiter, PolicyEngine,
    PolicyLimits, ReadRequest, Verdict, WriteRequest,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1.0);
    let per_case = Duration::from_secs_f64(seconds);
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");

    let started = Instant::now();
    let engine = PolicyEngine::load(
        &policies.join("access.lua"),
        &policies.join("moderation.lua"),
        PolicyLimits::default(),
        Arc::new(MemoryRateLimiter::new()),
    )?;
    println!("load (validates both scripts): {:?}", started.elapsed());

    let message = message();
    let started = Instant::now();
    assert_eq!(engine.check_write(&message)?, Verdict::Allow);
    println!(
        "first check on a thread (builds its Lua state): {:?}",
        started.elapsed()
    );

    let mut guest = message.clone();
    guest.actor.channel_role = Some("guest".into());
    let read = ReadRequest {
        actor: message.actor.clone(),
        channel: message.channel.clone().unwrap_or_default(),
        community: message.community.clone(),
        now: message.now,
    };

    bench("check_write, member message (allow)", per_case, || {
        engine.check_write(&message).map(|v| v.is_allow())
    })?;
    bench("check_write, guest message (deny)", per_case, || {
        engine.check_write(&guest).map(|v| !v.is_allow())
    })?;
    bench("check_read, member (allow)", per_case, || {
        engine.check_read(&read).map(|v| v.is_allow())
    })?;
    Ok(())
}

fn bench(
    name: &str,
    duration: Duration,
    mut check: impl FnMut() -> Result<bool, buzz_policy::PolicyError>,
) -> Result<(), buzz_policy::PolicyError> {
    for _ in 0..1_000 {
        check()?;
    }
    let started = Instant::now();
    let mut count = 0u64;
    while started.elapsed() < duration {
        for _ in 0..1_000 {
            assert!(check()?, "{name}: unexpected verdict");
        }
        count += 1_000;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{name}: {:.0} evaluations/s ({:.2} µs each)",
        count as f64 / elapsed,
        elapsed * 1e6 / count as f64
    );
    Ok(())
}

fn message() -> WriteRequest {
    let now = 1_700_000_000;
    WriteRequest {
        action: Action::Message,
        event: EventFacts {
            id: "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36".into(),
            pubkey: "f7234bd4c1394dda46d09f35bd384dd30cc552ad5541990f98844fb06676e9ca".into(),
            kind: 9,
            created_at: now,
            content: "Hello, channel! Shipping the policy engine today.".into(),
            tags: vec![
                vec!["h".into(), "0b6a1c1e-6f3e-4a49-9d6c-3e1f0c2b9a77".into()],
                vec![
                    "e".into(),
                    "b1f2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff00".into(),
                    "".into(),
                    "root".into(),
                ],
            ],
        },
        actor: ActorFacts {
            pubkey: Some("f7234bd4c1394dda46d09f35bd384dd30cc552ad5541990f98844fb06676e9ca".into()),
            community_member: true,
            channel_role: Some("member".into()),
            channel_joined_at: Some(now - 86_400),
            ..ActorFacts::default()
        },
        channel: Some(ChannelFacts {
            id: "0b6a1c1e-6f3e-4a49-9d6c-3e1f0c2b9a77".into(),
            exists: true,
            name: "general".into(),
            private: false,
            archived: false,
            channel_type: "stream".into(),
            deleted: false,
        }),
        community: CommunityFacts {
            host: "localhost".into(),
            open: true,
        },
        now,
    }
}
