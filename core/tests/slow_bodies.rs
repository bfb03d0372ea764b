//! HTTP request bodies that never finish (issue 21, item 2): a body is buffered whole
//! before it is used, so a client that sends all but its last byte and goes silent pins
//! what it sent. NIP-98 routes check the `Authorization` header before reading any of
//! the body, each body has a deadline, and all unfinished bodies share one byte budget.
//!
//! The clients here are raw TCP sockets writing HTTP/1.1 by hand: a real client library
//! would not stop mid-body.

use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY_TIMEOUT_SECS: u64 = 2;
const BODY: usize = 524_288;

async fn start() -> TestRelay {
    TestRelay::start_with(
        TestBackend::Sqlite,
        "slow_bodies",
        |s| {
            s.limits.max_message_bytes = BODY;
            // Room for two largest bodies at once.
            s.limits.max_pending_body_bytes = 2 * BODY;
            s.limits.body_timeout_secs = BODY_TIMEOUT_SECS;
        },
        Vec::new(),
    )
    .await
    .expect("sqlite relay starts")
}

/// The body every signed request here means to send: a JSON array of one filter,
/// padded to exactly `BODY` bytes.
fn full_body() -> Vec<u8> {
    let head = br#"[{"kinds":[1],"limit":1}]"#;
    let mut body = head.to_vec();
    body.resize(BODY, b' ');
    body
}

/// A request that sends its headers and `sent` bytes of `body`, then stops.
struct Unfinished {
    stream: TcpStream,
}

impl Unfinished {
    async fn open(
        relay: &TestRelay,
        path: &str,
        auth: Option<String>,
        body: &[u8],
        sent: usize,
    ) -> Self {
        let mut stream = TcpStream::connect(relay.addr).await.expect("connect");
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n",
            relay.host(),
            body.len()
        );
        if let Some(auth) = auth {
            head.push_str(&format!("Authorization: {auth}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.expect("headers");
        stream.write_all(&body[..sent]).await.expect("partial body");
        Unfinished { stream }
    }

    /// The status line's code of the answer, read within `within` (`None`: no answer).
    async fn status(&mut self, within: Duration) -> Option<u16> {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        let read = tokio::time::timeout(within, async {
            while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = self.stream.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                answer.extend_from_slice(&buf[..n]);
            }
            Some(())
        })
        .await;
        read.ok()??;
        let line = String::from_utf8_lossy(&answer);
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Whether the relay closes the connection within `within` (reading what is left).
    async fn closed(&mut self, within: Duration) -> bool {
        let mut buf = [0u8; 4096];
        tokio::time::timeout(within, async {
            loop {
                match self.stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await
        .is_ok()
    }
}

fn signed(relay: &TestRelay, keys: &Keys, path: &str, body: &[u8]) -> String {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    authorization_header(
        keys,
        "POST",
        &relay.http().public_url(path),
        Some(body),
        now(),
        Some(&nonce),
    )
}

#[tokio::test]
async fn a_bad_authorization_is_refused_before_the_body_is_read() {
    let relay = start().await;
    let keys = Keys::generate();
    let body = full_body();
    let other_url = authorization_header(
        &keys,
        "POST",
        &relay.http().public_url("/events"),
        Some(&body),
        now(),
        None,
    );
    let stale = authorization_header(
        &keys,
        "POST",
        &relay.http().public_url("/query"),
        Some(&body),
        now() - 3_600,
        None,
    );
    let wrong_method = authorization_header(
        &keys,
        "GET",
        &relay.http().public_url("/query"),
        None,
        now(),
        None,
    );
    let cases = [
        ("no Authorization", None),
        ("a u tag naming another URL", Some(other_url)),
        ("an auth event an hour old", Some(stale)),
        ("method GET", Some(wrong_method)),
        ("not base64", Some("Nostr %%%".to_owned())),
    ];
    for (case, auth) in cases {
        // Headers and one byte of the body: an answer now can only come from the header.
        let mut request = Unfinished::open(&relay, "/query", auth, &body, 1).await;
        assert_eq!(
            request.status(Duration::from_secs(1)).await,
            Some(401),
            "{case}: refused at once, without waiting for the body"
        );
    }
    relay.stop().await;
}

#[tokio::test]
async fn a_body_that_never_finishes_is_cut_at_its_deadline() {
    let relay = start().await;
    let keys = Keys::generate();
    let body = full_body();
    for path in ["/query", "/events"] {
        let auth = signed(&relay, &keys, path, &body);
        let mut request = Unfinished::open(&relay, path, Some(auth), &body, BODY - 1).await;
        let sent = Instant::now();
        assert_eq!(
            request
                .status(Duration::from_secs(BODY_TIMEOUT_SECS + 3))
                .await,
            Some(408),
            "{path}: a body one byte short is answered 408 at its deadline"
        );
        assert!(sent.elapsed() >= Duration::from_secs(BODY_TIMEOUT_SECS - 1));
        assert!(
            request.closed(Duration::from_secs(5)).await,
            "{path}: the relay closes the connection it gave up on"
        );
    }
    relay.stop().await;
}

#[tokio::test]
async fn unfinished_bodies_share_one_budget() {
    let relay = start().await;
    let keys = Keys::generate();
    let body = full_body();
    // Two unfinished bodies take the whole budget (two largest bodies)...
    let mut holding = Vec::new();
    for _ in 0..2 {
        let auth = signed(&relay, &keys, "/query", &body);
        holding.push(Unfinished::open(&relay, "/query", Some(auth), &body, BODY - 1).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // ...so a third is refused at once with a retryable 503, before it is read.
    let auth = signed(&relay, &keys, "/query", &body);
    let mut third = Unfinished::open(&relay, "/query", Some(auth), &body, 1).await;
    assert_eq!(third.status(Duration::from_secs(1)).await, Some(503));

    // When the two are cut at their deadline their budget comes back: a whole
    // request is served again.
    for request in &mut holding {
        assert_eq!(
            request
                .status(Duration::from_secs(BODY_TIMEOUT_SECS + 3))
                .await,
            Some(408)
        );
    }
    let (status, answer) = relay.http().post_signed(&keys, "/query", &body).await;
    assert_eq!(status, 200, "{answer}");
    relay.stop().await;
}
