//! Many threads, one engine: each thread has its own Lua state and gets the right answers,
//! also while the scripts are being reloaded. Time limits are set far away: these tests are
//! about answers under many threads on a busy machine, not the wall-clock bound
//! (`bounds.rs` is).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use buzz_policy::{DenyKind, Verdict, WriteRequest};
use common::{
    budget_limits, default_engine_with, limiter, message_request, read_request, Scripts,
    ALLOW_ALL_MODERATION,
};

/// Requests with known answers under the default policies.
fn cases() -> Vec<(WriteRequest, Verdict)> {
    let ok = message_request();
    let mut guest = message_request();
    guest.actor.channel_role = Some("guest".into());
    let mut banned = message_request();
    banned.actor.banned = true;
    banned.actor.ban_reason = Some("spam".into());
    let mut archived = message_request();
    if let Some(channel) = archived.channel.as_mut() {
        channel.archived = true;
    }
    let mut timed_out = message_request();
    timed_out.actor.timeout_until = Some(common::NOW + 60);
    vec![
        (ok, Verdict::Allow),
        (
            guest,
            Verdict::deny(DenyKind::Restricted, "guests are read-only"),
        ),
        (banned, Verdict::deny(DenyKind::Blocked, "banned: spam")),
        (
            archived,
            Verdict::deny(DenyKind::Invalid, "channel is archived"),
        ),
        (
            timed_out,
            Verdict::deny(
                DenyKind::Restricted,
                format!("timed out until {}", common::NOW + 60),
            ),
        ),
    ]
}

#[test]
fn many_threads_get_correct_answers() {
    let engine = Arc::new(default_engine_with(budget_limits()));
    let cases = Arc::new(cases());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let engine = Arc::clone(&engine);
            let cases = Arc::clone(&cases);
            std::thread::spawn(move || {
                for i in 0..2_000 {
                    let (request, expected) = &cases[(i + t) % cases.len()];
                    let verdict = engine.check_write(request).expect("check_write");
                    assert_eq!(&verdict, expected, "thread {t}, iteration {i}");
                    if i % 7 == 0 {
                        assert_eq!(
                            engine.check_read(&read_request()).ok(),
                            Some(Verdict::Allow)
                        );
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("worker thread");
    }
}

#[test]
fn answers_stay_consistent_during_reloads() {
    let version = |n: u32| {
        format!(
            "function can_write(req)\n\
               if req.actor.pubkey == 'alice' then return buzz.deny('restricted', 'version {n}') end\n\
               return buzz.allow()\n\
             end\n"
        )
    };
    let scripts = Scripts::new(&version(0), ALLOW_ALL_MODERATION);
    let engine = Arc::new(scripts.load_with(budget_limits(), limiter()).expect("load"));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let engine = Arc::clone(&engine);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut bob = message_request();
                bob.actor.pubkey = Some("bob".into());
                let mut checks = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    match engine.check_write(&message_request()) {
                        Ok(Verdict::Deny { message, .. }) => {
                            assert!(message.starts_with("version "))
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                    assert_eq!(engine.check_write(&bob).ok(), Some(Verdict::Allow));
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for n in 1..=20 {
        scripts.write_access(&version(n));
        engine.reload().expect("reload");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        assert!(worker.join().expect("worker") > 0);
    }
    assert_eq!(engine.generation(), 21);
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Restricted, "version 20"))
    );
}

#[test]
fn engines_do_not_share_states() {
    let a = Scripts::new(
        "function can_write(req) return buzz.deny('invalid', 'engine a') end",
        ALLOW_ALL_MODERATION,
    );
    let b = Scripts::new(
        "function can_write(req) return buzz.deny('invalid', 'engine b') end",
        ALLOW_ALL_MODERATION,
    );
    let (a_engine, b_engine) = (
        a.load_with(budget_limits(), limiter()).expect("a"),
        b.load_with(budget_limits(), limiter()).expect("b"),
    );
    for _ in 0..3 {
        assert_eq!(
            a_engine.check_write(&message_request()).ok(),
            Some(Verdict::deny(DenyKind::Invalid, "engine a"))
        );
        assert_eq!(
            b_engine.check_write(&message_request()).ok(),
            Some(Verdict::deny(DenyKind::Invalid, "engine b"))
        );
    }
}
