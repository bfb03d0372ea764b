//! Who is asking: the request context every hook and service receives, and the facts a
//! write carries into its storage transaction.

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

/// Facts available inside the storage transaction (core's channel rules and plugins'
/// in-transaction hooks read them).
#[derive(Debug, Clone)]
pub struct WriteCtx {
    pub community_id: i64,
    /// The authenticated pubkey of the writer, if any.
    pub pubkey: Option<String>,
    /// Relay time of the write, microseconds.
    pub now_micros: i64,
    /// An owner's import (`buzz-relay import`): the relay's records that follow another
    /// event (the 9000/9001 after a join or leave) come from the file, so they are not
    /// derived again — the same change never gets two records.
    pub imported: bool,
}
