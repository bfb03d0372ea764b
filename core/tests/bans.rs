//! A ban cuts reads, not only writes: the banned member's WebSockets are closed (1008,
//! with the reason), their AUTH is refused `blocked:` and their NIP-98 reads are 403
//! `blocked:`, on every relay process; lifting the ban restores all of it. By a 9042
//! event and by NIP-86 `banpubkey`, both backends; two processes on one PostgreSQL +
//! Redis.

use buzz_core::both_backends;
use buzz_core::config::Settings;
use buzz_core::testkit::{authed, now, tag, SharedStorage, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

both_backends!(a_ban_cuts_reads_until_lifted, a_nip86_ban_cuts_reads);

fn owned_by(owner: &Keys) -> impl FnOnce(&mut Settings) {
    let owner = owner.pubkey().to_owned();
    move |s: &mut Settings| s.communities[0].owners = vec![owner]
}

/// `keys`' open connections: one with a live subscription, one without.
async fn sessions(relay: &TestRelay, keys: &Keys) -> [WsClient; 2] {
    let mut subscribed = authed(relay, keys).await;
    subscribed
        .req("live", vec![json!({"kinds": [1]})])
        .await
        .expect("subscribed");
    [subscribed, authed(relay, keys).await]
}

/// The relay closes `ws` with 1008 and a `blocked:` reason.
async fn closed_for_ban(ws: &mut WsClient) {
    let (code, reason) = ws.close_frame().await.expect("a close frame");
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.starts_with("blocked: banned"), "{reason}");
}

/// `POST /query` signed by `keys`: status and body.
async fn query(relay: &TestRelay, keys: &Keys) -> (u16, Value) {
    let body = json!([{"kinds": [1]}]).to_string();
    relay
        .http()
        .post_signed(keys, "/query", body.as_bytes())
        .await
}

async fn refused_everywhere(relay: &TestRelay, bob: &Keys) {
    let mut again = relay.ws().await;
    let (accepted, message) = again.auth(bob).await;
    assert!(
        !accepted && message.starts_with("blocked: banned"),
        "{message}"
    );
    let (status, body) = query(relay, bob).await;
    assert_eq!(status, 403, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("blocked: banned"), "{body}");
}

async fn served_again(relay: &TestRelay, bob: &Keys) {
    let mut again = relay.ws().await;
    assert_eq!(again.auth(bob).await, (true, String::new()));
    let (status, body) = query(relay, bob).await;
    assert_eq!(status, 200, "{body}");
}

async fn a_ban_cuts_reads_until_lifted(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = TestRelay::start_with(backend, name, owned_by(&owner), Vec::new()).await
    else {
        return;
    };
    let mut admin = authed(&relay, &owner).await;
    let bob = Keys::generate();
    let [mut subscribed, mut idle] = sessions(&relay, &bob).await;
    served_again(&relay, &bob).await;

    let ban = owner.sign(
        9042,
        vec![tag(&["p", bob.pubkey()]), tag(&["reason", "spam"])],
        "",
        now(),
    );
    assert_eq!(admin.publish(&ban).await, (true, String::new()));
    closed_for_ban(&mut subscribed).await;
    closed_for_ban(&mut idle).await;
    refused_everywhere(&relay, &bob).await;

    let unban = owner.sign(9043, vec![tag(&["p", bob.pubkey()])], "", now());
    assert_eq!(admin.publish(&unban).await, (true, String::new()));
    served_again(&relay, &bob).await;
    relay.stop().await;
}

async fn nip86(relay: &TestRelay, owner: &Keys, method: &str, params: Value) {
    let call = json!({"method": method, "params": params});
    let (status, body) = relay.http().nip86(Some(owner), &call).await;
    assert_eq!(status, 200, "{method}: {body}");
}

async fn a_nip86_ban_cuts_reads(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = TestRelay::start_with(backend, name, owned_by(&owner), Vec::new()).await
    else {
        return;
    };
    let bob = Keys::generate();
    let [mut subscribed, mut idle] = sessions(&relay, &bob).await;
    nip86(&relay, &owner, "banpubkey", json!([bob.pubkey(), "spam"])).await;
    closed_for_ban(&mut subscribed).await;
    closed_for_ban(&mut idle).await;
    refused_everywhere(&relay, &bob).await;
    nip86(&relay, &owner, "unbanpubkey", json!([bob.pubkey()])).await;
    served_again(&relay, &bob).await;
    relay.stop().await;
}

/// A ban made on one process cuts the member's sessions on the other, and its lifting
/// restores them there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_reaches_every_process() {
    let test = "a_ban_reaches_every_process";
    let Some(shared) = SharedStorage::create(test) else {
        return;
    };
    let owner = Keys::generate();
    let a = shared.process(test, owned_by(&owner), Vec::new()).await;
    let b = shared.process(test, owned_by(&owner), Vec::new()).await;
    let bob = Keys::generate();
    let [mut subscribed, mut idle] = sessions(&b, &bob).await;
    // A watcher on process b: once it sees the lifting, b has heard of it.
    let mut watcher = authed(&b, &Keys::generate()).await;
    watcher
        .req("sanctions", vec![json!({"kinds": [9043]})])
        .await
        .expect("watching");

    nip86(&a, &owner, "banpubkey", json!([bob.pubkey(), "spam"])).await;
    closed_for_ban(&mut subscribed).await;
    closed_for_ban(&mut idle).await;
    refused_everywhere(&b, &bob).await;

    nip86(&a, &owner, "unbanpubkey", json!([bob.pubkey()])).await;
    watcher
        .recv_where(|v| v[0] == "EVENT" && v[1] == "sanctions")
        .await
        .expect("process b hears the lifting");
    served_again(&b, &bob).await;
    a.stop().await;
    b.stop().await;
}
