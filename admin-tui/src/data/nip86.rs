//! The console's NIP-86 client: moderation from the console goes through the relay
//! (audited, the same path as owners' 9042–9044 events), signed with an owner's key.

use super::sources::{http_client, relay_http};
use buzz_core::config::Settings;
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::{json, Value};

/// Calls NIP-86 methods on the relay as one owner.
pub struct Nip86Client {
    client: reqwest::Client,
    addr: String,
    port: String,
    scheme: String,
    keys: Keys,
}

impl Nip86Client {
    pub fn new(settings: &Settings, keys: Keys) -> Result<Nip86Client, String> {
        let (addr, _) = relay_http(settings);
        let port = addr.rsplit_once(':').map_or("80", |(_, p)| p).to_owned();
        Ok(Nip86Client {
            client: http_client()?,
            addr,
            port,
            scheme: settings.server.public_scheme.clone(),
            keys,
        })
    }

    /// The owner pubkey calls are signed with.
    pub fn pubkey(&self) -> &str {
        self.keys.pubkey()
    }

    /// Call `method` for `community` (its host); `Ok` is the answer's `result`, `Err` the
    /// relay's error text (or why it could not be reached).
    pub async fn call(
        &self,
        community: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let host = format!("{community}:{}", self.port);
        let body = json!({"method": method, "params": params}).to_string();
        let url = format!("{}://{host}/", self.scheme);
        let now = buzz_core::clock::Clock::now_secs(&buzz_core::clock::SystemClock);
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let auth = authorization_header(
            &self.keys,
            "POST",
            &url,
            Some(body.as_bytes()),
            now,
            Some(&nonce),
        );
        let resp = self
            .client
            .post(format!("http://{}/", self.addr))
            .header("host", host)
            .header("content-type", "application/nostr+json+rpc")
            .header("authorization", auth)
            .body(body)
            .send()
            .await
            .map_err(|e| format!("relay at {}: {e}", self.addr))?;
        let status = resp.status();
        let answer: Value = resp
            .json()
            .await
            .map_err(|e| format!("HTTP {status}: answer is not JSON: {e}"))?;
        match answer.get("error").and_then(Value::as_str) {
            Some(error) => Err(format!("HTTP {}: {error}", status.as_u16())),
            None if status.is_success() => Ok(answer.get("result").cloned().unwrap_or(Value::Null)),
            None => Err(format!("HTTP {}", status.as_u16())),
        }
    }
}
