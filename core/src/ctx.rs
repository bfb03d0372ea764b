//! Who is asking: the request context every hook and service receives.

use crate::community::Community;
use std::net::IpAddr;
use std::sync::Arc;

/// Which wire surface a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    WebSocket,
    Http,
}

/// The caller of one request (HTTP) or one connection (WebSocket).
#[derive(Debug, Clone)]
pub struct ConnCtx {
    /// The community the `Host` header selected.
    pub community: Arc<Community>,
    /// NIP-42 (WebSocket) or NIP-98 (HTTP) authenticated pubkey.
    pub pubkey: Option<String>,
    /// Peer address, when known.
    pub ip: Option<IpAddr>,
    pub transport: Transport,
    /// The `Host` header exactly as the client sent it.
    pub host_header: String,
    /// Normalized host plus non-default port (NIP-98 URLs, NIP-CW bindings).
    pub authority: String,
}

impl ConnCtx {
    pub fn community_id(&self) -> i64 {
        self.community.id
    }

    pub fn is_authenticated(&self) -> bool {
        self.pubkey.is_some()
    }
}
