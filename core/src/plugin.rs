//! **API boundary** — the plugin API. Plugin crates depend on this module (and the types
//! it names), never on the HTTP or WebSocket internals.
//!
//! A plugin implements [`Plugin`]; every hook has a default, so a plugin implements only
//! what it uses. Plugins are built once at start, in config order, from their
//! `[plugins.<name>]` section by a [`PluginFactory`], and held as `Vec<Arc<dyn Plugin>>`.
//!
//! How each hook group combines:
//! - **Ingest checks** ([`Plugin::check_event`]): all run in order; the first rejection
//!   wins and nothing is stored.
//! - **Storage ownership** ([`Plugin::owns_kind`] / [`Plugin::store_owned`]): exclusive;
//!   the first plugin that owns a kind stores it instead of core.
//! - **In-transaction hooks** ([`Plugin::in_transaction`]): all run inside the event's
//!   storage transaction; any error rolls the event back and is the answer.
//! - **Observers** ([`Plugin::after_commit`]): all run after the commit; they cannot fail
//!   the write (errors are theirs to log).
//! - **Filter checks** ([`Plugin::check_filter`]): all run; the first rejection wins.
//! - **Filter claims** ([`Plugin::claims_filter`] / [`Plugin::answer`]): exclusive; the
//!   first plugin that claims a filter answers it, with all its claimed filters of the
//!   query at once. Unclaimed filters are served by core.
//! - **Live fan-out contributions**: additive. A plugin publishes relay-made events with
//!   [`Services::bus`] (from [`Plugin::after_commit`] or a background task); every
//!   connection delivers them through its own access scope and subscription filters, as
//!   it does stored events, and across relay processes when the bus is Redis.
//! - **Routes, NIP-11 fields, background tasks**: additive.

use crate::access::AccessService;
use crate::clock::Clock;
use crate::config::{PluginSection, Settings};
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::event::{Event, StoredEvent};
use crate::filter::Filter;
use crate::keys::Keys;
use crate::live::LiveBus;
use crate::store::{Conn, InsertOutcome, Store};
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
    /// Shared Redis, when `storage.redis_url` is set.
    pub redis: Option<redis::aio::ConnectionManager>,
    /// Prefix for every Redis key (`storage.redis_prefix`).
    pub redis_prefix: String,
    pub settings: Arc<Settings>,
}

/// Facts available inside the storage transaction.
#[derive(Debug, Clone)]
pub struct WriteCtx {
    pub community_id: i64,
    /// The authenticated pubkey of the writer, if any.
    pub pubkey: Option<String>,
    /// Relay time of the write, microseconds.
    pub now_micros: i64,
}

/// A plugin's answer to the filters it claimed.
#[derive(Debug, Clone)]
pub enum QueryAnswer {
    /// Events, in the order the plugin wants them on the wire.
    Events(Vec<Event>),
    /// A JSON object (HTTP only; e.g. snapshot actions). On WebSocket this is an error.
    Object(Value),
}

/// Builds a plugin from its config section.
pub type PluginFactory =
    fn(section: &PluginSection, services: &Services) -> anyhow::Result<Arc<dyn Plugin>>;

#[async_trait::async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// The config name (`[plugins.<name>]`).
    fn name(&self) -> &'static str;

    /// Add this plugin's fields to the NIP-11 document.
    fn nip11(&self, _doc: &mut Map<String, Value>) {}

    /// Reject an event before it is stored. First rejection wins.
    async fn check_event(&self, _ctx: &ConnCtx, _event: &Event) -> Result<(), Reason> {
        Ok(())
    }

    /// Does this plugin store events of `kind` itself?
    fn owns_kind(&self, _kind: u32) -> bool {
        false
    }

    /// Store an event of an owned kind, inside the writer transaction.
    fn store_owned(
        &self,
        _conn: &mut Conn<'_>,
        _ctx: &WriteCtx,
        event: &Event,
    ) -> Result<InsertOutcome, Reason> {
        Err(Reason::Internal(anyhow::anyhow!(
            "plugin {} owns kind {} but does not store it",
            self.name(),
            event.kind
        )))
    }

    /// Keep plugin state in step with a just-stored event, in the same transaction.
    /// An error rolls the event back and becomes the client's answer.
    fn in_transaction(
        &self,
        _conn: &mut Conn<'_>,
        _ctx: &WriteCtx,
        _event: &StoredEvent,
    ) -> Result<(), Reason> {
        Ok(())
    }

    /// Observe a committed event. Never fails the write.
    async fn after_commit(&self, _ctx: &ConnCtx, _event: &StoredEvent) {}

    /// Reject a filter before anything is served. First rejection wins.
    fn check_filter(&self, _ctx: &ConnCtx, _filter: &Filter) -> Result<(), Reason> {
        Ok(())
    }

    /// Claim a filter (usually by its extension fields). Claims are exclusive.
    fn claims_filter(&self, _filter: &Filter) -> bool {
        false
    }

    /// Answer every filter of one query that this plugin claimed.
    async fn answer(&self, _ctx: &ConnCtx, _filters: Vec<Filter>) -> Result<QueryAnswer, Reason> {
        Err(Reason::Internal(anyhow::anyhow!(
            "plugin {} claimed a filter but does not answer",
            self.name()
        )))
    }

    /// Mount HTTP routes. Handlers use [`crate::http::RequestCtx`] to learn the
    /// community and caller.
    fn routes(self: Arc<Self>, _cfg: &mut actix_web::web::ServiceConfig) {}

    /// Long-running tasks, started once after the relay is up.
    fn background(&self) -> Vec<BoxFuture<'static, ()>> {
        Vec::new()
    }
}
