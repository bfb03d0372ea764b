//! What one write check costs with the default scripts: the `req` table, `moderate` and
//! `can_write`, as the relay runs them for a channel message and for a kind-1 note.
//!
//! ```sh
//! cargo bench -p buzz-policy --bench check_write
//! ```
//! Prints nanoseconds per check (best of five rounds, after a warm-up round).

use std::sync::Arc;
use std::time::Instant;

use buzz_policy::{
    Action, ActorFacts, ChannelFacts, CommunityFacts, EventFacts, MemoryRateLimiter, PolicyEngine,
    PolicyLimits, ScriptOrigin, Verdict, WriteRequest,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHECKS: u32 = 100_000;

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
        PolicyLimits::default(),
        Arc::new(MemoryRateLimiter::new()),
    )
    .expect("the default scripts load");
    for (label, req) in [
        ("kind-1 note (no channel)", request(false)),
        ("channel message", request(true)),
    ] {
        let mut best = f64::MAX;
        for round in 0..6 {
            let started = Instant::now();
            for _ in 0..CHECKS {
                let verdict = engine.check_write(&req).expect("check runs");
                assert_eq!(verdict, Verdict::Allow);
            }
            let per_check = started.elapsed().as_nanos() as f64 / f64::from(CHECKS);
            if round > 0 {
                best = best.min(per_check);
            }
        }
        println!("check_write, {label}: {best:.0} ns per check");
    }
}
