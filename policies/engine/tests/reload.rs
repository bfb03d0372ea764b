//! Hot reload: a broken script never replaces a good one; the watcher picks up edits.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_policy::{DenyKind, PolicyError, Verdict};
use common::{message_request, Scripts, ALLOW_ALL_ACCESS, ALLOW_ALL_MODERATION};

const SAYS_A: &str = "function can_write(req) return buzz.deny('restricted', 'rule A') end";
const SAYS_B: &str = "function can_write(req) return buzz.deny('restricted', 'rule B') end";
const BROKEN: &str = "function can_write(req) return buzz.deny('restricted', 'rule C' end";

fn says(engine: &buzz_policy::PolicyEngine) -> String {
    match engine.check_write(&message_request()) {
        Ok(Verdict::Deny { message, .. }) => message,
        other => panic!("unexpected verdict {other:?}"),
    }
}

#[test]
fn broken_reload_keeps_the_last_good_scripts() {
    let scripts = Scripts::new(SAYS_A, ALLOW_ALL_MODERATION);
    let engine = scripts.load().expect("load");
    assert_eq!(engine.generation(), 1);
    assert_eq!(says(&engine), "rule A");

    scripts.write_access(BROKEN);
    assert!(matches!(engine.reload(), Err(PolicyError::Load { .. })));
    assert_eq!(engine.generation(), 1);
    assert_eq!(says(&engine), "rule A");

    // A script that compiles but fails in its main chunk is refused too.
    scripts.write_access("error('not today')");
    assert!(engine.reload().is_err());
    assert_eq!(says(&engine), "rule A");

    // As is one whose main chunk never ends, or a file that vanished.
    scripts.write_access("while true do end");
    // Stopped by the instruction budget, or by the load's wall-clock bound first when
    // an unoptimized build runs on a busy machine: either way, refused.
    let endless = engine.reload();
    assert!(
        matches!(
            endless,
            Err(PolicyError::DeadlineExceeded { .. } | PolicyError::TimeLimitExceeded { .. })
        ),
        "{endless:?}"
    );
    std::fs::remove_file(&scripts.access).expect("remove");
    assert!(matches!(engine.reload(), Err(PolicyError::Read { .. })));
    assert_eq!(engine.generation(), 1);
    assert_eq!(says(&engine), "rule A");
    // Each failure is counted (the console shows it beside the last good load's time).
    assert_eq!(engine.failed_reloads(), 4);
    let first_load = engine.loaded_at();
    assert!(first_load > 1_700_000_000, "{first_load}");

    scripts.write_access(SAYS_B);
    engine.reload().expect("fixed reload");
    assert_eq!(engine.generation(), 2);
    assert_eq!(says(&engine), "rule B");
    assert_eq!(engine.failed_reloads(), 4);
    assert!(engine.loaded_at() >= first_load);
}

#[test]
fn reload_reaches_threads_that_already_have_a_state() {
    let scripts = Scripts::new(SAYS_A, ALLOW_ALL_MODERATION);
    let engine = Arc::new(scripts.load().expect("load"));
    let (to_worker, worker_rx) = std::sync::mpsc::channel::<()>();
    let (to_main, main_rx) = std::sync::mpsc::channel::<String>();
    let worker = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || {
            while worker_rx.recv().is_ok() {
                if to_main.send(says(&engine)).is_err() {
                    break;
                }
            }
        })
    };
    to_worker.send(()).expect("send");
    assert_eq!(main_rx.recv().expect("answer"), "rule A");
    scripts.write_access(SAYS_B);
    engine.reload().expect("reload");
    to_worker.send(()).expect("send");
    assert_eq!(main_rx.recv().expect("answer"), "rule B");
    drop(to_worker);
    worker.join().expect("worker");
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn watcher_reloads_on_change_and_ignores_broken_edits() {
    let poll = Duration::from_millis(20);
    let scripts = Scripts::new(SAYS_A, ALLOW_ALL_MODERATION);
    let engine = Arc::new(scripts.load().expect("load"));
    let watcher = engine.watch(poll);

    // Nothing changes: no reloads.
    std::thread::sleep(poll * 5);
    assert_eq!(engine.generation(), 1);

    scripts.write_access(SAYS_B);
    wait_for("the change", poll * 50, || engine.generation() == 2);
    assert_eq!(says(&engine), "rule B");

    scripts.write_access(BROKEN);
    std::thread::sleep(poll * 5);
    assert_eq!(engine.generation(), 2, "a broken edit must not load");
    assert_eq!(says(&engine), "rule B");

    scripts.write_access(SAYS_A);
    wait_for("the fix", poll * 50, || engine.generation() == 3);
    assert_eq!(says(&engine), "rule A");

    // The watcher holds only a Weak: dropping the engine stops it.
    drop(engine);
    wait_for("the watcher to stop", poll * 50, || watcher.is_finished());
    watcher.join().expect("watcher thread");
}

#[test]
fn watcher_skips_content_already_loaded_by_an_explicit_reload() {
    let poll = Duration::from_millis(20);
    let scripts = Scripts::new(SAYS_A, ALLOW_ALL_MODERATION);
    let engine = Arc::new(scripts.load().expect("load"));
    let _watcher = engine.watch(poll);
    scripts.write_access(SAYS_B);
    // Like SIGHUP: reload right away; the watcher must not load it a second time.
    let _ = engine.reload();
    std::thread::sleep(poll * 6);
    assert_eq!(engine.generation(), 2);
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Restricted, "rule B"))
    );
}

/// The stalled writer of the CI failure that found this: an editor or `cp` truncates the file
/// and is descheduled before it writes, for longer than the watcher's two polls. The empty
/// file must not replace rules in force (it would allow everything they decided); the
/// contents that follow load as usual.
#[test]
fn a_file_caught_empty_for_many_polls_never_replaces_rules_in_force() {
    let poll = Duration::from_millis(20);
    let scripts = Scripts::new(SAYS_A, ALLOW_ALL_MODERATION);
    let engine = Arc::new(scripts.load().expect("load"));
    let _watcher = engine.watch(poll);

    std::fs::File::create(&scripts.access).expect("truncate access.lua");
    wait_for("the watcher to refuse the empty file", poll * 50, || {
        engine.failed_reloads() >= 1
    });
    std::thread::sleep(poll * 10);
    assert_eq!(engine.generation(), 1);
    assert_eq!(says(&engine), "rule A");
    // A comment-only file is the same: no entry point left.
    scripts.write_access("-- half of a header comment");
    assert!(matches!(
        engine.reload(),
        Err(PolicyError::ReloadDropsAllRules { script }) if script.ends_with("access.lua")
    ));
    assert_eq!(says(&engine), "rule A");

    scripts.write_access(SAYS_B);
    wait_for("the real edit", poll * 50, || engine.generation() == 2);
    assert_eq!(says(&engine), "rule B");
}

/// Moderation works the same way; a moderation file that never had rules may stay empty
/// across reloads (an access file never loads without rules: `tests/examples.rs`).
#[test]
fn emptying_moderation_is_refused_but_an_empty_moderation_file_reloads() {
    let scripts = Scripts::new(
        ALLOW_ALL_ACCESS,
        "function moderate(req) return buzz.deny('blocked', 'moderated') end",
    );
    let engine = scripts.load().expect("load");
    std::fs::write(&scripts.moderation, "").expect("empty moderation.lua");
    assert!(matches!(
        engine.reload(),
        Err(PolicyError::ReloadDropsAllRules { script }) if script.ends_with("moderation.lua")
    ));
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Blocked, "moderated"))
    );

    let scripts = Scripts::new(ALLOW_ALL_ACCESS, "");
    let engine = scripts
        .load()
        .expect("an empty moderation.lua loads at start");
    scripts.write_access("function can_write(req) return buzz.deny('restricted', 'no') end");
    engine
        .reload()
        .expect("access with rules, moderation still empty");
    assert_eq!(engine.generation(), 2);
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Restricted, "no"))
    );
}
