//! The running plugin: its routes, NIP-11 `media`, how every answer carries CORS and a
//! refusal its `X-Reason`, and what `/metrics` counts.

use crate::error::MediaError;
use crate::fs_store::FsStore;
use crate::s3_store::S3Store;
use crate::{
    fetch, manage, preflight, upload, Config, StoreKind, BLOB_PATH, LIST_PATH, NAME, UPLOAD_PATH,
};
use anyhow::Context;
use buzz_core::error::Reason;
use buzz_core::plugin::{
    Plugin, PluginRequest, PluginResponse, PurgedEvent, Route, RouteAuth, RouteBody, RouteHandler,
    RouteMethod, Services, Tx,
};
use buzz_core::store::Conn;
use buzz_core::stored::StoredEvent;
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio::sync::Semaphore;

pub struct Media {
    pub(crate) config: Config,
    pub(crate) services: Services,
    /// Upload temporaries, and the blobs themselves with `store = "fs"`.
    pub(crate) fs: Arc<FsStore>,
    /// The bucket with `store = "s3"`.
    pub(crate) s3: Option<Arc<S3Store>>,
    /// Uploads being received by this process (`max_concurrent_uploads`).
    pub(crate) uploads: Arc<Semaphore>,
}

impl Media {
    pub fn new(config: Config, services: &Services) -> anyhow::Result<Media> {
        let dir = config.fs_dir(&services.settings.relay.data_dir);
        let fs = FsStore::open(dir.clone())
            .with_context(|| format!("opening the media directory {}", dir.display()))?;
        let s3 = match config.store {
            StoreKind::Fs => None,
            StoreKind::S3 => Some(Arc::new(
                S3Store::new(&config).context("configuring the media s3 store")?,
            )),
        };
        Ok(Media {
            s3,
            uploads: Arc::new(Semaphore::new(config.max_concurrent_uploads)),
            fs: Arc::new(fs),
            config,
            services: services.clone(),
        })
    }

    /// Count `n` under `name` in `buzz_plugin_counts_total{plugin="media"}`.
    pub(crate) fn count(&self, name: &'static str, n: u64) {
        self.services.metrics.plugin_count(NAME, name, n);
    }
}

/// Which endpoint a route serves.
#[derive(Clone, Copy)]
enum Endpoint {
    Upload,
    Preflight,
    List,
    Fetch,
    Delete,
}

struct Handler {
    media: Arc<Media>,
    endpoint: Endpoint,
}

#[async_trait::async_trait]
impl RouteHandler for Handler {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        let media = &self.media;
        let answer = match self.endpoint {
            Endpoint::Upload => upload::upload(media, request).await,
            Endpoint::Preflight => preflight::preflight(media, &request).await,
            Endpoint::List => manage::list(media, &request).await,
            Endpoint::Fetch => fetch::fetch(media, &request).await,
            Endpoint::Delete => manage::delete(media, &request).await,
        };
        Ok(match answer {
            Ok(response) => cors(response),
            Err(err) => {
                media.count(err.metric(), 1);
                refusal(&err)
            }
        })
    }

    /// Refusals core found first (unknown host, a body that went quiet) in media's shape.
    fn error_response(&self, reason: &Reason) -> PluginResponse {
        let text = reason.wire_text();
        cors(PluginResponse::json(
            reason.http_status(),
            &json!({ "error": text }),
        ))
        .with_header("x-reason", header_text(&text))
    }
}

/// BUD-01: every answer allows any origin (core's CORS layer answers preflights and adds
/// this when a browser sends `Origin`; a Blossom client may look for it regardless).
fn cors(response: PluginResponse) -> PluginResponse {
    response.with_header("access-control-allow-origin", "*")
}

/// A refusal: its status, `X-Reason`, and the same text in a JSON body.
fn refusal(err: &MediaError) -> PluginResponse {
    if let MediaError::Internal(cause) = err {
        tracing::warn!(error = format!("{cause:#}"), "media request failed");
    }
    let text = err.to_string();
    let mut response = cors(PluginResponse::json(
        err.status(),
        &json!({ "error": text }),
    ))
    .with_header("x-reason", header_text(&text));
    if let MediaError::RangeNotSatisfiable(len) = err {
        response = response.with_header("content-range", format!("bytes */{len}"));
    }
    response
}

/// `text` as a header value: visible ASCII and spaces, at most 512 bytes.
fn header_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(512)
        .collect()
}

#[async_trait::async_trait]
impl Plugin for Media {
    fn name(&self) -> &'static str {
        NAME
    }

    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        let c = &self.config;
        doc.insert(
            NAME.into(),
            json!({
                "blossom": ["BUD-01", "BUD-02", "BUD-06", "BUD-11", "BUD-12"],
                "max_blob_bytes": c.max_blob_bytes,
                "quota_bytes_per_pubkey": c.quota_bytes_per_pubkey,
                "quota_bytes_per_community": c.quota_bytes_per_community,
                "allowed_types": c.allowed_types,
                "auth": ["blossom-24242", "nip-98"],
            }),
        );
    }

    /// The blobs this event names, for garbage collection (`refs.rs`).
    fn on_event_stored(&self, tx: &mut Tx<'_, '_>, event: &StoredEvent) -> Result<(), Reason> {
        crate::refs::record(tx.conn, event.community_id, tx.seq, &event.event)
    }

    fn on_events_purged(&self, conn: &mut Conn<'_>, purged: &[PurgedEvent]) -> Result<(), Reason> {
        crate::refs::forget(conn, purged)
    }

    /// The garbage collection sweep, every `gc_interval_secs`.
    fn background(self: Arc<Self>) -> Vec<BoxFuture<'static, ()>> {
        let every = std::time::Duration::from_secs(self.config.gc_interval_secs);
        vec![Box::pin(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let now = self.services.clock.now_secs();
                let grace = self.config.orphan_grace_secs;
                let s3 = self.s3.as_deref();
                match crate::gc::sweep(&self.services.store, &self.fs, s3, now, grace).await {
                    Ok(swept) => {
                        self.count("gc_blobs", swept.blobs);
                        self.count("gc_bytes", swept.bytes);
                        if swept.blobs > 0 || swept.temp_files > 0 {
                            tracing::info!(?swept, "media garbage collection");
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "media garbage collection failed"),
                }
            }
        })]
    }

    fn routes(self: Arc<Self>) -> Vec<Route> {
        let route = |method, path: &str, body, endpoint| Route {
            method,
            path: path.into(),
            auth: RouteAuth::Public,
            body,
            handler: Arc::new(Handler {
                media: self.clone(),
                endpoint,
            }),
        };
        vec![
            route(
                RouteMethod::Put,
                UPLOAD_PATH,
                RouteBody::Streamed,
                Endpoint::Upload,
            ),
            route(
                RouteMethod::Head,
                UPLOAD_PATH,
                RouteBody::Whole,
                Endpoint::Preflight,
            ),
            route(
                RouteMethod::Get,
                LIST_PATH,
                RouteBody::Whole,
                Endpoint::List,
            ),
            route(
                RouteMethod::Get,
                BLOB_PATH,
                RouteBody::Whole,
                Endpoint::Fetch,
            ),
            route(
                RouteMethod::Head,
                BLOB_PATH,
                RouteBody::Whole,
                Endpoint::Fetch,
            ),
            route(
                RouteMethod::Delete,
                BLOB_PATH,
                RouteBody::Whole,
                Endpoint::Delete,
            ),
        ]
    }
}
