//! A relay with the media plugin on port 0 (an owner, a second community), and a Blossom
//! client that signs BUD-11 tokens and NIP-98 headers and speaks plain HTTP.
#![allow(dead_code, unreachable_pub)]

use buzz_core::config::{CommunityPolicyFiles, CommunitySettings, Settings};
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_media::MediaPlugin;
use buzz_nostr::keys::Keys;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The second community's host (same relay, another `Host`).
pub const OTHER: &str = "other.test";

/// Start a relay whose community owner is `owner`, with `[plugins.media]` options `media`.
pub async fn relay(
    backend: TestBackend,
    test: &str,
    owner: &Keys,
    media: Value,
) -> Option<TestRelay> {
    let owner = owner.pubkey().to_owned();
    TestRelay::start_with(
        backend,
        test,
        move |s: &mut Settings| {
            s.communities[0].owners = vec![owner];
            s.communities.push(CommunitySettings {
                host: OTHER.into(),
                name: "Other".into(),
                owners: vec![],
                open: true,
                policies: CommunityPolicyFiles::default(),
            });
            if let (Some(section), Value::Object(options)) = (s.plugins.get_mut("media"), media) {
                section.options.extend(options);
            }
        },
        vec![PluginEntry::of::<MediaPlugin>()],
    )
    .await
}

pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A BUD-11 token for `verb`, expiring in an hour, with these `x` hashes and extra tags.
pub fn token(keys: &Keys, verb: &str, hashes: &[&str], extra: &[&[&str]]) -> String {
    token_at(keys, verb, hashes, extra, now() + 3600)
}

/// [`token`] expiring at `expiration`, encoded as BUD-11 says (URL-safe, no padding).
pub fn token_at(
    keys: &Keys,
    verb: &str,
    hashes: &[&str],
    extra: &[&[&str]],
    expiration: i64,
) -> String {
    use base64::Engine;
    let mut tags = vec![
        tag(&["t", verb]),
        tag(&["expiration", &expiration.to_string()]),
    ];
    tags.extend(hashes.iter().map(|x| tag(&["x", x])));
    tags.extend(extra.iter().map(|t| tag(t)));
    let event = keys.sign(24242, tags, "media test", now() - 1);
    let json = serde_json::to_vec(&event).expect("event json");
    format!(
        "Nostr {}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    )
}

/// What a request answered.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// A refusal carries `X-Reason` (BUD-01) and allows any origin.
    pub fn refused(&self, status: u16) -> &Self {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        assert!(
            self.header("x-reason").is_some_and(|r| !r.is_empty()),
            "no X-Reason"
        );
        assert_eq!(self.header("access-control-allow-origin"), Some("*"));
        self
    }
}

/// A Blossom client for one host of the relay.
#[derive(Clone)]
pub struct Blossom {
    base: String,
    host: String,
    client: reqwest::Client,
}

impl Blossom {
    pub fn new(relay: &TestRelay) -> Blossom {
        Blossom::at(relay, &relay.host())
    }

    /// The client for `host` (with the relay's port) on the same relay.
    pub fn at(relay: &TestRelay, host: &str) -> Blossom {
        Blossom {
            base: format!("http://{}", relay.addr),
            host: host.to_owned(),
            client: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host)
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        auth: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("host", &self.host);
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = res.bytes().await.expect("body").to_vec();
        Answer {
            status,
            headers,
            body,
        }
    }

    /// `PUT /upload` of `body` with a token naming its hash (and `extra` tags).
    pub async fn upload(&self, keys: &Keys, body: &[u8], extra: &[&[&str]]) -> Answer {
        let auth = token(keys, "upload", &[&sha256(body)], extra);
        self.send("PUT", "/upload", Some(&auth), &[], Some(body.to_vec()))
            .await
    }

    /// `GET /<sha256>` with a `get` token.
    pub async fn get(&self, keys: &Keys, sha: &str) -> Answer {
        let auth = token(keys, "get", &[], &[]);
        self.send("GET", &format!("/{sha}"), Some(&auth), &[], None)
            .await
    }

    pub async fn delete(&self, keys: &Keys, sha: &str) -> Answer {
        let auth = token(keys, "delete", &[sha], &[]);
        self.send("DELETE", &format!("/{sha}"), Some(&auth), &[], None)
            .await
    }

    pub async fn list(&self, keys: &Keys, pubkey: &str, query: &str) -> Answer {
        let auth = token(keys, "list", &[], &[]);
        self.send(
            "GET",
            &format!("/list/{pubkey}{query}"),
            Some(&auth),
            &[],
            None,
        )
        .await
    }

    /// A NIP-98 header for `method` on `path` of this host.
    pub fn nip98(&self, keys: &Keys, method: &str, path: &str, tags: &[&[&str]]) -> String {
        use base64::Engine;
        let mut all = vec![tag(&["u", &self.url(path)]), tag(&["method", method])];
        all.extend(tags.iter().map(|t| tag(t)));
        let event = keys.sign(27235, all, "", now());
        let json = serde_json::to_vec(&event).expect("event json");
        format!(
            "Nostr {}",
            base64::engine::general_purpose::STANDARD.encode(json)
        )
    }

    /// Send raw bytes on a fresh connection and read the answer's status line.
    pub async fn raw(&self, relay: &TestRelay, request: impl AsRef<[u8]>) -> String {
        let mut socket = tokio::net::TcpStream::connect(relay.addr)
            .await
            .expect("connect");
        socket.write_all(request.as_ref()).await.expect("write");
        let mut answer = vec![0u8; 4096];
        let n = socket.read(&mut answer).await.expect("read");
        String::from_utf8_lossy(&answer[..n]).to_string()
    }
}

/// How many blob files (not temporary ones) the media directory holds.
pub fn stored_files(relay: &TestRelay) -> usize {
    fn walk(dir: &std::path::Path) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| {
                let path = e.path();
                if path.is_dir() {
                    walk(&path)
                } else {
                    usize::from(path.file_name().is_some_and(|n| n.len() == 64))
                }
            })
            .sum()
    }
    walk(&relay.settings.relay.data_dir.join("media"))
}

/// Temporary upload files left behind.
pub fn temp_files(relay: &TestRelay) -> usize {
    std::fs::read_dir(relay.settings.relay.data_dir.join("media").join("tmp"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Bytes that `infer` reads as a PNG.
pub fn png(extra: &[u8]) -> Vec<u8> {
    let mut bytes = vec![
        0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D,
    ];
    bytes.extend_from_slice(b"IHDR");
    bytes.extend_from_slice(extra);
    bytes
}
