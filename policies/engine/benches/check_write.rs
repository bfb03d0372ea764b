//! What one write check costs with the default scripts: the `req` table, `moderate` and
//! `can_write`, as the relay runs them for a channel message and for a kind-1 note.
//!
//! ```sh
//! cargo bench -p buzz-policy --bench check_write
//! ```
//! Prints nanoseconds per check (best of five rounds, after a warm-up round).
//! `CHECK_WRITE_CHECKS=<n>` sets the checks per round (100,000), e.g. for a run under
//! `valgrind --tool=callgrind`, whose instruction counts do not depend on the load.

use std::sync::Arc;
use std::time::Instant;

use buzz_policy::{
    Action, ActorFacts, ChannelFacts, CommunityFacts, EventFacts, MemoryRateLimiter, PolicyEngine,
    PolicyLimits, ScriptOrigin, Verdict, WriteRequest,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn checks() -> u32 {
    std::env::var("CHECK_WRITE_CHECKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

/// A kind-1 note mentioning 2,000 people (`p` tags with a relay hint): the tag-heaviest
/// event the default limits accept.
fn mentions() -> WriteRequest {
    let mut req = request(false);
    req.event.tags = (0..2_000)
        .map(|i| {
            vec![
                "p".into(),
                format!("{i:064x}"),
                "wss://relay.example".into(),
            ]
        })
        .collect();
    req
}

fn request(channel: bool) -> WriteRequest {
    let pubkey = "a".repeat(64);
    WriteRequest {
        action: if channel {
            Action::Message
        } else {
            Action::Other
        },
        event: EventFacts {
            id: "b".repeat(64),
            pubkey: pubkey.clone(),
            kind: if channel { 9 } else { 1 },
            created_at: 1_700_000_000,
            content: "benchmark note 1 from publisher 0".into(),
            tags: vec![if channel {
                vec!["h".into(), "general".into()]
            } else {
                vec!["t".into(), "bench".into()]
            }],
        },
        actor: ActorFacts {
            pubkey: Some(pubkey),
            community_member: true,
            channel_role: channel.then(|| "member".into()),
            channel_joined_at: channel.then_some(1_600_000_000),
            ..ActorFacts::default()
        },
        channel: channel.then(|| ChannelFacts {
            id: "general".into(),
            exists: true,
            name: "general".into(),
            channel_type: "stream".into(),
            ..ChannelFacts::default()
        }),
        community: CommunityFacts {
            host: "bench.example".into(),
            open: true,
        },
        now: 1_700_000_000,
    }
}

fn main() {
    let engine = PolicyEngine::load_scripts(
        ScriptOrigin::builtin_access(),
        ScriptOrigin::builtin_moderation(),
        // It measures cost, not bounds: a loaded box must not stop it at 50 ms.
        PolicyLimits {
            call_timeout: std::time::Duration::from_secs(10),
            ..PolicyLimits::default()
        },
        Arc::new(MemoryRateLimiter::new()),
    )
    .expect("the default scripts load");
    for (label, req) in [
        ("kind-1 note (no channel)", request(false)),
        ("channel message", request(true)),
        ("kind-1 note with 2,000 p tags", mentions()),
    ] {
        let checks = checks();
        let mut best = f64::MAX;
        for round in 0..6 {
            let started = Instant::now();
            for _ in 0..checks {
                let verdict = engine.check_write(&req).expect("check runs");
                assert_eq!(verdict, Verdict::Allow);
            }
            let per_check = started.elapsed().as_nanos() as f64 / f64::from(checks);
            if round > 0 {
                best = best.min(per_check);
            }
        }
        println!("check_write, {label}: {best:.0} ns per check");
    }
}
