//! The relay consults the community's Lua policies on every write and read, fails closed
//! when a script misbehaves, and reloads edited scripts without a restart.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Copies of the default policies in a temp dir the test may edit.
struct Scripts {
    _dir: tempfile::TempDir,
    access: PathBuf,
    moderation: PathBuf,
}

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../policies")
        .join(name)
}

fn scripts() -> Scripts {
    let dir = tempfile::tempdir().expect("tempdir");
    let access = dir.path().join("access.lua");
    let moderation = dir.path().join("moderation.lua");
    std::fs::copy(shipped("access.lua"), &access).expect("copy access.lua");
    std::fs::copy(shipped("moderation.lua"), &moderation).expect("copy moderation.lua");
    Scripts {
        _dir: dir,
        access,
        moderation,
    }
}

async fn relay_with(scripts: &Scripts, name: &str) -> TestRelay {
    let (access, moderation) = (scripts.access.clone(), scripts.moderation.clone());
    TestRelay::start_with(
        TestBackend::Sqlite,
        name,
        move |s| {
            s.policies.access = access;
            s.policies.moderation = moderation;
            s.policies.reload_poll_ms = 50;
        },
        Vec::new(),
    )
    .await
    .expect("sqlite relay")
}

/// Append a rule to the script that refuses posts containing `word`.
fn forbid_word(access: &Path, word: &str) {
    let mut text = std::fs::read_to_string(access).expect("read");
    text.push_str(&format!(
        "\nlocal base_can_write = can_write\nfunction can_write(req)\n  if string.find(req.event.content, {word:?}, 1, true) then\n    return buzz.deny(\"blocked\", \"word not allowed\")\n  end\n  return base_can_write(req)\nend\n"
    ));
    std::fs::write(access, text).expect("write");
}

/// Publish a new message with `content` until the relay's answer satisfies `done` (the
/// watcher polls every 50 ms) or five seconds pass; returns the last answer.
async fn post_until(
    ws: &mut buzz_core::testkit::WsClient,
    keys: &Keys,
    channel: &str,
    content: &str,
    done: impl Fn(&(bool, String)) -> bool,
) -> (bool, String) {
    let start = Instant::now();
    let mut n = 0;
    loop {
        n += 1;
        let event = keys.sign(
            9,
            vec![tag(&["h", channel])],
            &format!("{content} {n}"),
            now(),
        );
        let answer = ws.publish(&event).await;
        if done(&answer) || start.elapsed() > Duration::from_secs(5) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_policies_apply_without_restart_and_broken_ones_keep_the_last_good() {
    let scripts = scripts();
    let relay = relay_with(&scripts, "policies::hot_reload").await;
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&keys).await.0);
    let ch = uuid::Uuid::new_v4().to_string();
    let create = keys.sign(9007, vec![tag(&["h", &ch]), tag(&["name", "x"])], "", now());
    assert!(ws.publish(&create).await.0);
    assert!(post_until(&mut ws, &keys, &ch, "banana", |_| true).await.0);

    forbid_word(&scripts.access, "banana");
    let answer = post_until(&mut ws, &keys, &ch, "banana", |a| !a.0).await;
    assert_eq!(
        answer,
        (false, "blocked: word not allowed".into()),
        "reloaded without restart"
    );

    // A broken edit is refused; the last good rules stay in force.
    std::fs::write(
        &scripts.access,
        "function can_write(req) return buzz.allow( end",
    )
    .expect("write");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let event = keys.sign(9, vec![tag(&["h", &ch])], "banana split", now());
    assert_eq!(
        ws.publish(&event).await,
        (false, "blocked: word not allowed".into())
    );
    let event = keys.sign(9, vec![tag(&["h", &ch])], "apple", now());
    assert!(
        ws.publish(&event).await.0,
        "the rest of the last good rules still allow"
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_policies_fail_closed() {
    let scripts = scripts();
    let mut text = std::fs::read_to_string(&scripts.access).expect("read");
    text.push_str(concat!(
        "\nlocal base_can_write = can_write\n",
        "function can_write(req)\n",
        "  if req.event.content == 'loop' then while true do pcall(function() while true do end end) end end\n",
        "  if req.event.content == 'bomb' then local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1024) end end\n",
        "  if req.event.content == 'error' then error('oops') end\n",
        "  return base_can_write(req)\n",
        "end\n"
    ));
    std::fs::write(&scripts.access, text).expect("write");
    let relay = relay_with(&scripts, "policies::runaway").await;
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&keys).await.0);
    let ch = uuid::Uuid::new_v4().to_string();
    let create = keys.sign(9007, vec![tag(&["h", &ch]), tag(&["name", "x"])], "", now());
    assert!(ws.publish(&create).await.0);

    for content in ["loop", "bomb", "error"] {
        let start = Instant::now();
        let event = keys.sign(9, vec![tag(&["h", &ch])], content, now());
        let answer = ws.publish(&event).await;
        assert_eq!(answer, (false, "error: policy failure".into()), "{content}");
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{content} stopped within the deadline"
        );
        let stored = ws
            .req(
                &format!("q{content}"),
                vec![serde_json::json!({"ids": [event.id]})],
            )
            .await
            .expect("REQ");
        assert!(stored.is_empty(), "{content}: nothing stored");
    }
    // The relay (and the same thread's Lua state) still answers normally afterwards.
    let fine = keys.sign(9, vec![tag(&["h", &ch])], "fine", now());
    assert_eq!(ws.publish(&fine).await, (true, String::new()));
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_policies_leave_only_core_rules() {
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "policies::disabled",
        |s| s.policies.enabled = false,
        Vec::new(),
    )
    .await
    .expect("relay");
    let (alice, bob) = (Keys::generate(), Keys::generate());
    let mut a = relay.ws().await;
    assert!(a.auth(&alice).await.0);
    let ch = uuid::Uuid::new_v4().to_string();
    let create = alice.sign(
        9007,
        vec![tag(&["h", &ch]), tag(&["name", "x"]), tag(&["private"])],
        "",
        now(),
    );
    assert!(a.publish(&create).await.0);
    // Core still demands authenticated authorship...
    let mut b = relay.ws().await;
    let anon = bob.sign(9, vec![tag(&["h", &ch])], "hi", now());
    assert!(b.publish(&anon).await.1.starts_with("auth-required:"));
    // ...but nothing else: no policy keeps bob out of the private channel.
    assert!(b.auth(&bob).await.0);
    assert!(b.publish(&anon).await.0);
    relay.stop().await;
}
