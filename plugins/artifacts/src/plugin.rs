//! [`Artifacts`]: the running plugin — which hook does what.

use crate::envelope::{self, Op};
use crate::heads;
use crate::limits::Limits;
use crate::memory::AnswerMemory;
use crate::query::QUERY_KEY;
use crate::{NAME, REMOVAL_KIND, REVISION_KIND};
use buzz_core::access::AccessService;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, QueryAnswer, Services, Tx};
use buzz_core::store::Store;
use buzz_core::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use buzz_nostr::kinds::{AUTHOR_DELETE, MODERATE_REMOVE};
use serde_json::{Map, Value};
use std::sync::Arc;

pub struct Artifacts {
    pub(crate) store: Store,
    /// The one access service: write permission (as for kind 9) and read scopes.
    pub(crate) access: Arc<AccessService>,
    /// Signs the kind-45011 removal markers a move leaves in its source channel.
    relay_keys: Keys,
    pub(crate) limits: Limits,
    /// Bytes this process's artifact answers may hold while being built.
    pub(crate) memory: AnswerMemory,
}

impl Artifacts {
    pub fn new(limits: Limits, services: &Services) -> Artifacts {
        Artifacts {
            store: services.store.clone(),
            access: services.access.clone(),
            relay_keys: services.relay_keys.clone(),
            memory: AnswerMemory::new(limits.answer_memory_bytes),
            limits,
        }
    }

    /// The relay-signed removal a move leaves in `source`: the artifact, the source and
    /// the revision it replaced; nothing about the destination, no content.
    fn removal_marker(&self, d: &str, source: &str, replaced: &str, now_secs: i64) -> Event {
        self.relay_keys.sign(
            REMOVAL_KIND,
            vec![
                vec!["ar".into(), "1".into()],
                vec!["d".into(), d.into()],
                vec!["h".into(), source.into()],
                vec!["reason".into(), "moved".into()],
                vec!["prev".into(), replaced.into()],
            ],
            "",
            now_secs,
        )
    }
}

#[async_trait::async_trait]
impl Plugin for Artifacts {
    fn name(&self) -> &'static str {
        NAME
    }

    /// `"artifacts"`: merged into an object an extension of NIP-AR listed earlier may
    /// have started (its own fields, `snapshot` say, are kept).
    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        let Value::Object(limits) = self.limits.nip11() else {
            return;
        };
        match doc.get_mut(NAME) {
            Some(Value::Object(existing)) => existing.extend(limits),
            _ => {
                doc.insert(NAME.into(), Value::Object(limits));
            }
        }
    }

    async fn reject_event(&self, ctx: &ConnCtx, event: &Event) -> Result<(), Reason> {
        match event.kind {
            REVISION_KIND => {
                let env = envelope::parse(event, &self.limits)?;
                self.check_revision(ctx, event, &env).await
            }
            AUTHOR_DELETE => self.refuse_revision_deletion(ctx, event).await,
            _ => Ok(()),
        }
    }

    /// Resubmitting an accepted revision answers `duplicate:` (accepted) before any
    /// check, even after later revisions or a loss of access: the sender signed it, so
    /// the answer tells them nothing new.
    fn accepts_resubmission(&self, event: &Event) -> bool {
        event.kind == REVISION_KIND
    }

    /// Revisions and removals change the heads in submission order and read the rows
    /// of earlier revisions: each is inserted on its own in PostgreSQL's group commit,
    /// never beside events queued behind it.
    fn event_is_independent(&self, event: &Event) -> bool {
        !matches!(event.kind, REVISION_KIND | MODERATE_REMOVE)
    }

    /// The compare-and-swap on the head, the revision row, the current tags; for a move
    /// the removal marker in the source — all in the revision's transaction. A 9005
    /// removal of a revision redacts it (and retires its artifact if it was current).
    fn on_event_stored(&self, tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
        let event = &stored.event;
        let community = tx.ctx.community_id;
        match event.kind {
            REVISION_KIND => {
                let env = envelope::parse(event, &self.limits)?;
                heads::advance(tx.conn, community, event, &env)?;
                if env.op == Op::Move {
                    let replaced = env.prev.as_deref().unwrap_or_default();
                    // The revision moved away from: current until this transaction.
                    let source = heads::revision(tx.conn, community, replaced)?
                        .ok_or_else(|| {
                            Reason::Internal(anyhow::anyhow!(
                                "artifact {}: head named revision {replaced} without its row",
                                env.d
                            ))
                        })?
                        .channel_id;
                    let marker = self.removal_marker(
                        &env.d,
                        &source,
                        replaced,
                        tx.ctx.now_micros.div_euclid(1_000_000),
                    );
                    tx.store_relay_event(marker)?;
                }
                Ok(())
            }
            MODERATE_REMOVE => match (event.tag_value("e"), stored.channel.as_deref()) {
                (Some(target), Some(channel)) => heads::redact(tx.conn, community, target, channel),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// A plain filter on kind 45010 with a multi-character tag would match every stored
    /// revision, not current state: refused with a pointer to the artifact query.
    fn reject_filter(&self, _ctx: &ConnCtx, filter: &Filter) -> Result<(), Reason> {
        let revisions = filter
            .kinds
            .as_ref()
            .is_some_and(|k| k.contains(&REVISION_KIND));
        if let Some(name) = filter.tags.keys().find(|n| n.chars().count() > 1) {
            if revisions {
                return Err(Reason::invalid(format!(
                    "#{name} on kind {REVISION_KIND} would match every stored revision, not \
                     current state; use {{\"{QUERY_KEY}\":\"current\",\"#{name}\":[..]}}"
                )));
            }
        }
        Ok(())
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        filter.extensions.contains_key(QUERY_KEY)
    }

    async fn answer_claimed(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        Ok(QueryAnswer::Events(self.answer(ctx, filters).await?))
    }
}
