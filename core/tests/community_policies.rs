//! Per-community policies: each community enforces its own scripts and reloads on its
//! own; shadow scripts count disagreements without deciding; a slow rule fails closed
//! within its wall-clock bound while other connections are answered.

use buzz_core::both_backends;
use buzz_core::config::{CommunityPolicyFiles, CommunitySettings, Settings};
use buzz_core::testkit::{now, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

both_backends!(shadow_scripts_count_disagreements_and_decide_nothing);

const OTHER: &str = "other.example";

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../policies")
        .join(name)
}

/// `base` (a shipped script) plus a rule that refuses content containing `word`.
fn forbidding(dir: &Path, file: &str, word: &str) -> PathBuf {
    let mut text = std::fs::read_to_string(shipped("access.lua")).expect("read");
    text.push_str(&format!(
        "\nlocal base_can_write = can_write\nfunction can_write(req)\n  if string.find(req.event.content, {word:?}, 1, true) then\n    return buzz.deny(\"blocked\", \"word not allowed\")\n  end\n  return base_can_write(req)\nend\n"
    ));
    let path = dir.join(file);
    std::fs::write(&path, text).expect("write");
    path
}

fn other_community(policies: CommunityPolicyFiles) -> CommunitySettings {
    CommunitySettings {
        host: OTHER.into(),
        name: "Other".into(),
        owners: vec![],
        open: true,
        policies,
    }
}

/// Publish anonymous kind-1 notes containing `content` until `done` holds for the answer
/// (file watchers poll every 50 ms) or five seconds pass; returns the last answer.
async fn note_until(
    ws: &mut WsClient,
    content: &str,
    done: impl Fn(&(bool, String)) -> bool,
) -> (bool, String) {
    let keys = Keys::generate();
    let start = Instant::now();
    for n in 0.. {
        let answer = ws
            .publish(&keys.sign(1, vec![], &format!("{content} {n}"), now()))
            .await;
        if done(&answer) || start.elapsed() > Duration::from_secs(5) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!("the loop returns")
}

fn blocked(answer: &(bool, String)) -> bool {
    !answer.0 && answer.1 == "blocked: word not allowed"
}

fn accepted(answer: &(bool, String)) -> bool {
    answer.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_community_enforces_and_reloads_its_own_scripts() {
    let dir = tempfile::tempdir().expect("dir");
    let default_access = dir.path().join("access.lua");
    std::fs::copy(shipped("access.lua"), &default_access).expect("copy");
    let own_access = forbidding(dir.path(), "other-access.lua", "pineapple");
    let (shared, own) = (default_access.clone(), own_access.clone());
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "community_policies::own_scripts",
        move |s: &mut Settings| {
            s.policies.access = shared;
            s.policies.reload_poll_ms = 50;
            s.communities.push(other_community(CommunityPolicyFiles {
                access: Some(own),
                ..Default::default()
            }));
        },
        Vec::new(),
    )
    .await
    .expect("sqlite relay");
    let mut local = relay.ws().await;
    let mut other = WsClient::connect(relay.addr, OTHER).await.expect("other");

    // Each enforces its own rule.
    assert!(blocked(
        &note_until(&mut other, "pineapple", |_| true).await
    ));
    assert!(accepted(
        &note_until(&mut local, "pineapple", |_| true).await
    ));

    // A broken edit of the other community's script keeps its last good one, and leaves
    // this community's reloads alone.
    std::fs::write(&own_access, "function can_write(req) return (").expect("break");
    std::fs::write(
        &default_access,
        std::fs::read_to_string(forbidding(dir.path(), "tmp.lua", "mango")).expect("read"),
    )
    .expect("edit the shared script");
    assert!(
        blocked(&note_until(&mut local, "mango", blocked).await),
        "local reloaded"
    );
    assert!(
        blocked(&note_until(&mut other, "pineapple", |_| true).await),
        "last good kept"
    );
    assert!(
        accepted(&note_until(&mut other, "mango", |_| true).await),
        "own script, not shared"
    );

    local.close().await;
    other.close().await;
    relay.stop().await;
}

async fn shadow_scripts_count_disagreements_and_decide_nothing(backend: TestBackend, name: &str) {
    let dir = tempfile::tempdir().expect("dir");
    let candidate = forbidding(dir.path(), "candidate.lua", "pineapple");
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        move |s: &mut Settings| {
            s.communities.push(other_community(CommunityPolicyFiles {
                shadow_access: Some(candidate),
                ..Default::default()
            }));
        },
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let services = &relay.running().services;
    let other = services
        .communities
        .iter()
        .find(|c| c.host == OTHER)
        .expect("configured")
        .clone();
    assert_eq!(
        services.access.shadow_counts(&services.communities[0]),
        None
    );

    let mut ws = WsClient::connect(relay.addr, OTHER).await.expect("other");
    // The enforced (default) scripts decide: both accepted, stored.
    assert!(accepted(&note_until(&mut ws, "pineapple", |_| true).await));
    assert!(accepted(&note_until(&mut ws, "banana", |_| true).await));

    let deadline = Instant::now() + Duration::from_secs(10);
    let counts = loop {
        let counts = services.access.shadow_counts(&other).expect("shadow runs");
        if counts.compared >= 2 || Instant::now() > deadline {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (counts.compared, counts.disagreed, counts.skipped),
        (2, 1, 0)
    );
    ws.close().await;
    relay.stop().await;
}

/// The plausible moderation rule, on two ~250 KB anonymous events at once: both
/// fail closed within the bound, and another connection is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_pattern_fails_closed_while_other_connections_are_answered() {
    let dir = tempfile::tempdir().expect("dir");
    let moderation = dir.path().join("moderation.lua");
    let mut text = std::fs::read_to_string(shipped("moderation.lua")).expect("read");
    text.push_str(
        "\nlocal base_moderate = moderate\nfunction moderate(req)\n  if req.event.content:find(\"https?://[^%s]-%.exe\") then\n    return buzz.deny(\"blocked\", \"no executables\")\n  end\n  return base_moderate(req)\nend\n",
    );
    std::fs::write(&moderation, text).expect("write");
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "community_policies::slow_pattern",
        move |s: &mut Settings| {
            s.policies.moderation = moderation;
            // Tight enough to matter, loose enough for an unoptimized build's probes.
            s.policies.call_timeout_ms = 200;
        },
        Vec::new(),
    )
    .await
    .expect("sqlite relay");

    // ~250 KB of "http://x" and no ".exe": from each of the ~31,000 starts the lazy
    // `[^%s]-` scans to the end before failing — quadratic in the content.
    let attack_text = "http://x".repeat(31_000);
    let mut attackers = Vec::new();
    for _ in 0..2 {
        let mut ws = relay.ws().await;
        let event = Keys::generate().sign(1, vec![], &attack_text, now());
        attackers.push(tokio::spawn(async move {
            let started = Instant::now();
            let answer = ws.publish(&event).await;
            ws.close().await;
            (answer, started.elapsed())
        }));
    }
    let mut probe = relay.ws().await;
    let keys = Keys::generate();
    let mut slowest = Duration::ZERO;
    for n in 0..10 {
        let started = Instant::now();
        let answer = probe
            .publish(&keys.sign(1, vec![], &format!("probe {n}"), now()))
            .await;
        slowest = slowest.max(started.elapsed());
        assert!(answer.0, "probe {n}: {answer:?}");
    }
    assert!(
        slowest < Duration::from_secs(2),
        "probes waited {slowest:?}"
    );
    for attacker in attackers {
        let (answer, took) = attacker.await.expect("attacker task");
        assert_eq!(answer, (false, "error: policy failure".to_owned()));
        assert!(
            took < Duration::from_secs(10),
            "failed closed after {took:?}"
        );
    }
    probe.close().await;
    relay.stop().await;
}
