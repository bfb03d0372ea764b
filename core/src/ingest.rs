//! The one ingest pipeline. WebSocket `EVENT` and `POST /events` both call
//! [`Ingest::submit`]; nothing else writes client events.
//!
//! Order, cheapest refusal first: shape/size/time/id/signature → (an exact resend a
//! plugin accepts as already done, `Plugin::accepts_resubmission`: `duplicate:`) → protocol and channel
//! structure rules → access (policies) → plugin checks → (ephemeral: fan out and stop)
//! → one storage transaction (core stores; channel, community and thread state incl.
//! NIP-09 deletion; plugin in-transaction hooks) → after commit: live fan-out (the
//! event, then relay-signed events the transaction produced), then observers.

use crate::channels;
use crate::ctx::{ConnCtx, WriteCtx};
use crate::error::Reason;
use crate::metrics::Ingested;
use crate::plugin::{Plugin, Services, Tx};
use crate::store::{InsertOutcome, QueuedWrite};
use crate::stored::StoredEvent;
use buzz_nostr::event::{Event, EventLimits, KindClass};
use buzz_nostr::kinds::GROUP_STATE;
use std::sync::Arc;

/// A queued storage transaction's answer: the outcome and the relay-signed events it made.
type Stored = QueuedWrite<(InsertOutcome, Vec<Arc<StoredEvent>>)>;

/// An event that passed [`CheckedEvent::check`] (shape, size, id, signature): what
/// [`Ingest::queue_import`] takes.
pub struct CheckedEvent(Event);

impl CheckedEvent {
    /// An import's first checks, pure CPU (any thread): shape, size, id, signature;
    /// any age (history), but not further in the future than the clock skew.
    pub fn check(limits: &EventLimits, event: Event, now_secs: i64) -> Result<Self, Reason> {
        limits.check_history(&event, now_secs)?;
        Ok(CheckedEvent(event))
    }

    pub fn event(&self) -> &Event {
        &self.0
    }
}

/// An imported event on its way: answered at once, or its write queued.
pub enum PendingImport {
    Answered(Accepted),
    Queued {
        stored: Arc<StoredEvent>,
        write: Stored,
    },
}

/// NIP-40: an event whose `expiration` has passed is dropped on arrival (a malformed tag
/// is refused too: the relay could not honour it).
fn refuse_expired(event: &Event, now: i64) -> Result<(), Reason> {
    match event.expiration()? {
        Some(at) if at <= now => Err(Reason::invalid(format!(
            "this event expired at {at} (NIP-40 expiration tag); it is not stored"
        ))),
        _ => Ok(()),
    }
}

/// Outcome of an accepted event: the text for `OK true` (empty, or `duplicate: …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub message: String,
}

impl Accepted {
    /// The metrics' outcome label: an `OK true` with a message is a duplicate.
    fn counted_as(&self) -> Ingested {
        if self.message.is_empty() {
            Ingested::Accepted
        } else {
            Ingested::Duplicate
        }
    }
}

pub struct Ingest {
    services: Services,
    plugins: Arc<[Arc<dyn Plugin>]>,
    limits: EventLimits,
    /// Kinds only the relay itself authors: core's NIP-29 group state and every kind a
    /// built plugin reserves. Clients' copies are refused on every transport.
    relay_authored: Vec<u32>,
}

impl Ingest {
    /// `reserved_kinds`: the kinds built plugins reserve (see `PluginManifest`).
    pub fn new(
        services: Services,
        plugins: Arc<[Arc<dyn Plugin>]>,
        reserved_kinds: Vec<u32>,
    ) -> Self {
        let l = &services.settings.limits;
        let limits = EventLimits {
            max_content_bytes: l.max_content_bytes,
            max_tags: l.max_event_tags,
            max_tag_values: l.max_tag_values,
            max_clock_skew_secs: l.max_clock_skew_secs,
        };
        let mut relay_authored = GROUP_STATE.to_vec();
        relay_authored.extend(reserved_kinds);
        Ingest {
            services,
            plugins,
            limits,
            relay_authored,
        }
    }

    pub fn limits(&self) -> EventLimits {
        self.limits
    }

    /// Validate, authorize and store `event` for `ctx`. `Ok` means durable (or, for
    /// ephemeral kinds, delivered to live subscribers).
    pub async fn submit(&self, ctx: &ConnCtx, event: Event) -> Result<Accepted, Reason> {
        let started = std::time::Instant::now();
        let outcome = self.submit_checked(ctx, event, true).await;
        self.services
            .metrics
            .ingested(started, outcome.as_ref().map(Accepted::counted_as));
        outcome
    }

    /// Store a community moderation event that the caller was authorized for outside the
    /// access service (NIP-86: the relay signs it for an owner it verified; `ctx.pubkey`
    /// is that owner, recorded as the sanction's author). Everything else — shape,
    /// protocol, plugin checks, the transaction, fan-out, cache updates — is the same path
    /// as an owner's own event.
    pub(crate) async fn submit_authorized(
        &self,
        ctx: &ConnCtx,
        event: Event,
    ) -> Result<Accepted, Reason> {
        let started = std::time::Instant::now();
        let outcome = self.submit_checked(ctx, event, false).await;
        self.services
            .metrics
            .ingested(started, outcome.as_ref().map(Accepted::counted_as));
        outcome
    }

    async fn submit_checked(
        &self,
        ctx: &ConnCtx,
        event: Event,
        check_access: bool,
    ) -> Result<Accepted, Reason> {
        let now = self.services.clock.now_micros();
        self.limits.check(&event, now.div_euclid(1_000_000))?;
        refuse_expired(&event, now.div_euclid(1_000_000))?;
        if self.is_resubmission(ctx, &event).await? {
            return Ok(Accepted {
                message: "duplicate: already have this event".into(),
            });
        }
        self.check_protocol(&event)?;
        if check_access {
            self.services.access.check_write(ctx, &event).await?;
        }
        self.refuse_expiring_overflow(ctx, &event, now.div_euclid(1_000_000))
            .await?;
        for plugin in self.plugins.iter() {
            if let Err(reason) = plugin.reject_event(ctx, &event).await {
                self.services
                    .metrics
                    .plugin_refused(plugin.name(), "check_event");
                return Err(reason);
            }
        }
        if !check_access {
            return self.commit(ctx, event, now).await;
        }
        // What the author cannot read answers like what does not exist.
        crate::access::unseen::refuse_unreadable(
            &self.services.store,
            &self.services.access,
            ctx,
            &event,
        )
        .await?;
        self.commit(ctx, event, now).await
    }

    /// `limits.max_expiring_bytes_per_pubkey`: an expiring event whose bytes would take
    /// its author's unexpired expiring events in this community past the bound is
    /// refused, so a purge interval cannot be filled with expiring bulk. Read before
    /// the write: concurrent events of one author may pass it by what they hold together.
    async fn refuse_expiring_overflow(
        &self,
        ctx: &ConnCtx,
        event: &Event,
        now_secs: i64,
    ) -> Result<(), Reason> {
        let bound = self.services.settings.limits.max_expiring_bytes_per_pubkey;
        if bound == 0 || event.expiration()?.is_none() {
            return Ok(());
        }
        let tags = serde_json::to_string(&event.tags)
            .map_err(|err| Reason::Internal(anyhow::anyhow!("tags as JSON: {err}")))?;
        let own = (event.content.len() + tags.len()) as u64;
        let (community, pubkey) = (ctx.community_id(), event.pubkey.clone());
        let held = self
            .services
            .store
            .read(move |mut conn| {
                crate::store::purge::expiring_bytes(&mut conn, community, &pubkey, now_secs)
            })
            .await?;
        if u64::try_from(held).unwrap_or(0).saturating_add(own) > bound {
            return Err(Reason::RateLimited(format!(
                "this author already holds {held} bytes in events that have not expired; \
                 this one ({own} bytes) would pass limits.max_expiring_bytes_per_pubkey \
                 ({bound})"
            )));
        }
        Ok(())
    }

    /// Store (or, ephemeral, only fan out) an event that passed every check.
    async fn commit(&self, ctx: &ConnCtx, event: Event, now: i64) -> Result<Accepted, Reason> {
        let stored = Arc::new(StoredEvent {
            channel: event.channel_id().map(str::to_owned),
            event,
            community_id: ctx.community_id(),
            received_at: now,
        });
        if stored.event.class() == KindClass::Ephemeral {
            self.services.bus.publish(stored).await?;
            return Ok(Accepted {
                message: String::new(),
            });
        }

        // Fail closed before committing: with a shared bus that is down (Redis stalled
        // or lost), a stored event would reach no other process's subscribers.
        self.services.bus.ready().await?;
        let (outcome, relay_events) = self.store(ctx, stored.clone(), false).await?.await?;
        self.settle(ctx, &stored, outcome, relay_events).await
    }

    /// After the commit: the answer for `outcome`; for a stored event the access cache,
    /// live fan-out (the event, then the relay-signed events its transaction made) and
    /// observers.
    async fn settle(
        &self,
        ctx: &ConnCtx,
        stored: &Arc<StoredEvent>,
        outcome: InsertOutcome,
        relay_events: Vec<Arc<StoredEvent>>,
    ) -> Result<Accepted, Reason> {
        match outcome {
            InsertOutcome::Stored { .. } => {}
            InsertOutcome::Duplicate => {
                return Ok(Accepted {
                    message: "duplicate: already have this event".into(),
                })
            }
            InsertOutcome::Deleted => return Err(Reason::Blocked("this event was deleted".into())),
            InsertOutcome::Superseded => {
                return Err(Reason::Duplicate(
                    "a newer version of this event is already stored".into(),
                ))
            }
        }

        // Before `OK`: the author's next request must see the change.
        self.services.access.changed(stored);
        let mut fan_out = Ok(());
        for event in std::iter::once(stored).chain(relay_events.iter()) {
            if let Err(err) = self.services.bus.publish(event.clone()).await {
                tracing::error!(error = %err, id = %event.event.id, "live fan-out failed");
                fan_out = fan_out.and(Err(err));
            }
        }
        for plugin in self.plugins.iter() {
            plugin.on_event_committed(ctx, stored).await;
        }
        // The event is durable, but it was not delivered live (the bus failed between
        // `ready` and `publish`): not acknowledged as accepted. The author's retry is
        // answered `duplicate:` (accepted), so nothing is lost for them.
        fan_out?;
        Ok(Accepted {
            message: String::new(),
        })
    }

    /// Whether core and every plugin vouch that storing `event` changes no other event's
    /// rows and reads none but those it names (`Store::write_event`).
    fn independent(&self, event: &Event) -> bool {
        buzz_nostr::kinds::independent(event)
            && self
                .plugins
                .iter()
                .all(|plugin| plugin.event_is_independent(event))
    }

    /// Imports: whether `event`'s checks before the transaction may read what earlier
    /// events of the file write, so every earlier write must have committed before it is
    /// checked. Without access checks core's own are pure except a deletion's (it looks
    /// at its targets); a plugin whose hook reads other events' rows
    /// (`event_is_independent` false) checks them beforehand too. Everything else —
    /// channel creations, joins, member changes — takes effect in the transaction, in
    /// queue order, and needs no wait.
    pub fn import_waits_for_earlier(&self, event: &Event) -> bool {
        event.kind == buzz_nostr::kinds::AUTHOR_DELETE
            || self
                .plugins
                .iter()
                .any(|plugin| !plugin.event_is_independent(event))
    }

    /// Is `kind` one the relay authors (core's group state, plugins' reserved kinds)?
    /// An import skips them: the relay derives its own from the events they describe.
    pub fn is_relay_authored(&self, kind: u32) -> bool {
        self.relay_authored.contains(&kind)
    }

    /// The community owner's import of one event: this pipeline's checks except access
    /// (no policy is consulted: the owner vouches for the file), then the write queued
    /// behind every earlier one, so state is derived in file order. `ctx.pubkey` is the
    /// event's author, as if the author had sent it. [`Ingest::settle_import`] waits
    /// for the commit and does what follows it.
    pub async fn queue_import(
        &self,
        ctx: &ConnCtx,
        checked: CheckedEvent,
    ) -> Result<PendingImport, Reason> {
        let event = checked.0;
        let now = self.services.clock.now_micros();
        refuse_expired(&event, now.div_euclid(1_000_000))?;
        if self.is_resubmission(ctx, &event).await? {
            return Ok(PendingImport::Answered(Accepted {
                message: "duplicate: already have this event".into(),
            }));
        }
        self.check_protocol(&event)?;
        for plugin in self.plugins.iter() {
            plugin.reject_event(ctx, &event).await?;
        }
        if event.class() == KindClass::Ephemeral {
            return Err(Reason::invalid("ephemeral events are not stored"));
        }
        let stored = Arc::new(StoredEvent {
            channel: event.channel_id().map(str::to_owned),
            event,
            community_id: ctx.community_id(),
            received_at: now,
        });
        self.services.bus.ready().await?;
        let write = self.store(ctx, stored.clone(), true).await?;
        Ok(PendingImport::Queued { stored, write })
    }

    /// Wait for an import's commit, then the same steps as any stored event (access
    /// cache, live fan-out, observers).
    pub async fn settle_import(
        &self,
        ctx: &ConnCtx,
        pending: PendingImport,
    ) -> Result<Accepted, Reason> {
        match pending {
            PendingImport::Answered(accepted) => Ok(accepted),
            PendingImport::Queued { stored, write } => {
                let (outcome, relay_events) = write.await?;
                self.settle(ctx, &stored, outcome, relay_events).await
            }
        }
    }

    /// Is `event` an exact resubmission a plugin wants answered as accepted before any
    /// other check ([`Plugin::accepts_resubmission`])? Only its authenticated author's:
    /// anyone else goes through every check as usual.
    async fn is_resubmission(&self, ctx: &ConnCtx, event: &Event) -> Result<bool, Reason> {
        if ctx.pubkey.as_deref() != Some(event.pubkey.as_str())
            || !self.plugins.iter().any(|p| p.accepts_resubmission(event))
        {
            return Ok(false);
        }
        let (community, id) = (ctx.community_id(), event.id.clone());
        self.services
            .store
            .read(move |mut conn| crate::store::event_known(&mut conn, community, &id))
            .await
    }

    /// Protocol rules core enforces for every event.
    fn check_protocol(&self, event: &Event) -> Result<(), Reason> {
        if event.kind == buzz_nostr::nip42::AUTH_KIND {
            return Err(Reason::invalid(
                "kind 22242 is only accepted in AUTH messages",
            ));
        }
        if self.relay_authored.contains(&event.kind) {
            return Err(Reason::invalid(format!(
                "kind {} is authored by the relay only",
                event.kind
            )));
        }
        if event.tag_values("h").nth(1).is_some() {
            return Err(Reason::invalid("an event carries at most one h tag"));
        }
        channels::validate::check(event)
    }

    /// One storage transaction: store, channel/community/thread state (NIP-09 deletion
    /// included), in-transaction hooks. Returns once it is queued (behind every write
    /// queued before it); the write's answer is the outcome and the relay-signed events
    /// the transaction produced (core's group state, then the plugins').
    async fn store(
        &self,
        ctx: &ConnCtx,
        stored: Arc<StoredEvent>,
        imported: bool,
    ) -> Result<Stored, Reason> {
        let plugins = self.plugins.clone();
        let relay_keys = self.services.relay_keys.clone();
        let wctx = WriteCtx {
            community_id: ctx.community_id(),
            pubkey: ctx.pubkey.clone(),
            now_micros: stored.received_at,
            imported,
        };
        // Grouped with its neighbours on PostgreSQL only when neither core nor any
        // plugin reads or changes other events' rows for it (`Store::write_event`).
        let independent = self.independent(&stored.event);
        self.services
            .store
            .queue_event(stored.clone(), independent, move |conn, outcome, writes| {
                let InsertOutcome::Stored { seq } = outcome else {
                    return Ok((outcome, Vec::new()));
                };
                let channels::Applied {
                    mut produced,
                    placed,
                } = channels::apply(conn, writes, &wctx, &stored, &relay_keys)?;
                let mut tx = Tx::new(conn, &wctx, seq, placed.as_ref(), &mut produced, writes);
                for plugin in plugins.iter() {
                    plugin.on_event_stored(&mut tx, &stored)?;
                }
                Ok((outcome, produced))
            })
            .await
    }
}
