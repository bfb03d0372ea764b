//! Plugin routes at the root with path patterns, streamed request bodies and streamed
//! answers: what a blob store (Blossom) needs, without taking any of core's paths.

use buzz_core::error::Reason;
use buzz_core::plugin::{
    DeclaredRoute, Plugin, PluginCatalog, PluginEntry, PluginManifest, PluginRequest,
    PluginResponse, ResponseStream, Route, RouteAuth, RouteBody, RouteHandler, RouteMethod,
    Services,
};
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{TestBackend, TestRelay};
use serde_json::json;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes a `GET /{name}` answers with.
const SERVED: u64 = 3 * 1024 * 1024 + 7;

/// Counts a streamed body as it arrives; answers how many bytes and chunks came.
struct Count;

#[async_trait::async_trait]
impl RouteHandler for Count {
    async fn handle(&self, mut request: PluginRequest) -> Result<PluginResponse, Reason> {
        let stream = request
            .stream
            .as_mut()
            .ok_or_else(|| Reason::invalid("no stream on a streamed route"))?;
        let declared = stream.declared_len();
        let (mut bytes, mut chunks) = (0u64, 0u64);
        while let Some(chunk) = stream.chunk().await {
            bytes += chunk?.len() as u64;
            chunks += 1;
        }
        Ok(PluginResponse::json(
            200,
            &json!({ "path": request.path, "bytes": bytes, "chunks": chunks,
                     "declared": declared, "whole_body": request.body.len() }),
        ))
    }
}

/// Serves [`SERVED`] bytes of `b'x'`, streamed (`HEAD`: the length only).
struct Serve;

#[async_trait::async_trait]
impl RouteHandler for Serve {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        if request.method == "HEAD" {
            return Ok(PluginResponse::streamed(
                200,
                "application/octet-stream",
                ResponseStream::empty(SERVED),
            ));
        }
        let chunk = bytes::Bytes::from(vec![b'x'; 64 * 1024]);
        let mut left = SERVED;
        let stream = futures_util::stream::iter(std::iter::from_fn(move || {
            let n = left.min(chunk.len() as u64);
            left -= n;
            (n > 0).then(|| Ok(chunk.slice(..n as usize)))
        }));
        Ok(PluginResponse::streamed(
            200,
            "application/octet-stream",
            ResponseStream::new(SERVED, Box::pin(stream)),
        ))
    }
}

struct Blobs;

impl Plugin for Blobs {
    fn name(&self) -> &'static str {
        "blobs"
    }

    fn routes(self: Arc<Self>) -> Vec<Route> {
        let route = |method, handler: Arc<dyn RouteHandler>, body| Route {
            method,
            path: "/{name}".into(),
            auth: RouteAuth::Public,
            body,
            handler,
        };
        vec![
            route(RouteMethod::Put, Arc::new(Count), RouteBody::Streamed),
            route(RouteMethod::Post, Arc::new(Count), RouteBody::Streamed),
            route(RouteMethod::Get, Arc::new(Serve), RouteBody::Whole),
            route(RouteMethod::Head, Arc::new(Serve), RouteBody::Whole),
        ]
    }
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoKeys {}

struct BlobsManifest;

impl PluginManifest for BlobsManifest {
    const NAME: &'static str = "blobs";
    const ENABLED_BY_DEFAULT: bool = true;
    const ROUTES: &'static [DeclaredRoute] = &[
        DeclaredRoute::new(RouteMethod::Put, "/{name}", RouteAuth::Public).streamed(),
        DeclaredRoute::new(RouteMethod::Post, "/{name}", RouteAuth::Public).streamed(),
        DeclaredRoute::new(RouteMethod::Get, "/{name}", RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Head, "/{name}", RouteAuth::Public),
    ];
    type Config = NoKeys;
    fn build(_config: NoKeys, _services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Blobs))
    }
}

async fn relay(body_timeout_secs: u64) -> TestRelay {
    TestRelay::start_with(
        TestBackend::Sqlite,
        "streamed_routes",
        |s| s.limits.body_timeout_secs = body_timeout_secs,
        vec![PluginEntry::of::<BlobsManifest>()],
    )
    .await
    .expect("sqlite needs no service")
}

fn url(relay: &TestRelay, path: &str) -> String {
    format!("http://{}{path}", relay.host())
}

#[tokio::test]
async fn a_streamed_body_larger_than_a_message_reaches_the_handler_in_chunks() {
    let relay = relay(10).await;
    let size = relay.settings.limits.max_message_bytes * 4 + 3;
    let answer: serde_json::Value = reqwest::Client::new()
        .put(url(&relay, "/blob.bin"))
        .body(vec![7u8; size])
        .send()
        .await
        .expect("put")
        .json()
        .await
        .expect("json");
    assert_eq!(answer["bytes"], size as u64, "{answer}");
    assert_eq!(answer["declared"], size as u64, "{answer}");
    assert_eq!(answer["whole_body"], 0, "{answer}");
    assert!(answer["chunks"].as_u64().unwrap_or(0) > 1, "{answer}");
    assert_eq!(answer["path"], "/blob.bin");
    relay.stop().await;
}

#[tokio::test]
async fn a_streamed_answer_and_its_head_carry_the_length() {
    let relay = relay(10).await;
    let client = reqwest::Client::new();
    let got = client.get(url(&relay, "/blob")).send().await.expect("get");
    assert_eq!(got.status(), 200);
    assert_eq!(got.content_length(), Some(SERVED));
    let body = got.bytes().await.expect("body");
    assert_eq!(body.len() as u64, SERVED);
    assert!(body.iter().all(|b| *b == b'x'));
    let head = client
        .head(url(&relay, "/blob"))
        .send()
        .await
        .expect("head");
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok()),
        Some(SERVED.to_string().as_str())
    );
    relay.stop().await;
}

#[tokio::test]
async fn core_routes_win_over_a_root_pattern() {
    let relay = relay(10).await;
    let client = reqwest::Client::new();
    let info = client.get(url(&relay, "/info")).send().await.expect("info");
    assert_eq!(info.status(), 200);
    let nip11: serde_json::Value = info.json().await.expect("nip11 json");
    assert!(nip11["supported_nips"].is_array(), "{nip11}");
    // The bridge, not the plugin's POST: it wants NIP-98.
    let query = client
        .post(url(&relay, "/query"))
        .body("[{}]")
        .send()
        .await
        .expect("query");
    assert_eq!(query.status(), 401);
    let events = client
        .post(url(&relay, "/events"))
        .body("{}")
        .send()
        .await
        .expect("events");
    assert_eq!(events.status(), 401);
    let root = client.get(url(&relay, "/")).send().await.expect("root");
    assert_eq!(root.status(), 200);
    assert!(root.text().await.expect("text").contains("Nostr relay"));
    relay.stop().await;
}

#[tokio::test]
async fn a_body_that_goes_quiet_is_cut_with_408() {
    let relay = relay(1).await;
    let mut socket = tokio::net::TcpStream::connect(relay.addr)
        .await
        .expect("connect");
    let head = format!(
        "PUT /slow HTTP/1.1\r\nHost: {}\r\nContent-Length: 1000\r\n\r\n",
        relay.host()
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    socket.write_all(&[1u8; 100]).await.expect("part");
    let mut answer = vec![0u8; 1024];
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), socket.read(&mut answer))
        .await
        .expect("answered before the test's bound")
        .expect("read");
    let text = String::from_utf8_lossy(&answer[..read]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    relay.stop().await;
}

/// NIP-98 on a POST hashes the whole body, which a streamed route never holds.
struct StreamedSignedPost;

impl PluginManifest for StreamedSignedPost {
    const NAME: &'static str = "blobs";
    const ENABLED_BY_DEFAULT: bool = true;
    const ROUTES: &'static [DeclaredRoute] =
        &[DeclaredRoute::new(RouteMethod::Post, "/{name}", RouteAuth::Nip98).streamed()];
    type Config = NoKeys;
    fn build(_config: NoKeys, _services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Blobs))
    }
}

#[tokio::test]
async fn a_streamed_signed_post_refuses_to_start() {
    let catalog = PluginCatalog::new().with(PluginEntry::of::<StreamedSignedPost>());
    let dir = tempfile::tempdir().expect("dir");
    let mut settings = catalog
        .load_settings_from(None, &Default::default())
        .expect("settings");
    settings.server.bind = "127.0.0.1:0".into();
    settings.metrics.bind = "127.0.0.1:0".into();
    settings.storage.database_url = format!("sqlite://{}", dir.path().join("b.db").display());
    settings.relay.data_dir = dir.path().to_path_buf();
    let err = match RelayBuilder::new(settings)
        .catalog(catalog)
        .without_signal_handlers()
        .start()
        .await
    {
        Ok(running) => {
            running.stop().await.expect("stop");
            panic!("a streamed NIP-98 POST started")
        }
        Err(err) => err,
    };
    assert!(format!("{err:#}").contains("cannot be streamed"), "{err:#}");
}
