//! Who may read a blob follows the access service at every request, on both backends: a
//! channel-bound blob only for the channel's readers (and uploads into a channel only
//! for those who may post there), an unbound one for members, nothing anonymously, the
//! same 404 for unknown, unreadable and other-community blobs; a removal, a ban or a
//! deleted channel takes effect on the next request. And a body that stops arriving is
//! cut with nothing kept.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{fresh_id, now, tag, Member, TestBackend};
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

both_backends!(
    channel_blobs_follow_channel_access,
    community_blobs_follow_membership_and_bans,
    blobs_only_removed_messages_name_are_hidden,
    a_body_that_stops_is_cut_and_nothing_is_kept,
);

async fn channel_blobs_follow_channel_access(backend: TestBackend, name: &str) {
    let owner_keys = Keys::generate();
    let Some(relay) = relay(backend, name, &owner_keys, json!({})).await else {
        return;
    };
    let mut owner = Member::with_keys(&relay, owner_keys).await;
    let (alice, bob) = (Member::new(&relay).await, Member::new(&relay).await);
    let channel = owner.create_channel(true).await;
    owner.add_member(&channel, alice.keys.pubkey()).await;
    let blossom = Blossom::new(&relay);
    let bytes = b"minutes of the private meeting".to_vec();
    let sha = sha256(&bytes);
    let h: &[&[&str]] = &[&["h", &channel]];

    // Only someone who may post in the channel binds a blob to it; a stranger is told
    // the same for a private channel as for one that does not exist.
    blossom.upload(&bob.keys, &bytes, h).await.refused(403);
    let nowhere = fresh_id();
    blossom
        .upload(&bob.keys, &bytes, &[&["h", &nowhere]])
        .await
        .refused(403);
    assert_eq!(blossom.upload(&alice.keys, &bytes, h).await.status, 201);

    // Readers of the channel read it; a member outside it gets the 404 of a blob that
    // does not exist, and so does the other community.
    assert_eq!(blossom.get(&alice.keys, &sha).await.status, 200);
    assert_eq!(blossom.get(&owner.keys, &sha).await.status, 200);
    let hidden = blossom.get(&bob.keys, &sha).await;
    let missing = blossom.get(&bob.keys, &sha256(b"never uploaded")).await;
    assert_eq!(
        (hidden.status, hidden.body.clone()),
        (missing.status, missing.body.clone())
    );
    hidden.refused(404);
    let other = Blossom::at(&relay, &format!("{OTHER}:{}", relay.addr.port()));
    other.get(&alice.keys, &sha).await.refused(404);
    // Someone else's list shows only what the caller may read.
    let seen = blossom
        .list(&bob.keys, alice.keys.pubkey(), "")
        .await
        .json();
    assert_eq!(seen, json!([]));

    // Removal from the channel: the next request is a 404.
    owner.remove_member(&channel, alice.keys.pubkey()).await;
    blossom.get(&alice.keys, &sha).await.refused(404);
    owner.add_member(&channel, bob.keys.pubkey()).await;
    assert_eq!(blossom.get(&bob.keys, &sha).await.status, 200);

    // The channel deleted (9008): nobody reads what was bound to it.
    owner.publish_kind(9008, vec![tag(&["h", &channel])]).await;
    blossom.get(&owner.keys, &sha).await.refused(404);
    blossom.get(&bob.keys, &sha).await.refused(404);
    relay.stop().await;
}

async fn community_blobs_follow_membership_and_bans(backend: TestBackend, name: &str) {
    let owner_keys = Keys::generate();
    let Some(relay) = relay(backend, name, &owner_keys, json!({})).await else {
        return;
    };
    let mut owner = Member::with_keys(&relay, owner_keys).await;
    let (alice, bob) = (Member::new(&relay).await, Member::new(&relay).await);
    let blossom = Blossom::new(&relay);
    let bytes = png(b"team logo");
    let sha = sha256(&bytes);
    assert_eq!(blossom.upload(&alice.keys, &bytes, &[]).await.status, 201);
    assert_eq!(blossom.get(&bob.keys, &sha).await.status, 200);
    let origin = [("origin", "https://app.test")];
    let anonymous = blossom
        .send("GET", &format!("/{sha}"), None, &origin, None)
        .await;
    anonymous.refused(401);
    // A browser app may read why (BUD-01's X-Reason), and the range headers.
    let exposed = anonymous
        .header("access-control-expose-headers")
        .unwrap_or_default();
    let exposed = exposed.to_ascii_lowercase();
    assert!(
        exposed.contains("x-reason") && exposed.contains("content-range"),
        "{exposed}"
    );

    // The same bytes in the other community are another blob, with its own life.
    let other = Blossom::at(&relay, &format!("{OTHER}:{}", relay.addr.port()));
    other.get(&bob.keys, &sha).await.refused(404);
    assert_eq!(other.upload(&bob.keys, &bytes, &[]).await.status, 201);
    assert_eq!(other.delete(&bob.keys, &sha).await.status, 204);
    assert_eq!(blossom.get(&bob.keys, &sha).await.status, 200);

    // A ban: the banned member reads nothing and uploads nothing, at once — not even
    // the upload that was arriving when the ban came.
    let during = vec![5u8; 200_000];
    let auth = token(&bob.keys, "upload", &[&sha256(&during)], &[]);
    let mut socket = tokio::net::TcpStream::connect(relay.addr)
        .await
        .expect("connect");
    let head = format!(
        "PUT /upload HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        relay.host(),
        during.len()
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    socket.write_all(&during[..1000]).await.expect("part");
    let ban = owner.sign(
        9042,
        vec![tag(&["p", bob.keys.pubkey()]), tag(&["reason", "spam"])],
        "",
    );
    owner.publish(ban).await;
    socket.write_all(&during[1000..]).await.expect("rest");
    let mut answer = vec![0u8; 2048];
    let n = socket.read(&mut answer).await.expect("answer");
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    assert_eq!((stored_files(&relay), temp_files(&relay)), (1, 0));
    blossom.get(&bob.keys, &sha).await.refused(404);
    blossom
        .upload(&bob.keys, b"after the ban", &[])
        .await
        .refused(403);
    let unban = owner.sign(9043, vec![tag(&["p", bob.keys.pubkey()])], "");
    owner.publish(unban).await;
    assert_eq!(blossom.get(&bob.keys, &sha).await.status, 200);
    relay.stop().await;
}

async fn blobs_only_removed_messages_name_are_hidden(backend: TestBackend, name: &str) {
    let owner_keys = Keys::generate();
    let Some(relay) = relay(backend, name, &owner_keys, json!({})).await else {
        return;
    };
    let mut owner = Member::with_keys(&relay, owner_keys).await;
    let mut alice = Member::new(&relay).await;
    let mut carol = Member::new(&relay).await;
    let bob = Member::new(&relay).await;
    let channel = owner.create_channel(false).await;
    let blossom = Blossom::new(&relay);
    let (shot, twice, log) = (
        png(b"screenshot"),
        png(b"shared twice"),
        b"a log file".to_vec(),
    );
    for bytes in [&shot, &twice] {
        assert_eq!(blossom.upload(&alice.keys, bytes, &[]).await.status, 201);
    }
    assert_eq!(blossom.upload(&carol.keys, &log, &[]).await.status, 201);
    let imeta = |bytes: &[u8]| tag(&["imeta", &format!("x {}", sha256(bytes))]);
    let h = tag(&["h", &channel]);
    let removed = alice.publish_kind(9, vec![h.clone(), imeta(&shot)]).await;
    alice.publish_kind(9, vec![h.clone(), imeta(&twice)]).await;
    let also = alice.publish_kind(9, vec![h.clone(), imeta(&twice)]).await;
    let url = blossom.url(&format!("/{}.txt", sha256(&log)));
    let deleted = carol.post(&channel, &format!("the log: {url}")).await;
    assert_eq!(blossom.get(&bob.keys, &sha256(&shot)).await.status, 200);

    // A moderator removes the message (9005): the blob it alone named is hidden from
    // everyone but its uploader and the channel's moderators.
    owner
        .publish_kind(9005, vec![h.clone(), tag(&["e", &removed.id])])
        .await;
    blossom.get(&bob.keys, &sha256(&shot)).await.refused(404);
    assert_eq!(blossom.get(&alice.keys, &sha256(&shot)).await.status, 200);
    assert_eq!(blossom.get(&owner.keys, &sha256(&shot)).await.status, 200);
    // One removal of two: still named by a live message.
    owner
        .publish_kind(9005, vec![h.clone(), tag(&["e", &also.id])])
        .await;
    assert_eq!(blossom.get(&bob.keys, &sha256(&twice)).await.status, 200);
    // The author deletes their own message (kind 5): the same.
    carol.publish_kind(5, vec![tag(&["e", &deleted.id])]).await;
    blossom.get(&bob.keys, &sha256(&log)).await.refused(404);
    assert_eq!(blossom.get(&carol.keys, &sha256(&log)).await.status, 200);
    relay.stop().await;
}

async fn a_body_that_stops_is_cut_and_nothing_is_kept(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(mut relay) = relay(backend, name, &owner, json!({})).await else {
        return;
    };
    relay.settings.limits.body_timeout_secs = 1;
    relay.restart().await;
    let alice = Member::new(&relay).await;
    let auth = token(&alice.keys, "upload", &[&sha256(b"whatever")], &[]);
    let mut socket = tokio::net::TcpStream::connect(relay.addr)
        .await
        .expect("connect");
    let head = format!(
        "PUT /upload HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nContent-Length: 100000\r\n\r\n",
        relay.host()
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    socket.write_all(&[7u8; 20_000]).await.expect("part");
    let mut answer = vec![0u8; 2048];
    let started = now();
    let n = socket.read(&mut answer).await.expect("answer");
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.to_ascii_lowercase().contains("x-reason:"), "{text}");
    assert!(now() - started < 10);
    assert_eq!((stored_files(&relay), temp_files(&relay)), (0, 0));

    // A body that trickles (a few bytes before each idle cut would come) is cut too,
    // once it falls behind the minimum pace.
    let mut socket = tokio::net::TcpStream::connect(relay.addr)
        .await
        .expect("connect");
    socket.write_all(head.as_bytes()).await.expect("head");
    let mut answer = vec![0u8; 2048];
    let mut read = 0;
    for _ in 0..40 {
        // The pace itself is under test here: nothing to wait for but the clock. The
        // answer to the last chunk is read before the next is sent.
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let quick = std::time::Duration::from_millis(5);
        if let Ok(Ok(n)) = tokio::time::timeout(quick, socket.read(&mut answer)).await {
            read = n;
            break;
        }
        if socket.write_all(&[7u8; 64]).await.is_err() {
            read = socket.read(&mut answer).await.unwrap_or(0);
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer[..read]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("slower than"), "{text}");
    assert_eq!((stored_files(&relay), temp_files(&relay)), (0, 0));
    relay.stop().await;
}
