//! Blossom over the wire on both backends: upload, fetch (with Range), list and delete;
//! then everything a hostile client may send — bad or foreign authorization, a wrong
//! hash, oversize bodies (declared and not), quotas, types, path tricks — each refused
//! with `X-Reason` and nothing kept.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, Member, TestBackend};
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;

both_backends!(
    uploads_are_fetched_listed_and_deleted,
    bad_authorization_is_refused_before_anything_is_kept,
    bad_bodies_are_refused_and_nothing_is_kept,
    path_tricks_are_bad_requests,
);

async fn uploads_are_fetched_listed_and_deleted(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = relay(backend, name, &owner, json!({})).await else {
        return;
    };
    let (alice, bob) = (Member::new(&relay).await, Member::new(&relay).await);
    let blossom = Blossom::new(&relay);
    let bytes = png(&[7u8; 5000]);
    let sha = sha256(&bytes);

    let first = blossom.upload(&alice.keys, &bytes, &[]).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let descriptor = first.json();
    assert_eq!(descriptor["sha256"], sha);
    assert_eq!(descriptor["size"], bytes.len());
    assert_eq!(descriptor["type"], "image/png");
    assert_eq!(descriptor["url"], blossom.url(&format!("/{sha}.png")));
    assert!(descriptor["uploaded"]
        .as_i64()
        .is_some_and(|t| (t - now()).abs() < 60));
    // Again by the same member: the blob exists (200); by another: a second owner.
    assert_eq!(blossom.upload(&alice.keys, &bytes, &[]).await.status, 200);
    assert_eq!(blossom.upload(&bob.keys, &bytes, &[]).await.status, 200);
    assert_eq!(stored_files(&relay), 1);

    let got = blossom.get(&bob.keys, &sha).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, bytes);
    assert_eq!(got.header("content-type"), Some("image/png"));
    assert_eq!(got.header("accept-ranges"), Some("bytes"));
    let with_ext = format!("/{sha}.jpg");
    let auth = token(&bob.keys, "get", &[&sha], &[]);
    let renamed = blossom.send("GET", &with_ext, Some(&auth), &[], None).await;
    assert_eq!(
        (renamed.status, renamed.header("content-type")),
        (200, Some("image/png"))
    );

    let path = format!("/{sha}");
    let part = blossom
        .send("GET", &path, Some(&auth), &[("range", "bytes=2-5")], None)
        .await;
    assert_eq!(part.status, 206);
    assert_eq!(part.body, bytes[2..=5]);
    let range = format!("bytes 2-5/{}", bytes.len());
    assert_eq!(part.header("content-range"), Some(range.as_str()));
    let tail = blossom
        .send("GET", &path, Some(&auth), &[("range", "bytes=-3")], None)
        .await;
    assert_eq!(
        (tail.status, tail.body.as_slice()),
        (206, &bytes[bytes.len() - 3..])
    );
    let past = format!("bytes={}-", bytes.len());
    let beyond = blossom
        .send("GET", &path, Some(&auth), &[("range", &past)], None)
        .await;
    beyond.refused(416);
    let whole = format!("bytes */{}", bytes.len());
    assert_eq!(beyond.header("content-range"), Some(whole.as_str()));
    let head = blossom.send("HEAD", &path, Some(&auth), &[], None).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        head.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );

    // NIP-98 works as well as a token, on GET and on PUT (payload = the blob).
    let nip98 = blossom.nip98(&alice.keys, "GET", &path, &[]);
    assert_eq!(
        blossom
            .send("GET", &path, Some(&nip98), &[], None)
            .await
            .status,
        200
    );
    let text = b"plain words, uploaded with NIP-98".to_vec();
    let signed = blossom.nip98(
        &alice.keys,
        "PUT",
        "/upload",
        &[&["payload", &sha256(&text)]],
    );
    let put = blossom
        .send(
            "PUT",
            "/upload",
            Some(&signed),
            &[("content-type", "text/plain")],
            Some(text),
        )
        .await;
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
    assert_eq!(put.json()["type"], "text/plain");

    // Each owner lists it; a page holds `limit`, the cursor moves past it.
    let listed = blossom.list(&alice.keys, alice.keys.pubkey(), "").await;
    assert_eq!(listed.status, 200);
    let page = listed.json();
    assert_eq!(page.as_array().map(Vec::len), Some(2), "{page}");
    let one = blossom
        .list(&alice.keys, alice.keys.pubkey(), "?limit=1")
        .await
        .json();
    let cursor = one[0]["sha256"].as_str().unwrap_or_default().to_owned();
    let rest = blossom
        .list(
            &alice.keys,
            alice.keys.pubkey(),
            &format!("?limit=1&cursor={cursor}"),
        )
        .await
        .json();
    assert_eq!(rest.as_array().map(Vec::len), Some(1));
    assert_ne!(rest[0]["sha256"], one[0]["sha256"]);
    let bobs = blossom
        .list(&alice.keys, bob.keys.pubkey(), "")
        .await
        .json();
    assert_eq!(bobs[0]["sha256"], sha);

    // DELETE takes the caller's ownership only; the blob goes with its last owner.
    assert_eq!(blossom.delete(&alice.keys, &sha).await.status, 204);
    assert_eq!(
        blossom.delete(&alice.keys, &sha).await.refused(404).status,
        404
    );
    assert_eq!(blossom.get(&bob.keys, &sha).await.status, 200);
    assert_eq!(blossom.delete(&bob.keys, &sha).await.status, 204);
    blossom.get(&bob.keys, &sha).await.refused(404);
    assert_eq!(stored_files(&relay), 1, "only the text blob is left");

    let nip11 = relay.nip11().await;
    assert_eq!(nip11["media"]["max_blob_bytes"], 104_857_600);
    let scrape = relay.scrape().await;
    assert!(
        scrape.contains(r#"buzz_plugin_counts_total{plugin="media",name="uploads"} 4"#),
        "{scrape}"
    );
    assert!(scrape.contains(r#"name="refused_range"} 1"#), "{scrape}");
    relay.stop().await;
}

async fn bad_authorization_is_refused_before_anything_is_kept(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = relay(backend, name, &owner, json!({})).await else {
        return;
    };
    let alice = Member::new(&relay).await;
    let blossom = Blossom::new(&relay);
    let bytes = b"a small text blob".to_vec();
    let sha = sha256(&bytes);
    let put = |auth: Option<String>| {
        let (blossom, bytes) = (blossom.clone(), bytes.clone());
        async move {
            blossom
                .send("PUT", "/upload", auth.as_deref(), &[], Some(bytes))
                .await
        }
    };
    let k = &alice.keys;
    put(None).await.refused(401);
    put(Some(token_at(k, "upload", &[&sha], &[], now() - 1)))
        .await
        .refused(401);
    put(Some(token(k, "get", &[&sha], &[]))).await.refused(401);
    put(Some(token(k, "upload", &[], &[]))).await.refused(401);
    put(Some(token(k, "upload", &[&sha256(b"other")], &[])))
        .await
        .refused(401);
    put(Some(token(
        k,
        "upload",
        &[&sha],
        &[&["server", "elsewhere.example"]],
    )))
    .await
    .refused(401);
    put(Some("Nostr not-base64!".into())).await.refused(401);
    put(Some("Bearer abc".into())).await.refused(401);
    // A tampered token: its content no longer matches its id.
    let tampered = {
        use base64::Engine;
        let t = token(k, "upload", &[&sha], &[]);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let json = engine.decode(t.trim_start_matches("Nostr ")).expect("b64");
        let text = String::from_utf8(json)
            .expect("utf8")
            .replace("media test", "tampered!!");
        format!("Nostr {}", engine.encode(text))
    };
    put(Some(tampered)).await.refused(401);
    assert_eq!((stored_files(&relay), temp_files(&relay)), (0, 0));

    // Tokens are reusable until they expire, in any base64 spelling; server tags naming
    // this host pass.
    let reusable = token(k, "upload", &[&sha], &[&["server", "localhost"]]);
    assert_eq!(put(Some(reusable.clone())).await.status, 201);
    assert_eq!(put(Some(reusable.clone())).await.status, 200);
    let padded = {
        use base64::Engine;
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(reusable.trim_start_matches("Nostr "))
            .expect("b64");
        format!(
            "Nostr {}",
            base64::engine::general_purpose::STANDARD.encode(json)
        )
    };
    assert_eq!(put(Some(padded)).await.status, 200);

    // Nothing anonymously, nothing with a token for another blob or verb; NIP-98 once.
    let path = format!("/{sha}");
    blossom
        .send("GET", &path, None, &[], None)
        .await
        .refused(401);
    let other = token(k, "get", &[&sha256(b"other")], &[]);
    blossom
        .send("GET", &path, Some(&other), &[], None)
        .await
        .refused(401);
    let wrong_verb = token(k, "delete", &[&sha], &[]);
    blossom
        .send("GET", &path, Some(&wrong_verb), &[], None)
        .await
        .refused(401);
    blossom
        .send(
            "DELETE",
            &path,
            Some(&token(k, "delete", &[], &[])),
            &[],
            None,
        )
        .await
        .refused(401);
    blossom
        .send("GET", "/list/{}", None, &[], None)
        .await
        .refused(400);
    let list = format!("/list/{}", k.pubkey());
    blossom
        .send("GET", &list, None, &[], None)
        .await
        .refused(401);
    let once = blossom.nip98(k, "GET", &path, &[]);
    assert_eq!(
        blossom
            .send("GET", &path, Some(&once), &[], None)
            .await
            .status,
        200
    );
    blossom
        .send("GET", &path, Some(&once), &[], None)
        .await
        .refused(401);
    let elsewhere = blossom.nip98(k, "GET", "/somewhere", &[]);
    blossom
        .send("GET", &path, Some(&elsewhere), &[], None)
        .await
        .refused(401);
    // BUD-06: the preflight wants authorization too.
    blossom
        .send(
            "HEAD",
            "/upload",
            None,
            &[("x-sha-256", &sha), ("x-content-length", "5")],
            None,
        )
        .await
        .refused(401);
    relay.stop().await;
}

async fn bad_bodies_are_refused_and_nothing_is_kept(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let media = json!({ "max_blob_bytes": 64 * 1024, "quota_bytes_per_pubkey": 100 * 1024,
                        "allowed_types": ["image/*", "text/plain"] });
    let Some(relay) = relay(backend, name, &owner, media).await else {
        return;
    };
    let alice = Member::new(&relay).await;
    let blossom = Blossom::new(&relay);
    let k = &alice.keys;
    let body = png(&[1u8; 1000]);
    let sha = sha256(&body);
    let auth = token(k, "upload", &[&sha, &sha256(b"x")], &[]);

    // The announced hash differs from the bytes: 409, nothing kept.
    let wrong = sha256(b"x");
    blossom
        .send(
            "PUT",
            "/upload",
            Some(&auth),
            &[("x-sha-256", &wrong)],
            Some(body.clone()),
        )
        .await
        .refused(409);
    // Oversize, declared: refused from Content-Length.
    let big = vec![b'a'; 64 * 1024 + 1];
    let big_auth = token(k, "upload", &[&sha256(&big)], &[]);
    blossom
        .send(
            "PUT",
            "/upload",
            Some(&big_auth),
            &[("content-type", "text/plain")],
            Some(big.clone()),
        )
        .await
        .refused(413);
    // Oversize, undeclared (chunked): refused while reading.
    let chunked = chunked_put(&relay.host(), &big_auth, &big);
    let answer = blossom.raw(&relay, &chunked).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("x-reason:"),
        "{answer}"
    );
    // A type the community does not accept, sniffed from the bytes (a zip, declared as
    // text), and one declared where nothing can be sniffed.
    let mut zip = b"PK\x03\x04".to_vec();
    zip.extend_from_slice(&[0u8; 100]);
    let zip_auth = token(k, "upload", &[&sha256(&zip)], &[]);
    blossom
        .send(
            "PUT",
            "/upload",
            Some(&zip_auth),
            &[("content-type", "text/plain")],
            Some(zip),
        )
        .await
        .refused(415);
    let csv = b"a,b\n1,2\n".to_vec();
    let csv_auth = token(k, "upload", &[&sha256(&csv)], &[]);
    blossom
        .send(
            "PUT",
            "/upload",
            Some(&csv_auth),
            &[("content-type", "text/csv")],
            Some(csv),
        )
        .await
        .refused(415);
    assert_eq!((stored_files(&relay), temp_files(&relay)), (0, 0));

    // The quota: 60 KiB fits once; a second, different 60 KiB does not.
    let fill = |b: u8| {
        let mut p = png(&[]);
        p.resize(60 * 1024, b);
        p
    };
    assert_eq!(blossom.upload(k, &fill(1), &[]).await.status, 201);
    blossom.upload(k, &fill(2), &[]).await.refused(429);
    let chunked = chunked_put(
        &relay.host(),
        &token(k, "upload", &[&sha256(&fill(3))], &[]),
        &fill(3),
    );
    let answer = blossom.raw(&relay, &chunked).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert_eq!((stored_files(&relay), temp_files(&relay)), (1, 0));

    // BUD-06 preflight: the same rules, from headers alone.
    let pre = |length: Option<&str>, kind: &str| {
        let auth = token(k, "upload", &[&sha], &[]);
        let blossom = blossom.clone();
        let (length, kind, sha) = (length.map(str::to_owned), kind.to_owned(), sha.clone());
        async move {
            let mut headers = vec![
                ("x-sha-256", sha.as_str()),
                ("x-content-type", kind.as_str()),
            ];
            if let Some(l) = &length {
                headers.push(("x-content-length", l.as_str()));
            }
            blossom
                .send("HEAD", "/upload", Some(&auth), &headers, None)
                .await
        }
    };
    assert_eq!(pre(Some("1000"), "image/png").await.status, 200);
    pre(None, "image/png").await.refused(411);
    pre(Some("70000"), "image/png").await.refused(413);
    pre(Some("1000"), "application/zip").await.refused(415);
    pre(Some("50000"), "image/png").await.refused(429);
    pre(Some("many"), "image/png").await.refused(400);
    relay.stop().await;
}

/// A `PUT /upload` whose body is sent chunked (no `Content-Length`), in one write.
fn chunked_put(host: &str, auth: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "PUT /upload HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n\
         Content-Type: image/png\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(8192) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    request
}

async fn path_tricks_are_bad_requests(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = relay(backend, name, &owner, json!({})).await else {
        return;
    };
    let alice = Member::new(&relay).await;
    let blossom = Blossom::new(&relay);
    let bytes = b"kept safe".to_vec();
    let sha = sha256(&bytes);
    assert_eq!(blossom.upload(&alice.keys, &bytes, &[]).await.status, 201);
    let auth = token(&alice.keys, "get", &[], &[]);
    for path in [
        sha.to_uppercase(),
        sha[..63].to_owned(),
        format!("{sha}.tar.gz"),
        format!("{sha}.%2e%2e"),
        "%2e%2e%2fetc%2fpasswd".to_owned(),
        "..%2f..%2fbuzz.db".to_owned(),
    ] {
        let answer = blossom
            .send("GET", &format!("/{path}"), Some(&auth), &[], None)
            .await;
        answer.refused(400);
    }
    // Dot segments on the wire never reach a file outside the store.
    for raw in ["/../buzz.db", "/./../relay.key", &format!("/tmp/../{sha}")] {
        let request = format!(
            "GET {raw} HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n",
            relay.host()
        );
        let answer = blossom.raw(&relay, &request).await;
        assert!(
            !answer.starts_with("HTTP/1.1 200") || raw.ends_with(&sha),
            "{raw}: {answer}"
        );
        assert!(!answer.contains("SQLite format"), "{raw}");
    }
    // Core's routes still answer as core's.
    let info = blossom.send("GET", "/info", None, &[], None).await;
    assert_eq!(info.status, 200);
    assert!(info.json()["supported_nips"].is_array());
    relay.stop().await;
}
