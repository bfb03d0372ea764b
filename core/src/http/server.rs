//! Assembling the actix server: core's routes, the enabled plugins' routes, workers,
//! graceful shutdown. `relay.rs` calls [`start`] and keeps the [`ServerHandle`].

use super::AppState;
use crate::config::Settings;
use crate::plugin::Route;
use actix_web::{web, App, HttpServer};
use anyhow::Context;
use std::net::SocketAddr;

/// A running HTTP server.
pub struct ServerHandle {
    pub addr: SocketAddr,
    pub(super) handle: actix_web::dev::ServerHandle,
    pub(super) join: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl ServerHandle {
    /// Stop accepting, finish in-flight requests (up to the shutdown timeout).
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }

    /// Wait until the server has stopped (a signal or [`ServerHandle::stop`]).
    pub async fn stopped(self) -> anyhow::Result<()> {
        self.join.await.context("server task")?.context("server")
    }
}

/// Bind `server.bind` and start serving.
pub(crate) fn start(
    state: AppState,
    routes: Vec<Route>,
    settings: &Settings,
    handle_signals: bool,
) -> anyhow::Result<ServerHandle> {
    // One live fan-out and one outbound byte budget for all workers' connections.
    let ws = web::Data::new(super::ws::WsShared::start(&state.services));
    let state = web::Data::new(state);
    let mut server = HttpServer::new(move || {
        let routes = routes.clone();
        App::new()
            .wrap(super::cors::layer())
            .app_data(state.clone())
            .app_data(ws.clone())
            .configure(super::configure)
            .configure(move |cfg| super::plugin_routes::mount(cfg, &routes))
    })
    // A handle on every connection, so a client that stops reading can be let go of
    // (`socket.rs`); and no Nagle delay: an answer's last partial segment must not wait
    // for the client's delayed ACK of the one before.
    .on_connect(super::socket::on_connect)
    .tcp_nodelay(true)
    .shutdown_timeout(settings.server.shutdown_timeout_secs);
    if settings.server.workers > 0 {
        server = server.workers(settings.server.workers);
    }
    if !handle_signals {
        server = server.disable_signals();
    }
    let server = server
        .bind(settings.server.bind.as_str())
        .with_context(|| format!("binding {}", settings.server.bind))?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .context("server bound no address")?;
    let server = server.run();
    let handle = server.handle();
    Ok(ServerHandle {
        addr,
        handle,
        join: tokio::spawn(server),
    })
}
