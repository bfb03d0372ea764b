//! NIP-01 over WebSocket: one task per connection.
//!
//! The connection task reads client messages and live events; a separate writer task
//! drains a bounded outbound queue into the socket. A client that lets that queue fill
//! with live events (or falls behind the live broadcast), or leaves it full for 30 s
//! while a REQ answer waits to be queued, is too slow and is disconnected: memory per
//! connection stays bounded, and a large answer to a client that reads is delivered.

mod messages;
mod salvage;

use super::{AppState, RequestCtx};
use crate::auth::nip42;
use crate::channels::kinds::changes_access;
use crate::ctx::{ConnCtx, Transport};
use crate::error::Reason;
use crate::event::{Event, StoredEvent};
use crate::filter::Filter;
use crate::store::Scope;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, CloseCode, CloseReason, Session};
use messages::ClientMessage;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc, Notify, OwnedSemaphorePermit, Semaphore};

/// How long a closing handshake may wait for a slow client.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a REQ answer may wait for room in the outbound queue.
const ANSWER_STALL: std::time::Duration = std::time::Duration::from_secs(30);

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
    let (response, session, stream) = match actix_ws::handle(&req, body) {
        Ok(parts) => parts,
        Err(err) => return err.error_response(),
    };
    let max = state.services.settings.limits.max_message_bytes;
    let stream = stream
        .max_frame_size(max)
        .aggregate_continuations()
        .max_continuation_size(max);
    let state = state.into_inner();
    actix_web::rt::spawn(async move {
        let connection = Connection::new(state, ctx, session.clone());
        connection.run(session, stream).await;
    });
    response
}

/// Why a connection ends.
enum End {
    ClientClosed,
    /// The client does not read what it is sent.
    QueueFull,
    /// The connection could not keep up with live events for its subscriptions.
    FellBehind,
    Oversized,
    ProtocolError,
}

struct Connection {
    state: Arc<AppState>,
    ctx: ConnCtx,
    challenge: String,
    relay_url: String,
    /// Subscription id → the filters that stay live (core-served ones).
    subs: HashMap<String, Vec<Filter>>,
    /// The live bus, only while there are subscriptions: a publish-only connection
    /// costs nothing per event published by others.
    live: Option<broadcast::Receiver<Arc<StoredEvent>>>,
    /// What this caller may read; decided at connect, after AUTH, and whenever an
    /// access-changing event or a policy reload passes by.
    scope: Option<Scope>,
    policy_generation: u64,
    out: Outbound,
    /// EVENT messages being processed concurrently (group commit needs several in flight).
    inflight: Arc<Semaphore>,
    session: Session,
}

/// The bounded outbound queue plus the "too slow" alarm.
#[derive(Clone)]
struct Outbound {
    queue: mpsc::Sender<String>,
    too_slow: Arc<Notify>,
}

impl Outbound {
    /// Queue a message; if the queue is full the client is too slow and the connection
    /// is told to close.
    fn send(&self, text: String) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send(text) {
            self.too_slow.notify_one();
        }
    }

    /// Queue part of an answer the client asked for (a REQ's stored events), waiting for
    /// room: one answer may hold more messages than the queue. A client that lets the
    /// queue stay full for [`ANSWER_STALL`] is too slow. `false`: stop answering.
    async fn send_answer(&self, text: String) -> bool {
        match tokio::time::timeout(ANSWER_STALL, self.queue.send(text)).await {
            Ok(Ok(())) => true,
            // The socket writer is gone: the connection is closing anyway.
            Ok(Err(_)) => false,
            Err(_) => {
                self.too_slow.notify_one();
                false
            }
        }
    }
}

impl Connection {
    fn new(state: Arc<AppState>, ctx: ConnCtx, session: Session) -> Self {
        let limits = &state.services.settings.limits;
        let (queue, rx) = mpsc::channel(limits.max_outbound_queue.max(1));
        let inflight = Arc::new(Semaphore::new(limits.max_inflight_events.max(1)));
        let relay_url = nip42::relay_url(
            &state.services.settings.server.public_scheme,
            &ctx.host_header,
        );
        let policy_generation = state.services.access.policy_generation();
        actix_web::rt::spawn(write_loop(session.clone(), rx));
        Connection {
            state,
            ctx,
            challenge: nip42::new_challenge(),
            relay_url,
            subs: HashMap::new(),
            live: None,
            scope: None,
            policy_generation,
            out: Outbound {
                queue,
                too_slow: Arc::new(Notify::new()),
            },
            inflight,
            session,
        }
    }

    async fn run(mut self, _session: Session, mut stream: actix_ws::AggregatedMessageStream) {
        self.out.send(messages::auth_challenge(&self.challenge));
        self.refresh_scope().await;
        let too_slow = self.out.too_slow.clone();
        let inflight = self.inflight.clone();
        // The next message is read only while an in-flight slot is held, so a busy
        // publisher is slowed at the socket while live events keep flowing.
        let mut slot: Option<OwnedSemaphorePermit> = None;
        let end = loop {
            tokio::select! {
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
                        let _ = self.session.pong(&bytes).await;
                    }
                    Some(Ok(AggregatedMessage::Pong(_))) => {}
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
                event = next_live(&mut self.live), if self.live.is_some() => match event {
                    Ok(event) => self.on_live(&event).await,
                    // Missed live events matter only to a connection with subscriptions;
                    // one without just re-reads its access scope (it may have missed a
                    // membership change).
                    Err(broadcast::error::RecvError::Lagged(_)) if self.subs.is_empty() => {
                        self.refresh_scope().await;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break End::FellBehind,
                    Err(broadcast::error::RecvError::Closed) => break End::ClientClosed,
                },
                _ = too_slow.notified() => break End::QueueFull,
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
            End::Oversized => Some(CloseReason {
                code: CloseCode::Size,
                description: Some("message too large".into()),
            }),
            End::ProtocolError => Some(CloseReason {
                code: CloseCode::Protocol,
                description: None,
            }),
        };
        // Give queued notices a moment to reach the writer before closing. The close is
        // best-effort and bounded: a client that stopped reading must not park this task
        // (dropping the session then ends the connection).
        tokio::task::yield_now().await;
        let _ = tokio::time::timeout(CLOSE_GRACE, self.session.close(reason)).await;
    }

    /// Handle one client message; an EVENT takes the in-flight `slot` with it.
    async fn on_text(&mut self, text: &str, slot: &mut Option<OwnedSemaphorePermit>) {
        match messages::parse(text) {
            Ok(ClientMessage::Event(value)) => {
                if let Some(permit) = slot.take() {
                    self.on_event(&value, permit)
                }
            }
            Ok(ClientMessage::Req { sub_id, filters }) => self.on_req(sub_id, filters).await,
            Ok(ClientMessage::Close(sub_id)) => {
                self.subs.remove(&sub_id);
                self.drop_live_if_idle();
            }
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
        let (event, id) = match serde_json::from_str::<Event>(raw.get()) {
            Ok(event) => {
                let id = event.id.clone();
                (event, id)
            }
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
        let (state, ctx, out) = (self.state.clone(), self.ctx.clone(), self.out.clone());
        actix_web::rt::spawn(async move {
            let answer = match state.ingest.submit(&ctx, event).await {
                Ok(accepted) => messages::ok(&id, true, &accepted.message),
                Err(reason) => messages::ok(&id, false, &reason.wire_text()),
            };
            out.send(answer);
            drop(permit);
        });
    }

    async fn on_req(&mut self, sub_id: String, raw: Vec<Value>) {
        self.serve_req(sub_id, raw).await;
        self.drop_live_if_idle();
    }

    /// Stop listening to the live bus when no subscription is open.
    fn drop_live_if_idle(&mut self) {
        if self.subs.is_empty() {
            self.live = None;
        }
    }

    async fn serve_req(&mut self, sub_id: String, raw: Vec<Value>) {
        let max_subs = self.state.services.settings.limits.max_subscriptions;
        if !self.subs.contains_key(&sub_id) && self.subs.len() >= max_subs {
            let reason = Reason::RateLimited(format!("at most {max_subs} open subscriptions"));
            self.out
                .send(messages::closed(&sub_id, &reason.wire_text()));
            return;
        }
        let filters = match Filter::parse_many(&raw) {
            Ok(filters) => filters,
            Err(reason) => {
                self.subs.remove(&sub_id);
                self.out
                    .send(messages::closed(&sub_id, &reason.wire_text()));
                return;
            }
        };
        if self.live.is_none() {
            // Listen before querying, so nothing stored meanwhile is missed; the scope may
            // be stale after a time without listening.
            self.live = Some(self.state.services.bus.subscribe());
            self.refresh_scope().await;
        }
        match self.state.query.run(&self.ctx, filters).await {
            Ok(result) if result.object.is_some() => {
                self.subs.remove(&sub_id);
                let reason = Reason::invalid("this request is only served by POST /query");
                self.out
                    .send(messages::closed(&sub_id, &reason.wire_text()));
            }
            Ok(result) => {
                for event in &result.events {
                    if !self.out.send_answer(messages::event(&sub_id, event)).await {
                        return;
                    }
                }
                if self.out.send_answer(messages::eose(&sub_id)).await {
                    self.subs.insert(sub_id, result.live_filters);
                }
            }
            Err(reason) => {
                self.subs.remove(&sub_id);
                self.out
                    .send(messages::closed(&sub_id, &reason.wire_text()));
            }
        }
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
                nip42::verify(&event, &self.challenge, &self.relay_url, now).map(|()| event.pubkey)
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
        match self.state.services.access.read_scope(&self.ctx).await {
            Ok(scope) => self.scope = Some(scope),
            Err(reason) => {
                // Without a scope nothing live is delivered (fail closed).
                self.scope = None;
                self.out.send(messages::notice(&reason.wire_text()));
            }
        }
    }

    async fn on_live(&mut self, event: &StoredEvent) {
        // Membership, channel and sanction changes (and policy reloads) change what this
        // caller may read: recompute before delivering anything else, so a revoked
        // reader stops receiving immediately.
        let generation = self.state.services.access.policy_generation();
        if changes_access(event.event.kind) || generation != self.policy_generation {
            self.policy_generation = generation;
            self.refresh_scope().await;
        }
        let Some(scope) = &self.scope else { return };
        if !self.state.services.access.can_see(scope, event) {
            return;
        }
        for (sub_id, filters) in &self.subs {
            if filters.iter().any(|f| f.matches(&event.event)) {
                self.out.send(messages::event(sub_id, &event.event));
            }
        }
    }
}

/// The next live event, or never when not listening.
async fn next_live(
    live: &mut Option<broadcast::Receiver<Arc<StoredEvent>>>,
) -> Result<Arc<StoredEvent>, broadcast::error::RecvError> {
    match live {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Drain the outbound queue into the socket until either side is gone.
async fn write_loop(mut session: Session, mut rx: mpsc::Receiver<String>) {
    while let Some(text) = rx.recv().await {
        if session.text(text).await.is_err() {
            break;
        }
    }
}
