//! **API boundary** — the plugin API. Plugin crates depend on this module (and the types
//! it names), never on the HTTP or WebSocket internals.
//!
//! A plugin crate declares itself with a [`PluginManifest`] (name, config section,
//! reserved kinds, tables, admin data; `manifest.rs`) and runs as a [`Plugin`]: every hook
//! has a default, so a plugin implements only what it uses. The binary lists the built
//! plugins once, in a [`PluginCatalog`]; enabled ones are built at start, in catalog
//! order, and held as `Vec<Arc<dyn Plugin>>`.
//!
//! How each hook group combines:
//! - **Ingest checks** ([`Plugin::reject_event`]): all run in order, after core's own checks
//!   and the access service; the first rejection wins and nothing is stored.
//! - **In-transaction hooks** ([`Plugin::on_event_stored`]): all run inside the event's
//!   storage transaction, after core stored it and updated channel and thread state; any
//!   error rolls the event back (with every plugin change) and is the answer. A hook may
//!   store relay-signed events of its own ([`Tx::store_relay_event`]); they commit with
//!   the event and are delivered live after it.
//! - **Purge hooks** ([`Plugin::on_events_purged`]): all run inside the transaction that
//!   deletes a batch of NIP-40-expired events, before core deletes their rows; any error
//!   rolls the batch back (it is tried again at the next tick).
//! - **Observers** ([`Plugin::on_event_committed`]): all run after the commit; they cannot fail
//!   the write (errors are theirs to log).
//! - **Resubmission** ([`Plugin::accepts_resubmission`]): any. Before every check but
//!   the event's own validity (shape, id, signature), an already stored event of a kind
//!   some plugin names, resent by its authenticated author, is answered `duplicate:`.
//! - **Filter checks** ([`Plugin::reject_filter`]): all run on every filter no plugin
//!   claimed, before anything is served; the first rejection wins.
//! - **Filter claims** ([`Plugin::claims_filter`] / [`Plugin::answer_claimed`]):
//!   exclusive; the first plugin that claims a filter answers it, with all its claimed
//!   filters of the query at once. Unclaimed filters are served by core. A claimed
//!   filter the plugin calls an action ([`Plugin::is_action`]) must be alone in its
//!   query and come over `POST /query`.
//! - **Live fan-out contributions**: additive. A plugin publishes relay-made events with
//!   [`Services::bus`] (from [`Plugin::on_event_committed`] or a background task); every
//!   connection delivers them through its own access scope and subscription filters, as
//!   it does stored events, and across relay processes when the bus is Redis.
//! - **Live claimed filters** ([`Plugin::live_condition`]): a claimed filter whose
//!   plugin gives a condition stays live on a WebSocket subscription like core's
//!   filters: new events matching its NIP-01 fields and the condition are delivered
//!   through the reader's scope.
//! - **Counting claimed filters** ([`Plugin::answer_count`]): a NIP-45 `COUNT` whose
//!   filters one plugin claimed is its to answer; otherwise claimed filters are refused.
//! - **Message verbs** ([`Plugin::message_verbs`] / [`Plugin::answer_message`]):
//!   exclusive per verb, first plugin wins; verbs no plugin takes are core's to answer.
//! - **Routes** ([`Plugin::routes`], `routes.rs`), **NIP-11 fields**
//!   ([`Plugin::extend_nip11`]), **background tasks** ([`Plugin::background`]): additive.
//!
//! Which events are conversation messages (they get thread metadata and count as chat):
//! [`buzz_nostr::kinds::is_conversation`]. Every other kind a plugin handles — an
//! artifact revision, say — is stored as an ordinary event and never touches thread
//! metadata or reply counts. A plugin that counts chat, unread state or mentions (the
//! read-state plugin, say) must ask `is_conversation(event.kind)` for every event it
//! sees and ignore the rest: that is how it learns an event is "not a conversation
//! message", whichever plugin owns the kind.

mod admin;
mod manifest;
mod plain_reads;
mod routes;
mod settings;
mod streams;

pub use admin::{AdminPanel, AdminTable};
pub use manifest::{PluginCatalog, PluginEntry, PluginManifest, PluginMigrations};
pub use plain_reads::PlainReads;
pub use routes::{
    BodyStream, DeclaredRoute, PluginRequest, PluginResponse, ResponseStream, Route, RouteAuth,
    RouteBody, RouteHandler, RouteMethod,
};

use crate::access::AccessService;
use crate::clock::Clock;
use crate::community::Community;
use crate::config::Settings;
use crate::ctx::{ConnCtx, WriteCtx};
use crate::error::Reason;
use crate::live::LiveBus;
pub use crate::live::LiveCondition;
pub use crate::store::purge::PurgedEvent;
use crate::store::threads::Placed;
pub use crate::store::GroupRows;
use crate::store::{insert_event, Conn, EventKey, GroupWrites, InsertOutcome, Store};
use crate::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use std::sync::Arc;

/// What a plugin may use. Cheap to clone.
#[derive(Clone)]
pub struct Services {
    pub store: Store,
    /// The relay's key: signs every relay-authored event.
    pub relay_keys: Keys,
    pub clock: Arc<dyn Clock>,
    pub bus: Arc<dyn LiveBus>,
    pub access: Arc<AccessService>,
    /// Shared Redis, when `storage.redis_url` is set. Every operation through it has the
    /// `storage.redis_timeout_ms` deadline and reconnects by itself.
    pub redis: Option<Arc<crate::redis_link::RedisLink>>,
    /// Prefix for every Redis key (`storage.redis_prefix`).
    pub redis_prefix: String,
    pub settings: Arc<Settings>,
    /// Every community this relay serves, in config order.
    pub communities: Arc<[Arc<Community>]>,
    /// This relay's figures (`GET /metrics`); a plugin may count through it.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The NIP-98 replay guard (shared by every process when Redis is configured), for
    /// routes that check NIP-98 themselves with `crate::auth::nip98::verify`.
    pub replay: Arc<dyn crate::replay::ReplayGuard>,
}

/// An event's storage transaction, as an in-transaction hook sees it.
pub struct Tx<'t, 'c> {
    /// The writer's connection, inside the transaction.
    pub conn: &'t mut Conn<'c>,
    pub ctx: &'t WriteCtx,
    /// `events.seq` of the event being ingested, just stored in this transaction: a
    /// hook that keys its rows by it needs no lookup of its own.
    pub seq: i64,
    /// A conversation message's place in its thread, as core just recorded it in its
    /// metadata row (`None` for every other event): a hook needs no read-back of the row.
    pub placed: Option<&'t Placed>,
    /// Relay-signed events stored in this transaction, delivered live after the commit.
    produced: &'t mut Vec<Arc<StoredEvent>>,
    /// The follow-up writes of the event's PostgreSQL insert group, if it is in one.
    group: &'t mut GroupWrites,
}

impl<'t, 'c> Tx<'t, 'c> {
    pub(crate) fn new(
        conn: &'t mut Conn<'c>,
        ctx: &'t WriteCtx,
        seq: i64,
        placed: Option<&'t Placed>,
        produced: &'t mut Vec<Arc<StoredEvent>>,
        group: &'t mut GroupWrites,
    ) -> Self {
        Tx {
            conn,
            ctx,
            seq,
            placed,
            produced,
            group,
        }
    }

    /// When this event is written with others (a PostgreSQL insert group), the
    /// group's rows of type `R`: add this event's to them and they are written once
    /// for the group, after its last member ([`GroupRows`]). `None`: write them now.
    pub fn group_rows<R: GroupRows>(&mut self) -> Option<&mut R> {
        self.group.rows::<R>()
    }

    /// Store a relay-signed event in this transaction (it commits or rolls back with the
    /// event being ingested) and deliver it live after the commit, through every
    /// connection's own access scope.
    pub fn store_relay_event(&mut self, event: Event) -> Result<InsertOutcome, Reason> {
        let channel = event.channel_id().map(str::to_owned);
        let outcome = insert_event(
            self.conn,
            self.ctx.community_id,
            &event,
            channel.as_deref(),
            self.ctx.now_micros,
        )?;
        if matches!(outcome, InsertOutcome::Stored { .. }) {
            self.produced.push(Arc::new(StoredEvent {
                event,
                community_id: self.ctx.community_id,
                channel,
                received_at: self.ctx.now_micros,
            }));
        }
        Ok(outcome)
    }
}

/// A plugin's answer to the filters it claimed.
#[derive(Debug, Clone)]
pub enum QueryAnswer {
    /// Events, in the order the plugin wants them on the wire.
    Events(Vec<Event>),
    /// Stored events of the caller's community by key, in the order the plugin wants
    /// them on the wire: core reads their bodies a page at a time within the answer's
    /// byte bounds, as it reads its own matches (after them), and skips one deleted
    /// meanwhile. What a plugin answering many or large events returns, so no answer is
    /// ever held whole.
    Stored(Vec<EventKey>),
    /// A JSON object (`POST /query` only: actions that answer a document, not events). On WebSocket it is
    /// refused with `CLOSED invalid:` naming the HTTP bridge.
    Object(Value),
}

/// A running plugin, as a contract in three parts; everything has a default, so a plugin
/// implements only what it uses.
///
/// 1. **Declarations** — pure answers about an event, a filter or a verb, with no I/O and
///    no connection context: `name`, `claims_filter`, `is_action`, `refuse_action`,
///    `live_condition`, `accepts_resubmission`, `event_is_independent`, `message_verbs`,
///    `extend_nip11`. Core may ask them at any time and more than once. (What a plugin
///    declares before it runs — reserved kinds, tables, routes, config — is its
///    [`PluginManifest`].)
/// 2. **Hooks** — called as requests and events go through the relay, one naming scheme:
///    `reject_*` may refuse what is about to happen (the first refusal wins),
///    `on_*` follows what happened, `answer_*` answers what this plugin claimed.
/// 3. **Start-up contributions** — `routes` and `background`, taken once when the relay
///    starts.
#[async_trait::async_trait]
pub trait Plugin: Send + Sync + 'static {
    // ---- Declarations: pure, no I/O, asked at any time. ----

    /// The config name (`[plugins.<name>]`), equal to its manifest's `NAME`.
    fn name(&self) -> &'static str;

    /// Claim a filter (usually by its extension fields). Claims are exclusive.
    fn claims_filter(&self, _filter: &Filter) -> bool {
        false
    }

    /// Is this claimed filter an *action* (it starts or advances server-side state and
    /// answers a JSON object, a NIP-AR capture request say)? An action must be the only
    /// filter of its query and is served over `POST /query` only; core refuses anything
    /// else before any plugin runs, so an action never half-happens beside a refusal.
    fn is_action(&self, _filter: &Filter) -> bool {
        false
    }

    /// How core words its refusal of a misplaced action (`why`: not alone, not over
    /// `POST /query`), for plugins whose spec fixes its error codes.
    fn refuse_action(&self, why: String) -> Reason {
        Reason::Invalid(why)
    }

    /// Keep a claimed filter live on a WebSocket subscription: after the answer, new
    /// events that satisfy the filter's NIP-01 fields and the returned condition are
    /// delivered, through the reader's scope like every live event. The condition runs
    /// in process for each candidate event (no I/O). `None` (the default): the filter is
    /// answered once and receives nothing live.
    fn live_condition(&self, _filter: &Filter) -> Option<LiveCondition> {
        None
    }

    /// Should an exact resubmission of `event` — its id already stored in this
    /// community (removed since or not), sent again by its authenticated author — be
    /// answered `duplicate:` (accepted) before any other check? Any plugin saying yes
    /// decides. For kinds whose acceptance is a state change a client must be able to
    /// confirm after a lost `OK` (a compare-and-swap revision), even once the author has
    /// lost access: the author signed the event, so the answer tells them nothing new.
    fn accepts_resubmission(&self, _event: &Event) -> bool {
        false
    }

    /// Whether `event` stays *independent* as far as this plugin is concerned (the word of
    /// [`buzz_nostr::kinds::independent`] and `Store::write_event`): its
    /// [`Plugin::on_event_stored`] keeps to this plugin's own rows (or does nothing) and
    /// reads and changes no other *event's* rows. When every plugin says so and core's
    /// own bookkeeping allows it, the PostgreSQL writer may
    /// insert `event` in one statement with its neighbours in the group commit before
    /// running each event's hooks in submission order, so a hook could otherwise see
    /// the rows of events queued behind its own. Return `false` for kinds whose hook
    /// reads the events or tag tables (to find a current version, say); such an event
    /// is then inserted on its own, in its place in the queue.
    fn event_is_independent(&self, _event: &Event) -> bool {
        true
    }

    /// WebSocket message verbs this plugin serves besides NIP-01's and NIP-45's (NIP-77's
    /// `NEG-OPEN`, `NEG-MSG`, `NEG-CLOSE`, say). The first enabled plugin naming a verb
    /// gets every message of it; core answers verbs no plugin takes (NIP-77's with
    /// `NEG-ERR`, others with a `NOTICE`).
    fn message_verbs(&self) -> &'static [&'static str] {
        &[]
    }

    /// Add this plugin's fields to the NIP-11 document.
    fn extend_nip11(&self, _doc: &mut Map<String, Value>) {}

    // ---- Hooks: `reject_*` may refuse, `on_*` follows what happened, `answer_*`
    // answers what this plugin claimed. ----

    /// Reject an event before it is stored. First rejection wins.
    async fn reject_event(&self, _ctx: &ConnCtx, _event: &Event) -> Result<(), Reason> {
        Ok(())
    }

    /// Keep plugin state in step with a just-stored event, in the same transaction.
    /// An error rolls the event back and becomes the client's answer. May run twice for
    /// one event (the writer reruns a failed batch job by job), so it must only act
    /// through `tx`.
    fn on_event_stored(&self, _tx: &mut Tx<'_, '_>, _event: &StoredEvent) -> Result<(), Reason> {
        Ok(())
    }

    /// Observe a committed event. Never fails the write.
    async fn on_event_committed(&self, _ctx: &ConnCtx, _event: &StoredEvent) {}

    /// Take out this plugin's rows for events the NIP-40 purge is deleting, in the
    /// purge's transaction (core deletes the events after every plugin's hook ran, so
    /// their rows are still readable here). Must be idempotent: on PostgreSQL another
    /// process never gets the same events, but a failed batch is tried again.
    fn on_events_purged(
        &self,
        _conn: &mut Conn<'_>,
        _purged: &[PurgedEvent],
    ) -> Result<(), Reason> {
        Ok(())
    }

    /// Reject a filter before anything is served. First rejection wins.
    fn reject_filter(&self, _ctx: &ConnCtx, _filter: &Filter) -> Result<(), Reason> {
        Ok(())
    }

    /// Answer every filter of one query that this plugin claimed.
    async fn answer_claimed(
        &self,
        _ctx: &ConnCtx,
        _filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        Err(Reason::Internal(anyhow::anyhow!(
            "plugin {} claimed a filter but does not answer",
            self.name()
        )))
    }

    /// NIP-45 `COUNT` of `filters`, every filter of one `COUNT`, all claimed by this
    /// plugin: the number of distinct events they match within the caller's read scope,
    /// `approximate` when the plugin stopped counting at a bound of its own rather than
    /// scan on. `Ok(None)` (the default): core refuses the `COUNT` with `invalid:`.
    async fn answer_count(
        &self,
        _ctx: &ConnCtx,
        _filters: Vec<Filter>,
    ) -> Result<Option<crate::store::Count>, Reason> {
        Ok(None)
    }

    /// Answer one message whose verb is in [`Plugin::message_verbs`]: `message` is the
    /// whole array, verb first; `connection` tells one WebSocket connection from
    /// another (state kept per connection is keyed by it and dropped in
    /// [`Plugin::on_connection_closed`]). Returns the relay messages to send back, in order,
    /// each a JSON array; an `Err` is sent as a `NOTICE`. What it reads goes through the
    /// checks of every read path — `queries`' [`PlainReads::check_plain`] (bounds,
    /// core's anonymous rule, every plugin's `reject_filter`), then the caller's scope from
    /// [`Services::access`] — so the auth rules of REQ hold for it too.
    async fn answer_message(
        &self,
        _ctx: &ConnCtx,
        _connection: u64,
        _message: Vec<Value>,
        _queries: &dyn PlainReads,
    ) -> Result<Vec<Value>, Reason> {
        Err(Reason::Internal(anyhow::anyhow!(
            "plugin {} declares message verbs but does not answer them",
            self.name()
        )))
    }

    /// A WebSocket connection has ended (called for every plugin that declares message
    /// verbs, whether or not the connection sent any).
    fn on_connection_closed(&self, _connection: u64) {}

    // ---- Start-up contributions: taken once when the relay starts. ----

    /// HTTP routes to mount (`routes.rs`).
    fn routes(self: Arc<Self>) -> Vec<Route> {
        Vec::new()
    }

    /// Long-running tasks, started once after the relay is up and aborted when it stops.
    fn background(self: Arc<Self>) -> Vec<BoxFuture<'static, ()>> {
        Vec::new()
    }
}
