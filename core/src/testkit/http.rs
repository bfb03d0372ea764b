use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::Value;
use std::net::SocketAddr;

/// An HTTP client for the bridge that signs requests with NIP-98.
#[derive(Clone)]
pub struct HttpClient {
    addr: SocketAddr,
    host: String,
    client: reqwest::Client,
}

/// Status and JSON body of an answer.
pub(crate) type HttpAnswer = (u16, Value);

impl HttpClient {
    pub fn new(addr: SocketAddr, host: &str) -> Self {
        HttpClient {
            addr,
            host: host.to_owned(),
            client: reqwest::Client::new(),
        }
    }

    /// The URL a NIP-98 `u` tag names for `path`.
    pub fn public_url(&self, path: &str) -> String {
        format!("http://{}{}", self.host, path)
    }

    /// POST `body` to `path`, signed by `keys`. Each call carries a fresh `nonce`, so
    /// two identical requests in the same second are two distinct auth events.
    pub async fn post_signed(&self, keys: &Keys, path: &str, body: &[u8]) -> HttpAnswer {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let auth = authorization_header(
            keys,
            "POST",
            &self.public_url(path),
            Some(body),
            super::now(),
            Some(&nonce),
        );
        self.post(path, body, Some(&auth)).await
    }

    /// POST with an explicit `Authorization` header (or none).
    pub async fn post(&self, path: &str, body: &[u8], authorization: Option<&str>) -> HttpAnswer {
        self.post_typed(path, "application/json", body, authorization)
            .await
    }

    /// A NIP-86 call: `POST /` with `application/nostr+json+rpc`, signed by `keys`
    /// (`None`: no `Authorization` header).
    pub async fn nip86(&self, keys: Option<&Keys>, body: &Value) -> HttpAnswer {
        let body = body.to_string().into_bytes();
        let auth = keys.map(|keys| {
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            authorization_header(
                keys,
                "POST",
                &self.public_url("/"),
                Some(&body),
                super::now(),
                Some(&nonce),
            )
        });
        self.post_typed("/", "application/nostr+json+rpc", &body, auth.as_deref())
            .await
    }

    /// POST `body` as `content_type` with an explicit `Authorization` header (or none).
    pub async fn post_typed(
        &self,
        path: &str,
        content_type: &str,
        body: &[u8],
        authorization: Option<&str>,
    ) -> HttpAnswer {
        let mut req = self
            .client
            .post(format!("http://{}{}", self.addr, path))
            .header("host", &self.host)
            .header("content-type", content_type)
            .body(body.to_vec());
        if let Some(auth) = authorization {
            req = req.header("authorization", auth);
        }
        Self::answer(req).await
    }

    /// GET `path` with extra headers.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> HttpAnswer {
        let mut req = self
            .client
            .get(format!("http://{}{}", self.addr, path))
            .header("host", &self.host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Self::answer(req).await
    }

    /// Same client, another `Host` header.
    pub fn with_host(&self, host: &str) -> Self {
        HttpClient {
            host: host.to_owned(),
            ..self.clone()
        }
    }

    async fn answer(req: reqwest::RequestBuilder) -> HttpAnswer {
        let resp = req.send().await.expect("http request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}
