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

mod answered;
mod events;
mod messages;
mod outbound;
mod salvage;
mod verbs;

use super::socket::SocketHandle;
use super::{AppState, RequestCtx};
use crate::ctx::{ConnCtx, Transport};
use crate::error::Reason;
use crate::live::{Delivery, Fanout, LiveInbox, SubKey};
use crate::plugin::Services;
use crate::store::Scope;
use crate::stored::StoredEvent;
use actix_web::body::{BodyStream, BoxBody};
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, CloseCode, CloseReason};
use answered::Answered;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::kinds::changes_access;
use buzz_nostr::nip42;
use events::EventRunner;
use messages::ClientMessage;
use outbound::Outbound;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    actix_web::rt::spawn(async move {
        let _open = state.services.metrics.connection_opened();
        let connection = Connection::new(state, &shared, ctx, out);
        let end = connection.run(stream).await;
        // Everything the connection held is dropped by now and the close frame queued
        // (when there was room). A client that does not read never takes it: end the
        // TCP connection, so nothing queued for it stays in memory or in the kernel.
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
    });
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
    /// Subscription id → its live key and the bytes its filters count.
    subs: HashMap<String, Sub>,
    /// Live key → subscription id, for deliveries.
    by_key: HashMap<SubKey, String>,
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

struct Sub {
    key: SubKey,
    filter_bytes: usize,
    /// The ids its stored answer sent, while a live copy of one may still arrive.
    answered: Option<Answered>,
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
        let events = EventRunner::start(state.clone(), out.clone());
        Connection {
            state,
            id: NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ctx,
            challenge: nip42::new_challenge(),
            relay_url,
            subs: HashMap::new(),
            by_key: HashMap::new(),
            filter_bytes: 0,
            live: shared.fanout.connect(),
            scope: None,
            policy_generation,
            out,
            inflight,
            events,
            ping_since: None,
            stuck_since: None,
        }
    }

    fn stall(&self) -> Duration {
        Duration::from_secs(self.state.services.settings.limits.outbound_stall_secs)
    }

    /// Serve the connection until it ends; the close frame is queued when it returns.
    async fn run(mut self, mut stream: actix_ws::AggregatedMessageStream) -> Ended {
        self.out.send(messages::auth_challenge(&self.challenge));
        self.refresh_scope().await;
        let too_slow = self.out.too_slow.clone();
        let inflight = self.inflight.clone();
        // Heartbeat: a client that reads answers pings; one that does not, and whose
        // writes made no progress either, is closed after the stall limit.
        let mut heartbeat = tokio::time::interval((self.stall() / 2).max(Duration::from_secs(1)));
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The next message is read only while an in-flight slot is held, so a busy
        // publisher is slowed at the socket while live events keep flowing.
        let mut slot: Option<OwnedSemaphorePermit> = None;
        let end = loop {
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
                msg = stream.recv(), if slot.is_some() => match msg {
                    None => break End::ClientClosed,
                    Some(Ok(AggregatedMessage::Text(text))) => self.on_text(&text, &mut slot).await,
                    Some(Ok(AggregatedMessage::Binary(_))) => {
                        self.out.send(messages::notice("invalid: binary messages are not supported"));
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
                    Some(delivery) => self.on_live(delivery).await,
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
        };
        for plugin in self.state.plugins.iter() {
            if !plugin.message_verbs().is_empty() {
                plugin.connection_closed(self.id);
            }
        }
        // Give queued notices a moment to reach the queue before the close frame.
        tokio::task::yield_now().await;
        Ended {
            close_queued: self.out.close(reason),
            why: end,
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
                self.out.send(messages::notice(&text_of_reason));
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
                self.out.send(messages::notice(&reason));
                return;
            }
        };
        self.events.submit(self.ctx.clone(), event, permit);
    }

    /// Forget subscription `sub_id` (if open).
    fn close_sub(&mut self, sub_id: &str) {
        if let Some(sub) = self.subs.remove(sub_id) {
            self.live.remove(sub.key);
            self.by_key.remove(&sub.key);
            self.filter_bytes -= sub.filter_bytes;
        }
    }

    /// Refuse a REQ: it ends any subscription of that id.
    fn refuse_req(&mut self, sub_id: &str, reason: &Reason) {
        self.close_sub(sub_id);
        self.out.send(messages::closed(sub_id, &reason.wire_text()));
    }

    async fn serve_req(&mut self, sub_id: String, raw: Vec<Value>, filter_bytes: usize) {
        let limits = &self.state.services.settings.limits;
        let (max_subs, max_filter_bytes) = (limits.max_subscriptions, limits.max_filter_bytes);
        if !self.subs.contains_key(&sub_id) && self.subs.len() >= max_subs {
            let reason = Reason::RateLimited(format!("at most {max_subs} open subscriptions"));
            self.out
                .send(messages::closed(&sub_id, &reason.wire_text()));
            return;
        }
        // A REQ with an open id replaces that subscription: its bytes are given back.
        let replaced = self.subs.get(&sub_id).map_or(0, |s| s.filter_bytes);
        if self.filter_bytes - replaced + filter_bytes > max_filter_bytes {
            let reason = Reason::invalid(format!(
                "the filters of this connection's subscriptions would exceed \
                 {max_filter_bytes} bytes (max_filter_bytes)"
            ));
            return self.refuse_req(&sub_id, &reason);
        }
        let prepared = match Filter::parse_many(&raw) {
            Ok(filters) => self.state.query.prepare(&self.ctx, filters).await,
            Err(refusal) => Err(refusal.into()),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(reason) => return self.refuse_req(&sub_id, &reason),
        };
        self.close_sub(&sub_id);
        // Listen before querying, so nothing stored meanwhile is missed; the scope may
        // be stale after a time without subscriptions.
        let was_idle = self.live.is_idle();
        let key = self
            .live
            .add_conditioned(prepared.live_filters(), prepared.live_claimed());
        if was_idle {
            self.refresh_scope().await;
        }
        let result = match self.state.query.execute(&self.ctx, prepared).await {
            Ok(result) if result.object.is_some() => Err(Reason::invalid(
                "this request is only served by POST /query",
            )),
            other => other,
        };
        let mut result = match result {
            Ok(result) => result,
            Err(reason) => {
                self.live.remove(key);
                self.out
                    .send(messages::closed(&sub_id, &reason.wire_text()));
                return;
            }
        };
        // Stream core's events a page at a time within the outbound bound, then the
        // plugins' events, then EOSE; the subscription is live from then on.
        // Each page's room is taken before it is read, so a client that does not read
        // holds its pages' bytes within its outbound bound too. A page is a quarter of
        // that bound, so live events still find room while an answer streams.
        let page_budget = (self.state.services.settings.limits.max_outbound_bytes / 4).max(1);
        let mut answered = Answered::new();
        let prefix = messages::event_prefix(&sub_id);
        loop {
            let page_bytes = result.stored.next_page_bytes(page_budget);
            if page_bytes == 0 {
                break;
            }
            let Some(mut reserved) = self.out.reserve(page_bytes).await else {
                return self.live.remove(key);
            };
            match result.stored.next_wire_page(page_budget).await {
                Ok(Some(page)) => {
                    for event in &page {
                        answered.push(&event.id);
                        let text = messages::event_frame(&prefix, &event.json);
                        if !self.out.send_reserved(text, &mut reserved).await {
                            return self.live.remove(key);
                        }
                    }
                }
                Ok(None) => break,
                Err(reason) => {
                    self.live.remove(key);
                    self.out
                        .send(messages::closed(&sub_id, &reason.wire_text()));
                    return;
                }
            }
        }
        for event in &result.events {
            answered.push(&event.id);
        }
        if !self.send_events(&sub_id, &result.events).await
            || !self.out.send_answer(messages::eose(&sub_id)).await
        {
            return self.live.remove(key);
        }
        self.by_key.insert(key, sub_id.clone());
        self.filter_bytes += filter_bytes;
        let answered = answered.seal();
        self.subs.insert(
            sub_id,
            Sub {
                key,
                filter_bytes,
                answered,
            },
        );
    }

    /// Queue a REQ's events, waiting for room; `false`: the client is gone or too slow.
    async fn send_events(&self, sub_id: &str, events: &[Event]) -> bool {
        for event in events {
            if !self.out.send_answer(messages::event(sub_id, event)).await {
                return false;
            }
        }
        true
    }

    async fn on_auth(&mut self, value: Value) {
        let id = value
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let result = serde_json::from_value::<Event>(value)
            .map_err(|e| Reason::invalid(format!("not a Nostr event: {e}")))
            .and_then(|event| {
                let now = self.state.services.clock.now_secs();
                nip42::verify(&event, &self.challenge, &self.relay_url, now)
                    .map(|()| event.pubkey)
                    .map_err(Reason::from)
            });
        match result {
            Ok(pubkey) => {
                self.ctx.pubkey = Some(pubkey);
                self.refresh_scope().await;
                self.out.send(messages::ok(&id, true, ""));
            }
            Err(reason) => self.out.send(messages::ok(&id, false, &reason.wire_text())),
        }
    }

    async fn refresh_scope(&mut self) {
        let scope = self.state.services.access.read_scope(&self.ctx).await;
        self.set_scope(scope);
    }

    /// After an access change passed by: the cached decisions brought forward by it.
    async fn refresh_live_scope(&mut self) {
        let scope = self.state.services.access.live_scope(&self.ctx).await;
        self.set_scope(scope);
    }

    fn set_scope(&mut self, scope: Result<Scope, Reason>) {
        match scope {
            Ok(scope) => self.scope = Some(scope),
            Err(reason) => {
                // Without a scope nothing live is delivered (fail closed).
                self.scope = None;
                self.out.send(messages::notice(&reason.wire_text()));
            }
        }
    }

    async fn on_live(&mut self, delivery: Delivery) {
        let event = &delivery.event;
        // Membership, channel and sanction changes (and policy reloads) change what this
        // caller may read: recompute before delivering anything else, so a revoked
        // reader stops receiving immediately.
        let generation = self.state.services.access.policy_generation();
        if changes_access(event.event.kind) || generation != self.policy_generation {
            self.policy_generation = generation;
            self.refresh_live_scope().await;
        }
        let Some(scope) = &self.scope else { return };
        if !self.state.services.access.can_see(scope, event) {
            return;
        }
        let now = Instant::now();
        for key in &delivery.subs {
            // A key without an id: closed or replaced since, or not yet past its EOSE.
            let Some(sub_id) = self.by_key.get(key) else {
                continue;
            };
            if let Some(sub) = self.subs.get_mut(sub_id) {
                match &sub.answered {
                    Some(answered) if answered.expired(now) => sub.answered = None,
                    // Its stored answer sent this event already.
                    Some(answered) if answered.holds(&event.event.id) => continue,
                    _ => {}
                }
            }
            self.out.send(messages::event(sub_id, &event.event));
        }
    }
}
