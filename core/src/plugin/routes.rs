//! The HTTP surface a plugin gets: routes that receive the community, the caller
//! (NIP-98-verified when the route asks for it) and the body, and answer with plain
//! data. Core's `http` module does the actix work; plugins never see it.
//!
//! A route's path is an actix path pattern (`/myplugin/stats`, `/list/{pubkey}`,
//! `/{blob}`). Core's own routes are mounted first and always win; among plugins'
//! routes, those whose first segment is a pattern (root-level catch-alls such as
//! `/{blob}`) are mounted after every other, so they never take a path another route
//! names. A body is read whole under `limits.max_message_bytes` unless the route is
//! declared [`RouteBody::Streamed`]: then the handler reads it as it arrives
//! ([`BodyStream`]) and may answer with a body of its own that streams
//! ([`PluginResponse::streamed`]).

use crate::ctx::ConnCtx;
use crate::error::Reason;
use serde_json::{json, Value};
use std::sync::Arc;

pub use super::streams::{BodyStream, ResponseStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteMethod {
    Get,
    Head,
    Post,
    Put,
    Delete,
    /// Plain `OPTIONS`; CORS preflights are answered by core before any route.
    Options,
}

/// How a route receives its request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteBody {
    /// Read whole before the handler runs, at most `limits.max_message_bytes`, within
    /// `limits.body_timeout_secs` and the process's budget for unfinished bodies.
    Whole,
    /// Handed to the handler as it arrives ([`PluginRequest::stream`]); nothing is
    /// buffered beyond a few chunks, so the handler owns every bound on it (size,
    /// concurrency). Core still cuts a body that sends nothing for
    /// `limits.body_timeout_secs`. Never with [`RouteAuth::Nip98`] on `POST` (its
    /// `payload` hash needs the whole body before the handler runs).
    Streamed,
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
    pub body: RouteBody,
}

impl DeclaredRoute {
    /// A route whose body is read whole ([`RouteBody::Whole`]).
    pub const fn new(method: RouteMethod, path: &'static str, auth: RouteAuth) -> DeclaredRoute {
        DeclaredRoute {
            method,
            path,
            auth,
            body: RouteBody::Whole,
        }
    }

    /// The same route with its body streamed ([`RouteBody::Streamed`]).
    pub const fn streamed(self) -> DeclaredRoute {
        DeclaredRoute {
            body: RouteBody::Streamed,
            ..self
        }
    }
}

impl std::fmt::Display for DeclaredRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if self.auth == RouteAuth::Nip98 {
            write!(f, " (NIP-98)")?;
        }
        if self.body == RouteBody::Streamed {
            write!(f, " (streamed)")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for RouteMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RouteMethod::Get => "GET",
            RouteMethod::Head => "HEAD",
            RouteMethod::Post => "POST",
            RouteMethod::Put => "PUT",
            RouteMethod::Delete => "DELETE",
            RouteMethod::Options => "OPTIONS",
        })
    }
}

/// One plugin route.
#[derive(Clone)]
pub struct Route {
    pub method: RouteMethod,
    /// Path pattern as mounted, e.g. `/myplugin/stats` or `/list/{pubkey}`.
    pub path: String,
    pub auth: RouteAuth,
    pub body: RouteBody,
    pub handler: Arc<dyn RouteHandler>,
}

/// What a route handler receives.
#[derive(Debug)]
pub struct PluginRequest {
    /// Community, caller (for [`RouteAuth::Nip98`]), peer address, host.
    pub ctx: ConnCtx,
    /// The method as sent (`GET`, `HEAD`, …).
    pub method: String,
    /// The path as sent (not the pattern).
    pub path: String,
    /// What a NIP-98 `u` tag must name for this request:
    /// `<public_scheme>://<Host as sent><path>[?query]`. A route that authenticates
    /// callers itself passes it to `crate::auth::nip98::verify`.
    pub url: String,
    /// The raw query string, without `?` (empty when absent).
    pub query: String,
    /// Request headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body of a [`RouteBody::Whole`] route, at most `limits.max_message_bytes`
    /// (larger is refused with 413 first); empty for a streamed one.
    pub body: Vec<u8>,
    /// The body of a [`RouteBody::Streamed`] route, as it arrives; `None` otherwise.
    pub stream: Option<BodyStream>,
}

impl Route {
    /// Whether this mounted route is the declared one.
    pub fn is(&self, declared: &DeclaredRoute) -> bool {
        self.method == declared.method
            && self.path == declared.path
            && self.auth == declared.auth
            && self.body == declared.body
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
#[derive(Debug)]
pub struct PluginResponse {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    /// The body, when it is in memory (empty when [`PluginResponse::stream`] is set).
    pub body: Vec<u8>,
    /// A body sent as it is read, of a length known up front
    /// ([`PluginResponse::streamed`]).
    pub stream: Option<ResponseStream>,
}

impl PluginResponse {
    /// A body held in memory.
    pub fn bytes(status: u16, content_type: impl Into<String>, body: Vec<u8>) -> PluginResponse {
        PluginResponse {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body,
            stream: None,
        }
    }

    pub fn json(status: u16, value: &Value) -> PluginResponse {
        PluginResponse::bytes(status, "application/json", value.to_string().into_bytes())
    }

    /// A body of `stream.len()` bytes sent as the stream yields them (a file, say): the
    /// response's `Content-Length` is that length. For `HEAD`, pass
    /// [`ResponseStream::empty`] of the length a `GET` would send.
    pub fn streamed(
        status: u16,
        content_type: impl Into<String>,
        stream: ResponseStream,
    ) -> PluginResponse {
        PluginResponse {
            stream: Some(stream),
            ..PluginResponse::bytes(status, content_type, Vec::new())
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
