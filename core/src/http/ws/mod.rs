//! NIP-01 over WebSocket: one task per connection.
//!
//! The connection task reads client messages and live deliveries; the response body
//! drains a queue bounded in messages and bytes (`outbound.rs`) into the socket. A
//! client that does not read is closed: when a live event finds no room, when a REQ
//! answer waits longer than `outbound_stall_secs` for room, when queued output is not
//! taken by the socket for that long, or when a heartbeat ping goes that long unanswered
//! with nothing written. Closing queues the close frame, and if the connection is not
//! gone within a short grace (a client that does not read never takes the frame) the
//! relay aborts the TCP connection itself (`http/socket.rs`), freeing what was queued
//! for it in the process and in the kernel. A REQ's stored events are read a page at a
//! time within the byte bound, never whole.
//!
//! Live events come from the process's [`Fanout`], which hands a connection only the
//! events its subscriptions match; the filters of one connection's open subscriptions
//! are bounded in bytes (`limits.max_filter_bytes`). A subscription listens before its
//! stored answer is read and drops a live event its answer already sent (`answered.rs`).
//!
//! This file holds the connection and its read loop; per verb: `req.rs` (REQ, CLOSE),
//! `events.rs` (EVENT), `auth.rs` (AUTH and the read scope), `live.rs` (deliveries),
//! `verbs.rs` (COUNT and plugin verbs); `messages.rs` the relay's message text.

mod answered;
mod auth;
mod events;
mod live;
mod messages;
mod outbound;
mod refusals;
mod req;
mod salvage;
mod subs;
mod verbs;

use super::socket::SocketHandle;
use super::{AppState, RequestCtx};
use crate::ctx::{ConnCtx, Transport};
use crate::error::Reason;
use crate::live::{Fanout, LiveInbox};
use crate::metrics::ConnectionGuard;
use crate::plugin::Services;
use crate::store::ReadClient;
use crate::store::Scope;
use crate::stored::StoredEvent;
use actix_web::body::{BodyStream, BoxBody};
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, CloseCode, CloseReason};
use buzz_nostr::event::Event;
use buzz_nostr::kinds::changes_access;
use buzz_nostr::nip42;
use events::EventRunner;
use messages::ClientMessage;
use outbound::Outbound;
use refusals::NextRead;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use subs::Subs;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a closing connection may take to end by itself (its close frame reaching
/// the client, the client closing) before the relay aborts it.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// What all WebSocket connections of this process share: live fan-out.
pub(crate) struct WsShared {
    fanout: Arc<Fanout>,
}

impl WsShared {
    /// Start the fan-out dispatcher on the live bus (needs a tokio runtime).
    pub(crate) fn start(services: &Services) -> WsShared {
        // Access changes reach every subscribed connection, matched or not: each must
        // re-read what it may see before delivering anything else.
        let to_everyone: fn(&StoredEvent) -> bool = |e| changes_access(e.event.kind);
        // The access cache learns of a change (from any process) before a connection
        // re-checks on it; the cache's own bus listener is a separate task and may run
        // later, and a connection that re-read stale facts would deliver the next event
        // to a reader just removed.
        let access = services.access.clone();
        let before = Box::new(move |e: &StoredEvent| access.changed(e));
        WsShared {
            fanout: Fanout::start(services.bus.as_ref(), to_everyone, before),
        }
    }
}

/// Upgrade `GET /` to a WebSocket; an unknown host refuses the upgrade with 404.
pub(super) async fn upgrade(
    req: HttpRequest,
    body: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    let mut ctx = match RequestCtx::resolve(&req, &state) {
        Ok(ctx) => ctx.conn,
        Err(reason) => return super::error::error_response(&reason),
    };
    ctx.transport = Transport::WebSocket;
    let Some(shared) = req.app_data::<web::Data<WsShared>>().cloned() else {
        let reason = Reason::Internal(anyhow::anyhow!("websocket state is not mounted"));
        return super::error::error_response(&reason);
    };
    // actix-ws does the handshake and reads the client's frames; the relay writes the
    // response body itself (`outbound.rs`), so its session goes unused.
    let (response, _session, stream) = match actix_ws::handle(&req, body) {
        Ok(parts) => parts,
        Err(err) => return err.error_response(),
    };
    let limits = &state.services.settings.limits;
    let max = limits.max_message_bytes;
    let stream = stream
        .max_frame_size(max)
        .aggregate_continuations()
        .max_continuation_size(max);
    let mut outbound = None;
    let response = response.map_body(|_, incoming| {
        let (out, body) = Outbound::new(
            limits.max_outbound_queue,
            limits.max_outbound_bytes,
            state.outbound.clone(),
            Duration::from_secs(limits.outbound_stall_secs),
            limits.refusals_per_sec,
            incoming,
        );
        outbound = Some(out);
        BoxBody::new(BodyStream::new(body))
    });
    let Some(out) = outbound else {
        let reason = Reason::Internal(anyhow::anyhow!("websocket body was not built"));
        return super::error::error_response(&reason);
    };
    let socket = SocketHandle::of(&req);
    let state = state.into_inner();
    let open = state.services.metrics.connection_opened();
    let connection = Connection::new(state, &shared, ctx, out);
    // Its reads wait in a lane of their own (its pubkey's once it authenticates).
    actix_web::rt::spawn(ReadClient::anonymous().serve(connection.serve(stream, socket, open)));
    response
}

/// How a connection ended: why, and whether its close frame found room in the queue.
struct Ended {
    why: End,
    close_queued: bool,
}

impl Ended {
    /// The relay ends the connection because the client does not keep up.
    fn too_slow(&self) -> bool {
        matches!(self.why, End::QueueFull | End::FellBehind | End::Stalled)
    }
}

/// Why a connection ends.
enum End {
    ClientClosed,
    /// The client does not read what it is sent.
    QueueFull,
    /// The connection could not keep up with live events for its subscriptions.
    FellBehind,
    /// A heartbeat went unanswered and nothing was written for the stall limit.
    Stalled,
    Oversized,
    ProtocolError,
    /// The caller was banned (`access/standing.rs`); the `blocked:` text.
    Banned(String),
}

/// Numbers every connection of the process (what plugins serving message verbs key
/// their per-connection state by).
static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

struct Connection {
    state: Arc<AppState>,
    /// This connection's number in the process.
    id: u64,
    ctx: ConnCtx,
    challenge: String,
    relay_url: String,
    /// Open subscriptions: id, live key, the bytes their filters count.
    subs: Subs,
    /// JSON bytes of all open subscriptions' filters (`limits.max_filter_bytes`).
    filter_bytes: usize,
    /// This connection's live subscriptions in the process's fan-out; a connection
    /// without subscriptions receives nothing.
    live: LiveInbox,
    /// What this caller may read; decided at connect, after AUTH, and whenever an
    /// access-changing event or a policy reload passes by.
    scope: Option<Scope>,
    policy_generation: u64,
    out: Outbound,
    /// EVENT messages being processed concurrently (group commit needs several in flight).
    inflight: Arc<Semaphore>,
    events: EventRunner,
    /// When the unanswered heartbeat ping was queued, and how many messages the socket
    /// had taken by then (any taken since is progress).
    ping_since: Option<(Instant, u64)>,
    /// Since when queued output has waited without the socket taking any of it.
    stuck_since: Option<(Instant, u64)>,
}

impl Connection {
    fn new(state: Arc<AppState>, shared: &WsShared, ctx: ConnCtx, out: Outbound) -> Self {
        let limits = &state.services.settings.limits;
        let inflight = Arc::new(Semaphore::new(limits.max_inflight_events.max(1)));
        let relay_url = nip42::relay_url(
            &state.services.settings.server.public_scheme,
            &ctx.host_header,
        );
        let policy_generation = state.services.access.policy_generation();
        Connection {
            state,
            id: NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ctx,
            challenge: nip42::new_challenge(),
            relay_url,
            subs: Subs::default(),
            filter_bytes: 0,
            live: shared.fanout.connect(),
            scope: None,
            policy_generation,
            out,
            inflight,
            events: EventRunner::default(),
            ping_since: None,
            stuck_since: None,
        }
    }

    fn stall(&self) -> Duration {
        Duration::from_secs(self.state.services.settings.limits.outbound_stall_secs)
    }

    /// The connection's task: serve it until it ends, let go of everything it held, then
    /// make sure its socket goes too.
    ///
    /// Not an `async fn`: an async fn keeps its arguments twice, as passed and as moved
    /// into its body, and this future is what every idle connection's task holds for as
    /// long as it is open. Here the connection and its message stream are used where the
    /// block captured them, and [`Connection::run`] borrows them (measured with
    /// `examples/stock-client/idle-stages.mjs`: the task was 2.7 KB with an async fn, 1.4
    /// KB without).
    #[allow(clippy::manual_async_fn)] // the async fn is what this avoids (above)
    fn serve(
        mut self,
        mut stream: actix_ws::AggregatedMessageStream,
        socket: Option<SocketHandle>,
        open: ConnectionGuard,
    ) -> impl std::future::Future<Output = ()> + 'static {
        async move {
            let end = self.run(&mut stream).await;
            // The close frame is queued (when there was room); everything the connection
            // held goes now. A client that does not read never takes the frame: end the
            // TCP connection, so nothing queued for it stays in memory or in the kernel.
            drop(self);
            drop(stream);
            if let Some(socket) = socket {
                if end.too_slow() {
                    socket.reset_on_close();
                }
                let grace = if end.close_queued {
                    CLOSE_GRACE
                } else {
                    Duration::ZERO
                };
                socket.end_within(grace).await;
            }
            drop(open);
        }
    }

    /// Serve the connection until it ends; the close frame is queued when it returns.
    ///
    /// A future is as large as the largest state any of its awaits can be in: serving one
    /// message (a REQ's query and reads, an AUTH's access checks) is 2.7 KB of state in a
    /// release build, which every idle task carried inline. Those awaits are boxed, so
    /// their state exists only while one runs.
    async fn run(&mut self, stream: &mut actix_ws::AggregatedMessageStream) -> Ended {
        self.out.send(messages::auth_challenge(&self.challenge));
        Box::pin(self.refresh_scope()).await;
        let too_slow = self.out.too_slow.clone();
        let inflight = self.inflight.clone();
        // Heartbeat: a client that reads answers pings; one that does not, and whose
        // writes made no progress either, is closed after the stall limit.
        let mut heartbeat = tokio::time::interval((self.stall() / 2).max(Duration::from_secs(1)));
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The next message is read only while an in-flight slot is held, so a busy
        // publisher is slowed at the socket while live events keep flowing.
        let mut slot: Option<OwnedSemaphorePermit> = None;
        // Past its refusal budget the connection reads its next message only once this
        // sleep is over (`refusals.rs`); live events and the heartbeat go on meanwhile.
        // Boxed, and only while it lasts: a sleep inline in the loop's state took 112
        // bytes of every idle connection's task.
        let mut pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        let end = loop {
            if slot.is_some() && pause.is_none() {
                pause = self
                    .read_after()
                    .map(|at| Box::pin(tokio::time::sleep_until(at.into())));
            }
            tokio::select! {
                // A client found too slow is dropped before anything else it sent is
                // served (each REQ it queued would wait the stall limit again).
                biased;
                _ = too_slow.notified() => break End::QueueFull,
                acquired = inflight.clone().acquire_owned(), if slot.is_none() => {
                    slot = acquired.ok();
                    if slot.is_none() {
                        break End::ClientClosed;
                    }
                }
                () = async {
                    if let Some(pause) = pause.as_mut() {
                        pause.await;
                    }
                }, if pause.is_some() => pause = None,
                msg = stream.recv(), if slot.is_some() && pause.is_none() => match msg {
                    None => break End::ClientClosed,
                    Some(Ok(AggregatedMessage::Text(text))) => {
                        Box::pin(self.on_text(&text, &mut slot)).await
                    }
                    Some(Ok(AggregatedMessage::Binary(_))) => {
                        self.out.refuse(messages::notice("invalid: binary messages are not supported"));
                    }
                    Some(Ok(AggregatedMessage::Ping(bytes))) => {
                        self.out.pong(bytes);
                    }
                    Some(Ok(AggregatedMessage::Pong(_))) => self.ping_since = None,
                    Some(Ok(AggregatedMessage::Close(_))) => break End::ClientClosed,
                    Some(Err(actix_ws::ProtocolError::Overflow)) => {
                        let max = self.state.services.settings.limits.max_message_bytes;
                        self.out.send(messages::notice(&format!("invalid: message exceeds {max} bytes")));
                        break End::Oversized;
                    }
                    Some(Err(err)) => {
                        tracing::debug!(error = %err, "websocket protocol error");
                        break End::ProtocolError;
                    }
                },
                delivery = self.live.recv() => match delivery {
                    Some(delivery) => {
                        if let Some(end) = self.on_live(delivery).await {
                            break end;
                        }
                    }
                    None => break End::FellBehind,
                },
                _ = heartbeat.tick() => {
                    if self.stalled() {
                        break End::Stalled;
                    }
                }
            }
        };
        let reason = match end {
            End::ClientClosed => None,
            End::QueueFull => Some(CloseReason {
                code: CloseCode::Policy,
                description: Some("too slow: outbound queue full".into()),
            }),
            End::FellBehind => Some(CloseReason {
                code: CloseCode::Policy,
                description: Some("too slow: fell behind live events".into()),
            }),
            End::Stalled => Some(CloseReason {
                code: CloseCode::Policy,
                description: Some("too slow: not reading".into()),
            }),
            End::Oversized => Some(CloseReason {
                code: CloseCode::Size,
                description: Some("message too large".into()),
            }),
            End::ProtocolError => Some(CloseReason {
                code: CloseCode::Protocol,
                description: None,
            }),
            End::Banned(ref text) => Some(CloseReason {
                code: CloseCode::Policy,
                description: Some(messages::close_text(text)),
            }),
        };
        for plugin in self.state.plugins.iter() {
            if !plugin.message_verbs().is_empty() {
                plugin.on_connection_closed(self.id);
            }
        }
        // Give queued notices a moment to reach the queue before the close frame.
        tokio::task::yield_now().await;
        Ended {
            close_queued: self.out.close(reason),
            why: end,
        }
    }

    /// When the next message may be read, if not now: the connection is past its refusal
    /// budget. The first time in a stretch over it, the client is told.
    fn read_after(&self) -> Option<Instant> {
        match self.out.next_read() {
            NextRead::Now => None,
            NextRead::At { at, notice } => {
                if notice {
                    let per_sec = self.state.services.settings.limits.refusals_per_sec;
                    self.out.send(messages::notice(&format!(
                        "rate-limited: more than {per_sec} refused messages a second \
                         (limits.refusals_per_sec); this connection's next messages are read \
                         more slowly"
                    )));
                }
                Some(at)
            }
        }
    }

    /// The heartbeat's rules, checked every half stall limit: a client that neither
    /// answers a ping nor takes anything written for the stall limit, or whose queued
    /// output the socket has not taken for that long (an unsolicited pong does not
    /// help a client that does not read), has stalled.
    fn stalled(&mut self) -> bool {
        let taken = self.out.taken();
        self.stuck_since = match self.stuck_since {
            _ if self.out.pending() == 0 => None,
            Some((at, seen)) if seen == taken => Some((at, seen)),
            _ => Some((Instant::now(), taken)),
        };
        match self.ping_since {
            None => {
                self.ping_since = Some((Instant::now(), taken));
                self.out.ping();
            }
            // More than the ping itself was written since: the wait starts again.
            Some((_, seen)) if taken > seen + 1 => {
                self.ping_since = Some((Instant::now(), taken - 1));
            }
            Some(_) => {}
        }
        let stall = self.stall();
        let waited =
            |since: Option<(Instant, u64)>| since.is_some_and(|(at, _)| at.elapsed() >= stall);
        waited(self.stuck_since) || waited(self.ping_since)
    }

    /// Handle one client message; an EVENT takes the in-flight `slot` with it.
    async fn on_text(&mut self, text: &str, slot: &mut Option<OwnedSemaphorePermit>) {
        match messages::parse(text) {
            Ok(ClientMessage::Event(value)) => {
                if let Some(permit) = slot.take() {
                    self.on_event(&value, permit)
                }
            }
            Ok(ClientMessage::Req {
                sub_id,
                filters,
                filter_bytes,
            }) => self.serve_req(sub_id, filters, filter_bytes).await,
            Ok(ClientMessage::Count { sub_id, filters }) => self.serve_count(sub_id, filters).await,
            Ok(ClientMessage::Other { verb, message }) => self.on_other(&verb, message).await,
            Ok(ClientMessage::Close(sub_id)) => self.close_sub(&sub_id),
            Ok(ClientMessage::Auth(value)) => self.on_auth(value).await,
            Err(reason) => {
                let text_of_reason = reason.wire_text();
                // An EVENT that is not even JSON still gets an OK its client can match,
                // when its id can be read.
                if let Some(id) = salvage::event_id(text) {
                    self.out.send(messages::ok(&id, false, &text_of_reason));
                }
                self.out.refuse(messages::notice(&text_of_reason));
            }
        }
    }

    fn on_event(&mut self, raw: &serde_json::value::RawValue, permit: OwnedSemaphorePermit) {
        let event = match serde_json::from_str::<Event>(raw.get()) {
            Ok(event) => event,
            Err(e) => {
                // Echo the id when the object has one, so the client can match the OK.
                let id = serde_json::from_str::<Value>(raw.get())
                    .ok()
                    .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                let reason = Reason::invalid(format!("not a Nostr event: {e}")).wire_text();
                self.out.send(messages::ok(&id, false, &reason));
                // Every unparseable EVENT also gets a NOTICE: a client that cannot match
                // the OK (no readable id) still learns why.
                self.out.refuse(messages::notice(&reason));
                return;
            }
        };
        self.events
            .submit(&self.state, &self.out, self.ctx.clone(), event, permit);
    }
}
