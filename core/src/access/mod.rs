//! The one access service. Every read and write path — WebSocket, HTTP bridge, live
//! fan-out and every plugin — asks it; nothing else decides who may see or write what.
//!
//! Core enforces the transport rules (channel-scoped and community-admin data need an
//! authenticated caller who is the event's author); the community's Lua policies
//! (`buzz_policy`) decide everything else from facts loaded here: membership, roles,
//! bans, timeouts, channel metadata. Read decisions are made per channel, once per
//! request (a [`Scope`]), never per row. A policy failure denies (`error: policy
//! failure`). Facts are cached between requests (`cache.rs`) and dropped whenever an
//! access-changing event is stored, here or in another relay process.

mod actions;
mod anonymous;
mod authority;
mod cache;
mod changes;
mod facts;
mod metrics;
mod policies;
mod read;
mod standing;
pub mod unseen;

use crate::clock::Clock;
use crate::community::Community;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::live::LiveBus;
use crate::store::{channel_state, Scope, Store};
use crate::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::kinds::COMMUNITY_ADMIN;
use buzz_policy::{DenyKind, PolicyEngine, Verdict, WriteRequest};
use cache::FactsCache;
use changes::Change;
use facts::Person;
use read::ChannelTable;
use std::sync::Arc;

pub(crate) use actions::classify;
pub use anonymous::{auth_first, Readable, StoredCheck};
pub use authority::Authority;
pub use metrics::{PolicyLoads, PolicyMetrics};
pub use policies::{reload_on_sighup, CommunityPolicies, CommunityScripts};

pub struct AccessService {
    store: Store,
    /// Each community's rulebooks; `None` when `[policies] enabled = false`: only core's
    /// transport rules apply.
    policies: Option<Arc<CommunityPolicies>>,
    clock: Arc<dyn Clock>,
    cache: FactsCache,
    /// Held while a community's channel table is refreshed (see `channels`).
    refreshing: tokio::sync::Mutex<()>,
    /// This service, for work moved onto a blocking thread (`read.rs`).
    me: std::sync::Weak<AccessService>,
    /// Policy verdicts per entry point, registered by the relay's `Metrics`.
    metrics: PolicyMetrics,
    /// Kinds built plugins declare always channel-scoped (`anonymous.rs`).
    plugin_channel_kinds: std::sync::OnceLock<Vec<u32>>,
}

fn verdict(result: Result<Verdict, buzz_policy::PolicyError>) -> Result<(), Reason> {
    match result {
        Ok(Verdict::Allow) => Ok(()),
        Ok(Verdict::Deny { kind, message }) => Err(match kind {
            DenyKind::Invalid => Reason::Invalid(message),
            DenyKind::Restricted => Reason::Restricted(message),
            DenyKind::Blocked => Reason::Blocked(message),
            DenyKind::RateLimited => Reason::RateLimited(message),
            DenyKind::AuthRequired => Reason::AuthRequired(message),
        }),
        Err(err) => Err(Reason::PolicyFailure(err.to_string())),
    }
}

impl AccessService {
    pub fn new(
        store: Store,
        policies: Option<Arc<CommunityPolicies>>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| AccessService {
            store,
            policies,
            clock,
            cache: FactsCache::default(),
            refreshing: tokio::sync::Mutex::new(()),
            me: me.clone(),
            metrics: Default::default(),
            plugin_channel_kinds: std::sync::OnceLock::new(),
        })
    }

    /// Policy verdict counts (allow/deny/error per entry point, rate-limit hits).
    pub fn policy_metrics(&self) -> &PolicyMetrics {
        &self.metrics
    }

    /// Refresh cached facts and decisions for what `stored` changed (nothing when its
    /// kind does not change access). Ingest calls this right after committing, before
    /// answering `OK`.
    pub fn changed(&self, stored: &StoredEvent) {
        for change in Change::of(stored) {
            self.cache.record(change);
        }
    }

    /// Forget every cached fact and decision.
    pub fn invalidate(&self) {
        self.cache.record(Change::All);
    }

    /// Record access-changing events from any relay process (they arrive on the live
    /// bus). Runs until the bus closes.
    pub fn follow(self: &Arc<Self>, bus: &Arc<dyn LiveBus>) {
        let mut events = bus.subscribe();
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let change = match events.recv().await {
                    Ok(event) => Change::of(&event),
                    // Missed events may have included a change: assume any.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => vec![Change::All],
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let Some(access) = me.upgrade() else { return };
                for change in change {
                    access.cache.record(change);
                }
            }
        });
    }

    /// Changes whenever any community's scripts reload; 0 without policies.
    pub fn policy_generation(&self) -> u64 {
        self.policies.as_ref().map_or(0, |p| p.generation())
    }

    /// Load figures of the policy scripts (all zero when policies are disabled).
    pub fn policy_loads(&self) -> PolicyLoads {
        self.policies
            .as_ref()
            .map(|p| p.loads())
            .unwrap_or_default()
    }

    /// Shadow-mode counts of `community`, when it runs a candidate script.
    pub fn shadow_counts(&self, community: &Community) -> Option<buzz_policy::ShadowCounts> {
        self.policies.as_ref()?.shadow_counts(&community.host)
    }

    /// The enforced engine of `community`. Every configured community has one; a missing
    /// one is a bug, and denies.
    fn engine(&self, community: &Community) -> Result<Option<&Arc<PolicyEngine>>, Reason> {
        let Some(policies) = &self.policies else {
            return Ok(None);
        };
        policies.engine(&community.host).map(Some).ok_or_else(|| {
            Reason::PolicyFailure(format!(
                "no policies loaded for community {}",
                community.host
            ))
        })
    }

    /// Everything about `pubkey` in `community`, cached.
    async fn person(
        &self,
        community: &Arc<Community>,
        pubkey: Option<&str>,
    ) -> Result<Arc<Person>, Reason> {
        let Some(pk) = pubkey else {
            return Ok(Arc::new(Person::anonymous()));
        };
        // Read the position before loading: a change during the load leaves the entry
        // stale rather than wrongly fresh.
        let at = self.cache.position();
        if let Some(person) = self.cache.person(community.id, pk) {
            return Ok(person);
        }
        let (c, key) = (community.clone(), pk.to_owned());
        let person = Arc::new(
            self.store
                .read(move |mut conn| facts::person(&mut conn, &c, &key))
                .await?,
        );
        self.cache.put_person(community.id, pk, at, person.clone());
        Ok(person)
    }

    /// The community's channels (not deleted), cached.
    async fn channels(&self, community_id: i64) -> Result<Arc<ChannelTable>, Reason> {
        if let Some(table) = self.cache.channels(community_id) {
            return Ok(table);
        }
        // One refresh per community at a time: after a channel change every reader finds
        // the table stale at once, and all but the first then wait for its result.
        let refreshing = self.refreshing.lock().await;
        if let Some(table) = self.cache.channels(community_id) {
            return Ok(table);
        }
        let at = self.cache.position();
        let table = match self.cache.stale_channels(community_id) {
            Some((stale, cache::Since::Exactly(changes))) => {
                // Only the channels that changed are read again.
                let ids: Vec<String> = changes
                    .into_iter()
                    .filter_map(|c| match c {
                        Change::Channel { community, channel } if community == community_id => {
                            Some(channel)
                        }
                        _ => None,
                    })
                    .collect();
                let changed = self
                    .store
                    .read(move |mut conn| {
                        ids.into_iter()
                            .map(|id| {
                                let row =
                                    channel_state::load_channel(&mut conn, community_id, &id)?;
                                Ok((id, row))
                            })
                            .collect::<Result<Vec<_>, Reason>>()
                    })
                    .await?;
                stale.updated(changed)
            }
            _ => ChannelTable::new(
                self.store
                    .read(move |mut conn| channel_state::live_channels(&mut conn, community_id))
                    .await?,
            ),
        };
        let table = Arc::new(table);
        self.cache.put_channels(community_id, at, table.clone());
        drop(refreshing);
        Ok(table)
    }

    /// May `ctx` write `event`?
    pub async fn check_write(&self, ctx: &ConnCtx, event: &Event) -> Result<(), Reason> {
        let scoped = event.channel_id().is_some() || COMMUNITY_ADMIN.contains(&event.kind);
        if scoped {
            match &ctx.pubkey {
                None => {
                    return Err(Reason::AuthRequired(
                        "channel and community events require authentication".into(),
                    ))
                }
                Some(pk) if *pk != event.pubkey => {
                    return Err(Reason::Restricted(
                        "event author must be the authenticated pubkey".into(),
                    ))
                }
                Some(_) => {}
            }
        }
        let Some(policy) = self.engine(&ctx.community)? else {
            return Ok(());
        };
        let now = self.clock.now_secs();
        let person = self.person(&ctx.community, Some(&event.pubkey)).await?;
        let channel_id = event.channel_id();
        // NIP-29: a member's join is a `duplicate:` whatever the channel's rules (a
        // private channel refuses joins); only a member learns anything from it.
        if event.kind == buzz_nostr::kinds::JOIN
            && channel_id.is_some_and(|ch| person.channels.contains_key(ch))
        {
            return Err(Reason::Duplicate(buzz_nostr::kinds::ALREADY_MEMBER.into()));
        }
        let channel = match channel_id {
            Some(id) => {
                let table = self.channels(ctx.community.id).await?;
                Some(facts::channel_facts(id, table.get(id), now))
            }
            None => None,
        };
        let req = WriteRequest {
            action: classify(event),
            event: facts::event_facts(event),
            actor: person.actor(channel_id),
            channel,
            community: facts::community_facts(&ctx.community),
            now,
        };
        let outcome = verdict(policy.check_write(&req));
        self.metrics.record("can_write", &outcome);
        outcome
    }

    /// May the holder of `scope` receive this live event?
    pub fn can_see(&self, scope: &Scope, event: &StoredEvent) -> bool {
        scope.allows(event, self.clock.now_secs())
    }
}
