//! The relay's own handle on each accepted TCP connection, so it can let go of a client
//! whatever state the HTTP and WebSocket layers are in.
//!
//! actix owns the connection and only drops it when a write fails or its peer closes. A
//! client that stops reading keeps the socket's send buffer full, so actix's write never
//! completes, never fails, and the connection — its buffers in the process and the
//! megabytes in the kernel — stays forever; a close frame queued behind it never leaves.
//! `on_connect` keeps a duplicate of the socket's descriptor in the connection's
//! extensions; [`SocketHandle::abort`] sets `SO_LINGER` to zero and shuts the socket
//! down, which wakes actix's pending write with an error: actix drops the connection,
//! and the last close of the socket resets it, discarding the kernel's queue.
//!
//! The duplicate lives exactly as long as actix's connection (the extensions are
//! dropped with it), and handles hold it weakly, so a handle never keeps a socket open
//! nor reaches a descriptor number the kernel has since given to someone else.

use actix_web::dev::Extensions;
use actix_web::rt::net::TcpStream;
use actix_web::HttpRequest;
use socket2::SockRef;
use std::any::Any;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// A duplicate of one connection's socket, held in its extensions.
pub(crate) struct ConnSocket {
    fd: OwnedFd,
    /// Dropped with the connection: its receivers learn the connection is gone.
    alive: watch::Sender<()>,
}

/// `HttpServer::on_connect`: keep a handle on every plain TCP connection.
pub(crate) fn on_connect(conn: &dyn Any, ext: &mut Extensions) {
    let Some(tcp) = conn.downcast_ref::<TcpStream>() else {
        return;
    };
    match tcp.as_fd().try_clone_to_owned() {
        Ok(fd) => {
            let (alive, _) = watch::channel(());
            ext.insert(Arc::new(ConnSocket { fd, alive }));
        }
        // Out of descriptors: the connection still works, it just cannot be aborted
        // early (actix's own timeouts remain).
        Err(err) => tracing::warn!(error = %err, "cannot keep a handle on a new connection"),
    }
}

/// What a request or WebSocket task keeps to end its connection.
#[derive(Clone)]
pub(crate) struct SocketHandle {
    socket: Weak<ConnSocket>,
    alive: watch::Receiver<()>,
}

impl SocketHandle {
    /// The handle of the connection `req` came on (`None` for a stream that is not plain
    /// TCP, or when the descriptor could not be duplicated).
    pub(crate) fn of(req: &HttpRequest) -> Option<SocketHandle> {
        let socket = req.conn_data::<Arc<ConnSocket>>()?;
        Some(SocketHandle {
            socket: Arc::downgrade(socket),
            alive: socket.alive.subscribe(),
        })
    }

    /// From now on, closing the connection resets it: whatever is still queued for the
    /// peer is discarded instead of lingering in the kernel (an orphaned socket keeps
    /// its send queue for minutes when the peer does not read). For peers judged too
    /// slow, set before the close frame is queued.
    pub(crate) fn reset_on_close(&self) {
        let Some(socket) = self.socket.upgrade() else {
            return;
        };
        if let Err(err) = SockRef::from(&socket.fd).set_linger(Some(Duration::ZERO)) {
            tracing::debug!(error = %err, "SO_LINGER on a connection being let go");
        }
    }

    /// End the connection now: reset, not a graceful FIN, because the peer is not
    /// reading and whatever is queued for it is to be discarded.
    pub(crate) fn abort(&self) {
        self.reset_on_close();
        let Some(socket) = self.socket.upgrade() else {
            return;
        };
        if let Err(err) = SockRef::from(&socket.fd).shutdown(std::net::Shutdown::Both) {
            // Already shut down or reset by the peer: nothing left to end.
            tracing::debug!(error = %err, "shutting down an aborted connection");
        }
    }

    /// Resolves once actix has dropped the connection.
    pub(crate) async fn gone(&self) {
        let mut alive = self.alive.clone();
        while alive.changed().await.is_ok() {}
    }

    /// Wait up to `grace` for the connection to end by itself, then abort it.
    pub(crate) async fn end_within(&self, grace: Duration) {
        if tokio::time::timeout(grace, self.gone()).await.is_err() {
            self.abort();
        }
    }
}
