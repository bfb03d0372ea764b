//! A tiny client of the private `/buzz/v1` read-state API. Every request is signed with
//! NIP-98 over the exact URL it sends (path and encoded query) and, on POST, the SHA-256
//! of the exact body; each call signs afresh (a retry must never reuse an authorization:
//! the relay refuses replays).

use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// One answer: status, headers (names lowercased) and the JSON body (or the text as a
/// JSON string when it is not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A signer talking to one relay community.
#[derive(Clone)]
pub struct Client {
    /// Where to connect, e.g. `http://127.0.0.1:7777`.
    pub connect: String,
    /// The `Host` header (it picks the community), e.g. `localhost:7777`.
    pub host: String,
    /// Scheme of the external URL the relay sees (`server.public_scheme`).
    pub scheme: String,
    pub keys: Keys,
    http: reqwest::Client,
}

impl Client {
    pub fn new(connect: &str, host: &str, keys: Keys) -> Client {
        Client {
            connect: connect.trim_end_matches('/').to_owned(),
            host: host.to_owned(),
            scheme: "http".into(),
            keys,
            http: reqwest::Client::new(),
        }
    }

    /// The externally addressed URL of `path_and_query` (what NIP-98's `u` names).
    pub fn external_url(&self, path_and_query: &str) -> String {
        format!("{}://{}{}", self.scheme, self.host, path_and_query)
    }

    /// A fresh NIP-98 `Authorization` value for one request.
    pub fn authorization(&self, method: &str, path_and_query: &str, body: Option<&[u8]>) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        authorization_header(
            &self.keys,
            method,
            &self.external_url(path_and_query),
            body,
            now,
            Some(&nonce),
        )
    }

    /// GET with the given `Authorization` (or none).
    pub async fn get_with(
        &self,
        path_and_query: &str,
        auth: Option<&str>,
    ) -> anyhow::Result<Answer> {
        let mut req = self
            .http
            .get(format!("{}{}", self.connect, path_and_query))
            .header("host", &self.host);
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        answer(req).await
    }

    /// POST `body` with the given `Authorization` (or none).
    pub async fn post_with(
        &self,
        path: &str,
        body: &[u8],
        auth: Option<&str>,
    ) -> anyhow::Result<Answer> {
        let mut req = self
            .http
            .post(format!("{}{}", self.connect, path))
            .header("host", &self.host)
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        answer(req).await
    }

    /// Signed GET.
    pub async fn get(&self, path_and_query: &str) -> anyhow::Result<Answer> {
        let auth = self.authorization("GET", path_and_query, None);
        self.get_with(path_and_query, Some(&auth)).await
    }

    /// Signed POST.
    pub async fn post(&self, path: &str, body: &[u8]) -> anyhow::Result<Answer> {
        let auth = self.authorization("POST", path, Some(body));
        self.post_with(path, body, Some(&auth)).await
    }

    /// One sidebar page (`cursor`: the last page's `next_cursor`).
    pub async fn sidebar(&self, limit: usize, cursor: Option<&str>) -> anyhow::Result<Answer> {
        let mut path = format!("/buzz/v1/me/sidebar?limit={limit}");
        if let Some(cursor) = cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        self.get(&path).await
    }

    /// Refresh these channels.
    pub async fn refresh(&self, channel_ids: &[&str]) -> anyhow::Result<Answer> {
        self.get(&format!(
            "/buzz/v1/me/sidebar?channel_ids={}",
            channel_ids.join(",")
        ))
        .await
    }

    /// Post intents (`intent(...)` values).
    pub async fn intents(&self, intents: &[Value]) -> anyhow::Result<Answer> {
        let body = json!({ "intents": intents }).to_string();
        self.post("/buzz/v1/me/read-state", body.as_bytes()).await
    }

    /// Explicit contexts: `targets` is the JSON array, URL-encoded here.
    pub async fn contexts(&self, targets: &Value) -> anyhow::Result<Answer> {
        let encoded = encode(&targets.to_string());
        self.get(&format!("/buzz/v1/me/read-state?targets={encoded}"))
            .await
    }
}

/// `mark_through` in the channel timeline, or in a thread when `root` is given.
pub fn mark_through(channel: &str, root: Option<&str>, message_id: &str) -> Value {
    json!({ "type": "mark_through", "target": target(channel, root), "message_id": message_id })
}

/// `mark_channel_read`: the whole-channel cut.
pub fn mark_channel_read(channel: &str, message_id: &str) -> Value {
    json!({ "type": "mark_channel_read", "channel_id": channel, "message_id": message_id })
}

pub fn follow(channel: &str, root: &str) -> Value {
    json!({ "type": "follow", "target": target(channel, Some(root)) })
}

pub fn unfollow(channel: &str, root: &str) -> Value {
    json!({ "type": "unfollow", "target": target(channel, Some(root)) })
}

fn target(channel: &str, root: Option<&str>) -> Value {
    match root {
        Some(root) => json!({ "channel_id": channel, "root_id": root }),
        None => json!({ "channel_id": channel }),
    }
}

/// Percent-encode everything but unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn answer(req: reqwest::RequestBuilder) -> anyhow::Result<Answer> {
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let text = resp.text().await?;
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok(Answer {
        status,
        headers,
        body,
    })
}
