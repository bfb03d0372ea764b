//! The running plugin: NIP-77's verbs answered, one connection's messages at a time.
//!
//! - `NEG-OPEN`: a session under the same id is closed first (NIP-77); the connection's
//!   session bound, the filter's checks (`records.rs`), a charge on the reader's, its
//!   community's and the process's shares (`shares.rs`) — refused here, before any row
//!   is read, when none is left —, the set read within that room, then the first
//!   reconciliation step — `NEG-MSG` with the relay's answer, or `NEG-ERR`.
//! - `NEG-MSG`: the session's next step; an id with no open session (never opened,
//!   closed, timed out, or ended by an earlier `NEG-ERR`) is `NEG-ERR` too.
//! - `NEG-CLOSE`: the session is dropped; no answer.
//!
//! Negentropy work (sealing a set, fingerprinting it) runs on a blocking thread, so a
//! large reconciliation never holds up the async workers.

use crate::message::{self, Refusal, Request};
use crate::records;
use crate::records::Read;
use crate::sessions::{Ended, Engine, Lifetimes, Lookup, Sessions};
use crate::set_cache::SetCache;
use crate::shares::{Bounds, Limit, Reader, Shares};
use crate::{Config, NAME};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{PlainReads, Plugin, Services};
use buzz_nostr::filter::Filter;
use futures_util::future::BoxFuture;
use negentropy::Negentropy;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often idle sessions are looked for, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The sync plugin as it runs.
pub struct Reconciler {
    config: Config,
    services: Services,
    sessions: Arc<Sessions>,
    shares: Arc<Shares>,
    /// Sets kept between opens, `max_sync_records` records at most.
    sets: SetCache,
}

impl Reconciler {
    pub(crate) fn new(config: Config, services: Services) -> Self {
        let sessions = Arc::new(Sessions::new(
            config.max_sessions_per_connection,
            Lifetimes {
                idle: Duration::from_secs(config.idle_timeout_secs),
                whole: Duration::from_secs(config.max_session_secs),
            },
        ));
        let shares = Arc::new(Shares::new(
            Bounds {
                max_records: config.max_records_in_memory,
                per_reader_records: config.max_records_per_pubkey,
                per_reader_sessions: config.max_sessions_per_pubkey,
                reserved_per_community: config.records_reserved_per_community,
            },
            services.communities.iter().map(|c| c.id).collect(),
        ));
        Reconciler {
            sets: SetCache::new(config.max_sync_records),
            config,
            services,
            sessions,
            shares,
        }
    }

    /// Sessions open in this process and the records they hold (for tests and status).
    pub fn open_sessions(&self) -> (usize, usize) {
        self.sessions.totals()
    }

    /// Sets kept between opens and the records they hold (for tests and status).
    pub fn kept_sets(&self) -> (usize, usize) {
        self.sets.totals()
    }

    async fn open(
        &self,
        ctx: &ConnCtx,
        connection: u64,
        queries: &dyn PlainReads,
        sub: &str,
        filter: Filter,
        first: Vec<u8>,
    ) -> Result<Vec<u8>, Reason> {
        self.sessions.close(connection, sub);
        if let Err(max) = self.sessions.has_room(connection, Instant::now()) {
            return Err(Reason::Blocked(format!(
                "at most {max} sync sessions may be open on one connection \
                 (max_sessions_per_connection); send NEG-CLOSE for one first"
            )));
        }
        let checked = records::check(&self.services, queries, ctx, filter).await?;
        let max = self.config.max_sync_records;
        let want = checked.most(max);
        let mut charge = self
            .shares
            .take(ctx.community_id(), reader(ctx, connection), want)
            .map_err(no_room)?;
        let set = match records::read(&self.services, &self.sets, checked, charge.records()).await?
        {
            Read::Set(set) => set,
            Read::Over => {
                return Err(match charge.capped_by {
                    Some(limit) => no_room(limit),
                    None => Reason::Blocked(format!(
                        "this filter matches more than {max} events, the most one sync may \
                         cover (max_sync_records); narrow it with since/until or by channel"
                    )),
                })
            }
        };
        charge.shrink(set.records);
        let frame = self.config.frame_size_limit as u64;
        let (engine, answer) = blocking(move || {
            let mut engine: Engine = Negentropy::owned(set.storage, frame)
                .map_err(|e| Reason::Internal(anyhow::anyhow!("negentropy engine: {e}")))?;
            let answer = reconcile(&mut engine, &first)?;
            Ok((engine, answer))
        })
        .await?;
        self.sessions
            .open(connection, sub.to_owned(), engine, charge, Instant::now());
        Ok(answer)
    }

    async fn step(&self, connection: u64, sub: &str, message: Vec<u8>) -> Result<Vec<u8>, Reason> {
        let mut session = match self.sessions.take(connection, sub, Instant::now()) {
            Lookup::Found(session) => session,
            Lookup::TimedOut(Ended::Idle) => {
                return Err(Reason::Closed(format!(
                    "sync session {sub:?} was closed after {} s without a message \
                     (idle_timeout_secs); send NEG-OPEN again",
                    self.config.idle_timeout_secs
                )))
            }
            Lookup::TimedOut(Ended::Lifetime) => {
                return Err(Reason::Closed(format!(
                    "sync session {sub:?} was closed after {} s open, the most one session \
                     may last (max_session_secs); send NEG-OPEN again",
                    self.config.max_session_secs
                )))
            }
            Lookup::Unknown => {
                return Err(Reason::invalid(format!(
                    "no sync session {sub:?} is open on this connection; send NEG-OPEN first"
                )))
            }
        };
        let stepped = blocking(move || {
            let answer = reconcile(&mut session.engine, &message);
            Ok((session, answer))
        })
        .await;
        let (session, answer) = match stepped {
            Ok(stepped) => stepped,
            Err(reason) => {
                self.sessions.close(connection, sub);
                return Err(reason);
            }
        };
        match answer {
            Ok(answer) => {
                self.sessions
                    .put_back(connection, sub, session, Instant::now());
                Ok(answer)
            }
            // NIP-77: after NEG-ERR the session is closed.
            Err(reason) => {
                self.sessions.close(connection, sub);
                Err(reason)
            }
        }
    }
}

/// One reconciliation step as the relay (never the initiator) takes it.
fn reconcile(engine: &mut Engine, message: &[u8]) -> Result<Vec<u8>, Reason> {
    engine
        .reconcile(message)
        .map_err(|e| Reason::invalid(format!("negentropy message refused: {e}")))
}

/// Whose share an open of `ctx` is charged to: its pubkey, else its address, else its
/// connection.
fn reader(ctx: &ConnCtx, connection: u64) -> Reader {
    match (&ctx.pubkey, ctx.ip) {
        (Some(pubkey), _) => Reader::Pubkey(pubkey.clone()),
        (None, Some(ip)) => Reader::Address(ip),
        (None, None) => Reader::Connection(connection),
    }
}

/// The refusal for a share with no room: the reader's own bounds are `blocked:`, other
/// readers' use a retryable `error:`.
fn no_room(limit: Limit) -> Reason {
    match limit {
        Limit::ReaderSessions(max) => Reason::Blocked(format!(
            "at most {max} sync sessions may be open for one reader over all its \
             connections (max_sessions_per_pubkey); send NEG-CLOSE for one first"
        )),
        Limit::ReaderRecords(held, share) => Reason::Blocked(format!(
            "your open sync sessions hold {held} of the {share} records one reader may \
             hold (max_records_per_pubkey); send NEG-CLOSE for one, or narrow the filter"
        )),
        Limit::Reserved => Reason::Unavailable(
            "what the relay may hold of sync records now is kept for other communities \
             (records_reserved_per_community); retry later"
                .into(),
        ),
        Limit::Process => Reason::Unavailable(
            "the relay holds as many sync records as it may right now \
             (max_records_in_memory); retry later"
                .into(),
        ),
    }
}

async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, Reason> + Send + 'static,
) -> Result<R, Reason> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Reason::Internal(anyhow::anyhow!("negentropy task: {e}")))?
}

fn neg_msg(sub: &str, answer: &[u8]) -> Value {
    json!([message::MSG, sub, hex::encode(answer)])
}

fn neg_err(sub: &str, reason: &Reason) -> Value {
    json!([message::ERR, sub, reason.wire_text()])
}

#[async_trait::async_trait]
impl Plugin for Reconciler {
    fn name(&self) -> &'static str {
        NAME
    }

    fn message_verbs(&self) -> &'static [&'static str] {
        message::VERBS
    }

    async fn answer_message(
        &self,
        ctx: &ConnCtx,
        connection: u64,
        message: Vec<Value>,
        queries: &dyn PlainReads,
    ) -> Result<Vec<Value>, Reason> {
        let request = match message::parse(&message) {
            Ok(request) => request,
            Err(Refusal::Unaddressed(reason)) => return Err(reason),
            Err(Refusal::Addressed(sub, reason)) => {
                self.sessions.close(connection, &sub);
                return Ok(vec![neg_err(&sub, &reason)]);
            }
        };
        let (sub, answer) = match request {
            Request::Open {
                sub,
                filter,
                message,
            } => {
                let answer = self
                    .open(ctx, connection, queries, &sub, filter, message)
                    .await;
                (sub, answer)
            }
            Request::Msg { sub, message } => {
                let answer = self.step(connection, &sub, message).await;
                (sub, answer)
            }
            Request::Close { sub } => {
                self.sessions.close(connection, &sub);
                return Ok(Vec::new());
            }
        };
        Ok(vec![match answer {
            Ok(answer) => neg_msg(&sub, &answer),
            Err(reason) => neg_err(&sub, &reason),
        }])
    }

    /// Every bound of the section, so clients can size their filters and sessions.
    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        doc.insert(NAME.into(), self.config.nip11());
    }

    fn on_connection_closed(&self, connection: u64) {
        self.sessions.connection_closed(connection);
    }

    /// The idle sweeper: sessions nobody speaks to are dropped even on connections that
    /// stay silent.
    fn background(self: Arc<Self>) -> Vec<BoxFuture<'static, ()>> {
        let sessions = self.sessions.clone();
        let every = SWEEP_EVERY
            .min(Duration::from_secs(self.config.idle_timeout_secs))
            .min(Duration::from_secs(self.config.max_session_secs));
        vec![Box::pin(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let dropped = sessions.sweep(Instant::now());
                if dropped > 0 {
                    tracing::debug!(dropped, "idle sync sessions dropped");
                }
            }
        })]
    }
}
