//! The metrics listener: `GET /metrics` (Prometheus/OpenMetrics text) on `[metrics] bind`,
//! a server of its own so the figures stay off the public port. It serves nothing else
//! and needs no community `Host`.

use super::ServerHandle;
use crate::metrics::{Metrics, CONTENT_TYPE};
use actix_web::{web, App, HttpResponse, HttpServer};
use anyhow::Context;
use std::sync::Arc;

/// Bind `bind` and serve this relay's figures. One worker: a scrape is a few kilobytes.
pub(crate) fn start_metrics(metrics: Arc<Metrics>, bind: &str) -> anyhow::Result<ServerHandle> {
    let metrics = web::Data::from(metrics);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(metrics.clone())
            .route("/metrics", web::get().to(scrape))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(1)
    .bind(bind)
    .with_context(|| format!("binding metrics.bind {bind}"))?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .context("metrics server bound no address")?;
    let server = server.run();
    Ok(ServerHandle {
        addr,
        handle: server.handle(),
        join: tokio::spawn(server),
    })
}

async fn scrape(metrics: web::Data<Metrics>) -> HttpResponse {
    match metrics.encode() {
        Ok(text) => HttpResponse::Ok().content_type(CONTENT_TYPE).body(text),
        Err(err) => {
            tracing::error!(error = %err, "encoding metrics failed");
            HttpResponse::InternalServerError().body("metrics unavailable\n")
        }
    }
}
