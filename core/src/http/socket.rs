//! The relay's own handle on each accepted TCP connection, so it can let go of a client
//! whatever state the HTTP and WebSocket layers are in.
//!
//! actix owns the connection and only drops it when a write fails or its peer closes. A
//! client that stops reading keeps the socket's send buffer full, so actix's write never
//! completes, never fails, and the connection — its buffers in the process and the
//! megabytes in the kernel — stays forever; a close frame queued behind it never leaves.
//! `on_connect` notes the socket's descriptor number and identity (device and inode) in
//! the connection's extensions; [`SocketHandle::abort`] sets `SO_LINGER` to zero and
//! shuts the socket down, which wakes actix's pending write with an error: actix drops
//! the connection, and the close resets it, discarding the kernel's queue.
//!
//! Why a number and not a duplicate descriptor: a duplicate doubled the descriptors of
//! every connection, so under an open-file limit of 20,000 the relay could not hold
//! 10,000 clients (issue 45). When the relay acts on a connection it takes a descriptor
//! of the socket for that moment only, through its own pidfd (`pidfd_getfd`), and acts
//! only if that descriptor is the same socket (`fstat`'s device and inode): the number
//! may have been closed by actix and given to another connection meanwhile, and a
//! descriptor held while acting keeps whatever it names from changing under it. The
//! identity is device and inode alone because a socket keeps them whatever state it is
//! in, where its peer address does not survive a reset (a handle that could not
//! recognise a reset socket would never abort it). Where `pidfd_getfd` is not allowed
//! (kernels before 5.6, some sandboxes) the relay falls back to a duplicate per
//! connection, as before.

use actix_web::dev::Extensions;
use actix_web::rt::net::TcpStream;
use actix_web::HttpRequest;
use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
use socket2::SockRef;
use std::any::Any;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// One connection's socket, noted in its extensions.
pub(crate) struct ConnSocket {
    reach: Reach,
    /// Told when this is dropped, with the connection: handles waiting in
    /// [`SocketHandle::gone`] learn the connection is gone. A `Notify` (tens of bytes),
    /// not a `watch` channel (about 300: its shared state holds eight notifiers), since
    /// every open connection has one (docs/benchmarks.md "Idle connections").
    dropped: Arc<Notify>,
}

impl Drop for ConnSocket {
    fn drop(&mut self) {
        self.dropped.notify_waiters();
    }
}

/// How the relay reaches a connection's socket again.
enum Reach {
    /// Its number and identity, reached through this process's pidfd.
    Number { fd: RawFd, identity: Identity },
    /// A duplicate descriptor, where `pidfd_getfd` is not allowed.
    Duplicate(OwnedFd),
}

/// What tells one socket from any file that later gets its descriptor number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
}

impl Identity {
    fn of(fd: impl AsFd) -> Option<Identity> {
        let stat = rustix::fs::fstat(fd).ok()?;
        Some(Identity {
            dev: stat.st_dev,
            ino: stat.st_ino,
        })
    }
}

/// This process's pidfd, when `pidfd_getfd` works with it here (tried once, on the
/// pidfd's own number).
fn own_pidfd() -> Option<&'static OwnedFd> {
    static PIDFD: OnceLock<Option<OwnedFd>> = OnceLock::new();
    PIDFD
        .get_or_init(|| {
            let pidfd = pidfd_open(getpid(), PidfdFlags::empty()).ok()?;
            pidfd_getfd(&pidfd, pidfd.as_raw_fd(), PidfdGetfdFlags::empty()).ok()?;
            Some(pidfd)
        })
        .as_ref()
}

impl ConnSocket {
    /// A descriptor of this connection's socket, held while the relay acts on it; `None`
    /// once the socket is closed.
    fn socket(&self) -> Option<OwnedFd> {
        match &self.reach {
            Reach::Duplicate(fd) => fd.try_clone().ok(),
            Reach::Number { fd, identity } => {
                let held = pidfd_getfd(own_pidfd()?, *fd, PidfdGetfdFlags::empty()).ok()?;
                (Identity::of(&held) == Some(*identity)).then_some(held)
            }
        }
    }
}

/// `HttpServer::on_connect`: keep a handle on every plain TCP connection.
pub(crate) fn on_connect(conn: &dyn Any, ext: &mut Extensions) {
    let Some(tcp) = conn.downcast_ref::<TcpStream>() else {
        return;
    };
    let reach = match (own_pidfd(), Identity::of(tcp)) {
        (Some(_), Some(identity)) => Reach::Number {
            fd: tcp.as_raw_fd(),
            identity,
        },
        _ => match tcp.as_fd().try_clone_to_owned() {
            Ok(fd) => Reach::Duplicate(fd),
            // Out of descriptors: the connection still works, it just cannot be aborted
            // early (actix's own timeouts remain).
            Err(err) => {
                tracing::warn!(error = %err, "cannot keep a handle on a new connection");
                return;
            }
        },
    };
    let dropped = Arc::new(Notify::new());
    ext.insert(Arc::new(ConnSocket { reach, dropped }));
}

/// What a request or WebSocket task keeps to end its connection.
#[derive(Clone)]
pub(crate) struct SocketHandle {
    socket: Weak<ConnSocket>,
    dropped: Arc<Notify>,
}

impl SocketHandle {
    /// The handle of the connection `req` came on (`None` for a stream that is not plain
    /// TCP, or when no handle could be kept).
    pub(crate) fn of(req: &HttpRequest) -> Option<SocketHandle> {
        let socket = req.conn_data::<Arc<ConnSocket>>()?;
        Some(SocketHandle {
            socket: Arc::downgrade(socket),
            dropped: socket.dropped.clone(),
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
        let Some(fd) = socket.socket() else {
            return;
        };
        if let Err(err) = SockRef::from(&fd).set_linger(Some(Duration::ZERO)) {
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
        let Some(fd) = socket.socket() else {
            return;
        };
        if let Err(err) = SockRef::from(&fd).shutdown(std::net::Shutdown::Both) {
            // Already shut down or reset by the peer: nothing left to end.
            tracing::debug!(error = %err, "shutting down an aborted connection");
        }
    }

    /// Resolves once actix has dropped the connection.
    pub(crate) async fn gone(&self) {
        loop {
            // Listening before looking: the socket's last reference goes before its drop
            // notifies, so a drop after the look still wakes this listener.
            let mut dropped = std::pin::pin!(self.dropped.notified());
            dropped.as_mut().enable();
            if self.socket.strong_count() == 0 {
                return;
            }
            dropped.await;
        }
    }

    /// Wait up to `grace` for the connection to end by itself, then abort it.
    pub(crate) async fn end_within(&self, grace: Duration) {
        if tokio::time::timeout(grace, self.gone()).await.is_err() {
            self.abort();
        }
    }
}
