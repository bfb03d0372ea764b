//! The HTTP surface a plugin gets: routes that receive the community, the caller
//! (NIP-98-verified when the route asks for it) and the raw body, and answer with plain
//! data. Core's `http` module does the actix work; plugins never see it.

use crate::ctx::ConnCtx;
use crate::error::Reason;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteMethod {
    Get,
    Post,
    Put,
    Delete,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteAuth {
    /// Anyone; the `Host` header still picks the community (unknown host: 404).
    Public,
    /// A valid NIP-98 `Authorization` for this exact URL, method and body, not replayed
    /// (the replay guard is the bridge's, shared across processes). `ctx.pubkey` is set.
    Nip98,
}

/// A route as its plugin's manifest declares it, known without running the plugin (the
/// console lists these). The relay refuses to start when a plugin mounts anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredRoute {
    pub method: RouteMethod,
    pub path: &'static str,
    pub auth: RouteAuth,
}

impl DeclaredRoute {
    pub const fn new(method: RouteMethod, path: &'static str, auth: RouteAuth) -> DeclaredRoute {
        DeclaredRoute { method, path, auth }
    }
}

impl std::fmt::Display for DeclaredRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if self.auth == RouteAuth::Nip98 {
            write!(f, " (NIP-98)")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for RouteMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RouteMethod::Get => "GET",
            RouteMethod::Post => "POST",
            RouteMethod::Put => "PUT",
            RouteMethod::Delete => "DELETE",
        })
    }
}

/// One plugin route.
#[derive(Clone)]
pub struct Route {
    pub method: RouteMethod,
    /// Path as mounted, e.g. `/myplugin/stats`.
    pub path: String,
    pub auth: RouteAuth,
    pub handler: Arc<dyn RouteHandler>,
}

/// What a route handler receives.
#[derive(Debug, Clone)]
pub struct PluginRequest {
    /// Community, caller (for [`RouteAuth::Nip98`]), peer address, host.
    pub ctx: ConnCtx,
    pub path: String,
    /// The raw query string, without `?` (empty when absent).
    pub query: String,
    /// Request headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, at most `limits.max_message_bytes` (larger is refused with 413 first).
    pub body: Vec<u8>,
}

impl Route {
    /// Whether this mounted route is the declared one.
    pub fn is(&self, declared: &DeclaredRoute) -> bool {
        self.method == declared.method && self.path == declared.path && self.auth == declared.auth
    }
}

impl PluginRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a route handler answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginResponse {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl PluginResponse {
    pub fn json(status: u16, value: &Value) -> PluginResponse {
        PluginResponse {
            status,
            content_type: "application/json".to_owned(),
            headers: Vec::new(),
            body: value.to_string().into_bytes(),
        }
    }

    /// Core's error answer: the status [`Reason`] decides and `{"error": "<wire text>"}`,
    /// the body every core HTTP error has.
    pub fn error(reason: &Reason) -> PluginResponse {
        PluginResponse::json(
            reason.http_status(),
            &json!({ "error": reason.wire_text() }),
        )
    }

    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Serves one route.
#[async_trait::async_trait]
pub trait RouteHandler: Send + Sync + 'static {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason>;

    /// How this route shows a failure — its own, or one core found before calling
    /// [`RouteHandler::handle`] (unknown host, bad NIP-98, body too large). The status
    /// always comes from [`Reason::http_status`]; a plugin whose spec prescribes another
    /// body shape renders it here. Default: [`PluginResponse::error`].
    fn error_response(&self, reason: &Reason) -> PluginResponse {
        PluginResponse::error(reason)
    }
}
