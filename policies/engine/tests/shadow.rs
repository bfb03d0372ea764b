//! Shadow mode: the candidate decides nothing, every disagreement is counted, and a
//! candidate stuck at its own deadline never slows the enforced check.

mod common;

use buzz_policy::{ShadowCounts, Verdict};
use common::*;
use std::time::{Duration, Instant};

/// Wait (bounded) until the worker has compared `n` checks.
fn compared(engine: &buzz_policy::PolicyEngine, n: u64) -> ShadowCounts {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let counts = engine.shadow_counts().expect("shadow configured");
        if counts.compared + counts.skipped >= n || Instant::now() > deadline {
            return counts;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn disagreements_are_counted_and_the_candidate_decides_nothing() {
    let (_enforced_scripts, enforced) = engine_with_access(ALLOW_ALL_ACCESS);
    assert_eq!(enforced.shadow_counts(), None);
    let candidate_access = "function can_write(req)\n\
                              if req.event.content == 'no' then return buzz.deny('restricted', 'shadow says no') end\n\
                              return buzz.allow() end\n\
                            function can_read(req) return buzz.deny('restricted', 'hidden') end\n";
    let (_candidate_scripts, candidate) = engine_with_access(candidate_access);
    let engine = enforced
        .with_shadow(std::sync::Arc::new(candidate), "test".into())
        .expect("shadow starts");

    let mut no = message_request();
    no.event.content = "no".into();
    // The enforced rulebook decides: allow, both times, whatever the candidate thinks.
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
    assert_eq!(engine.check_write(&no).ok(), Some(Verdict::Allow));
    assert_eq!(
        engine.check_read(&read_request()).ok(),
        Some(Verdict::Allow)
    );

    let counts = compared(&engine, 3);
    assert_eq!(
        counts,
        ShadowCounts {
            compared: 3,
            disagreed: 2,
            skipped: 0
        }
    );
}

#[test]
fn a_stuck_candidate_never_slows_the_enforced_path() {
    let (_enforced_scripts, enforced) = engine_with_access(ALLOW_ALL_ACCESS);
    let spin = "function can_write(req) while true do end end";
    let (_candidate_scripts, candidate) = engine_with_access(spin);
    let engine = enforced
        .with_shadow(std::sync::Arc::new(candidate), "test".into())
        .expect("shadow starts");
    // Warm the enforced state, then time checks while the candidate spins to its deadline
    // on every one of them.
    engine.check_write(&message_request()).expect("allow");
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(
            engine.check_write(&message_request()).ok(),
            Some(Verdict::Allow)
        );
    }
    // Each candidate run spins until its instruction budget or deadline stops it; the
    // enforced checks wait for none of them.
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    let counts = compared(&engine, 21);
    // The candidate failed (deadline) where the enforced allowed: a disagreement each.
    assert_eq!(counts.compared + counts.skipped, 21, "{counts:?}");
    assert_eq!(counts.disagreed, counts.compared, "{counts:?}");
}
