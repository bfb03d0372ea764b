//! Browser clients: every HTTP route a web app calls answers its CORS preflight, and
//! every answer (errors included) carries the headers a browser needs to read it. The
//! relay's HTTP auth is NIP-98 in the `Authorization` header, never a cookie, so any
//! origin may call it (`*`, no credentials).

use buzz_core::testkit::{TestBackend, TestRelay};

/// The routes a web client uses: the bridge, NIP-86 at `/`, a plugin's API under
/// `/buzz/v1` (answered before routing, so the same for every path), NIP-11.
const ROUTES: [(&str, &str); 5] = [
    ("/query", "POST"),
    ("/events", "POST"),
    ("/", "POST"),
    ("/buzz/v1/sidebar", "GET"),
    ("/info", "GET"),
];

fn header<'a>(answer: &'a reqwest::Response, name: &str) -> &'a str {
    answer
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_are_answered_on_every_route() {
    let relay = TestRelay::start(TestBackend::Sqlite, "cors_preflight")
        .await
        .expect("sqlite relay");
    let client = reqwest::Client::new();
    for (path, method) in ROUTES {
        let answer = client
            .request(
                reqwest::Method::OPTIONS,
                format!("http://{}{path}", relay.addr),
            )
            .header("Host", relay.host())
            .header("Origin", "https://app.example")
            .header("Access-Control-Request-Method", method)
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type",
            )
            .send()
            .await
            .expect("preflight");
        assert!(
            answer.status().is_success(),
            "OPTIONS {path}: {}",
            answer.status()
        );
        assert_eq!(
            header(&answer, "access-control-allow-origin"),
            "*",
            "{path}"
        );
        let methods = header(&answer, "access-control-allow-methods").to_ascii_uppercase();
        assert!(methods.contains(method), "{path} allows {methods}");
        let headers = header(&answer, "access-control-allow-headers").to_ascii_lowercase();
        assert!(
            headers.contains("authorization") && headers.contains("content-type"),
            "{path} allows headers {headers}"
        );
        assert!(
            !header(&answer, "access-control-max-age").is_empty(),
            "{path}: a preflight is cached, not repeated before every request"
        );
    }
    relay.stop().await;
}

/// A browser shows its app an answer only if the answer itself carries the header:
/// refusals too (a 401 without it reads as a network error), and `Retry-After` is
/// exposed so a rate-limited app knows when to come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_carry_the_headers_a_browser_needs() {
    let relay = TestRelay::start(TestBackend::Sqlite, "cors_answers")
        .await
        .expect("sqlite relay");
    let client = reqwest::Client::new();
    let answer = client
        .post(format!("http://{}/query", relay.addr))
        .header("Host", relay.host())
        .header("Origin", "https://app.example")
        .header("Content-Type", "application/json")
        .body("[{}]")
        .send()
        .await
        .expect("POST /query");
    assert_eq!(answer.status().as_u16(), 401, "no NIP-98 header");
    assert_eq!(header(&answer, "access-control-allow-origin"), "*");
    let exposed = header(&answer, "access-control-expose-headers").to_ascii_lowercase();
    assert!(exposed.contains("retry-after"), "exposed: {exposed}");

    // NIP-11 carries them even without an Origin (tools that list relays check it).
    let info = client
        .get(format!("http://{}/info", relay.addr))
        .header("Host", relay.host())
        .send()
        .await
        .expect("GET /info");
    assert_eq!(header(&info, "access-control-allow-origin"), "*");
    relay.stop().await;
}
