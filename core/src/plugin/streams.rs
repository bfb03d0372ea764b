//! Bodies that stream between a client and a plugin route ([`RouteBody::Streamed`]
//! requests, [`PluginResponse::streamed`] answers), as plain types: the actix side of
//! both is `http/plugin_routes.rs`.
//!
//! [`RouteBody::Streamed`]: super::RouteBody::Streamed
//! [`PluginResponse::streamed`]: super::PluginResponse::streamed

use crate::error::Reason;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

/// A request body as it arrives. Core reads the connection only as fast as the handler
/// takes chunks (a few are queued at most), so a slow disk slows the client instead of
/// filling memory.
pub struct BodyStream {
    chunks: mpsc::Receiver<Result<Bytes, Reason>>,
    declared: Option<u64>,
}

impl BodyStream {
    /// A stream fed through `chunks`; `declared` is the request's `Content-Length`.
    pub(crate) fn new(
        chunks: mpsc::Receiver<Result<Bytes, Reason>>,
        declared: Option<u64>,
    ) -> Self {
        BodyStream { chunks, declared }
    }

    /// The next chunk; `None` once the body is complete. An `Err` (the client broke off,
    /// or sent nothing for `limits.body_timeout_secs`: [`Reason::TooSlow`]) ends it.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, Reason>> {
        self.chunks.recv().await
    }

    /// The length the client declared (`Content-Length`), if it did. Not yet checked
    /// against what arrives: a handler that relies on it counts as it reads.
    pub fn declared_len(&self) -> Option<u64> {
        self.declared
    }
}

impl std::fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyStream")
            .field("declared", &self.declared)
            .finish_non_exhaustive()
    }
}

/// A response body of a known length, sent as it is produced.
pub struct ResponseStream {
    len: u64,
    stream: BoxStream<'static, Result<Bytes, std::io::Error>>,
}

impl ResponseStream {
    /// `stream` must yield exactly `len` bytes: the client was told `len` in
    /// `Content-Length`, so a short stream is a broken response.
    pub fn new(len: u64, stream: BoxStream<'static, Result<Bytes, std::io::Error>>) -> Self {
        ResponseStream { len, stream }
    }

    /// No bytes, announced as `len`: the body of a `HEAD` answer.
    pub fn empty(len: u64) -> Self {
        ResponseStream::new(len, Box::pin(futures_util::stream::empty()))
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn into_parts(self) -> (u64, BoxStream<'static, Result<Bytes, std::io::Error>>) {
        (self.len, self.stream)
    }
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
