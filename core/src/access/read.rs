//! The read side of the access service: which channels a caller may read.
//!
//! Reads are decided per channel with the community's `can_read`, never per row. A
//! request that names its channels decides only those; a request over the whole community
//! uses the caller's cached decisions, brought up to date by re-deciding just the
//! channels that changed since (`cache.rs`). So the cost of a read does not grow with
//! the number of channels in the community, only with the changes since the last one.

use super::cache::{Decisions, Since};
use super::changes::Change;
use super::facts::{self, Person};
use super::{verdict, AccessService};
use crate::community::Community;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::store::channel_state::ChannelRow;
use crate::store::{ChannelScope, ChannelSet, Scope};
use buzz_policy::ReadRequest;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A whole decision set is decided afresh this often even without changes, so a script
/// whose `can_read` depends on `req.now` is re-asked.
const REDECIDE_AFTER: Duration = Duration::from_secs(60);

/// From this many channels, a caller's fresh decisions are made on a blocking thread (a
/// fresh decision costs one policy call per channel).
const BLOCKING_DECISIONS_FROM: usize = 1_000;

/// Why a scope is being computed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Refresh {
    /// For a request of the caller's own: decisions older than [`REDECIDE_AFTER`] are
    /// decided afresh.
    Request,
    /// For an open connection, because an access change passed by.
    Live,
}

/// A community's live channel rows, by id.
#[derive(Clone)]
pub(crate) struct ChannelTable {
    by_id: HashMap<String, Arc<ChannelRow>>,
}

impl ChannelTable {
    pub(crate) fn new(rows: Vec<ChannelRow>) -> ChannelTable {
        ChannelTable {
            by_id: rows
                .into_iter()
                .map(|row| (row.id.clone(), Arc::new(row)))
                .collect(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(crate) fn get(&self, id: &str) -> Option<&ChannelRow> {
        self.by_id.get(id).map(Arc::as_ref)
    }

    fn rows(&self) -> impl Iterator<Item = &ChannelRow> {
        self.by_id.values().map(Arc::as_ref)
    }

    /// A copy with these channels replaced (`None`: deleted), sharing the other rows.
    pub(crate) fn updated(&self, changed: Vec<(String, Option<ChannelRow>)>) -> ChannelTable {
        let mut table = self.clone();
        for (id, row) in changed {
            match row.filter(|r| r.deleted_at.is_none()) {
                Some(row) => table.by_id.insert(id, Arc::new(row)),
                None => table.by_id.remove(&id),
            };
        }
        table
    }
}

impl AccessService {
    /// The rows `ctx` may read, decided once per request: community-wide rows, and the
    /// channels whose read policy allows the caller.
    pub async fn read_scope(&self, ctx: &ConnCtx) -> Result<Scope, Reason> {
        self.scope_for(ctx, None).await
    }

    /// [`Self::read_scope`] for an open connection reacting to an access change: the
    /// cached decisions are brought forward by that change however old they are, so one
    /// change re-decides one channel on each connection rather than every channel on
    /// every connection whose decisions passed [`REDECIDE_AFTER`]. (The periodic full
    /// re-decision happens on the caller's own next request.)
    pub async fn live_scope(&self, ctx: &ConnCtx) -> Result<Scope, Reason> {
        self.scope_with(ctx, None, Refresh::Live).await
    }

    /// Like [`Self::read_scope`], deciding only the `wanted` channels (requests and
    /// plugins that name their channels).
    pub async fn scope_for(
        &self,
        ctx: &ConnCtx,
        wanted: Option<Vec<String>>,
    ) -> Result<Scope, Reason> {
        self.scope_with(ctx, wanted, Refresh::Request).await
    }

    async fn scope_with(
        &self,
        ctx: &ConnCtx,
        wanted: Option<Vec<String>>,
        refresh: Refresh,
    ) -> Result<Scope, Reason> {
        let community = &ctx.community;
        let at = self.cache.position();
        let person = self.person(community, ctx.pubkey.as_deref()).await?;
        // A banned member reads nothing, not even community-wide rows (`standing.rs`).
        super::standing::in_good_standing(&person)?;
        let community_wide = community.open || person.member || person.owner;
        let Some(pubkey) = ctx.pubkey.as_deref() else {
            return Ok(Scope {
                community_id: community.id,
                community_wide,
                channels: ChannelScope::None,
                expiry: HashMap::new(),
            });
        };
        let now = self.clock.now_secs();
        let table = self.channels(community.id).await?;
        let (channels, expiry) = match wanted {
            Some(wanted) => {
                let allowed: Vec<&ChannelRow> = wanted
                    .iter()
                    .collect::<HashSet<_>>()
                    .into_iter()
                    .filter_map(|id| table.get(id))
                    .filter(|row| !row.is_gone(now) && self.may_read(&person, community, row, now))
                    .collect();
                let expiry = allowed
                    .iter()
                    .filter_map(|row| Some((row.id.clone(), row.expires_at?)))
                    .collect();
                let set = allowed.into_iter().map(|row| row.id.clone()).collect();
                (set, expiry)
            }
            None => {
                let cached =
                    self.brought_forward(community, pubkey, &person, &table, (at, now), refresh);
                let decisions = match cached {
                    Some(decisions) => decisions,
                    // Deciding a large community afresh costs a policy call per channel:
                    // on a blocking thread, so the connections sharing this worker are
                    // not held up meanwhile.
                    None if table.len() > BLOCKING_DECISIONS_FROM => {
                        let me = self.me.upgrade().ok_or_else(|| {
                            Reason::Unavailable("the access service is shutting down".into())
                        })?;
                        let (community, person, table) =
                            (community.clone(), person.clone(), table.clone());
                        tokio::task::spawn_blocking(move || {
                            me.fresh_decisions(&community, &person, &table, (at, now))
                        })
                        .await
                        .map_err(|e| Reason::Internal(anyhow::anyhow!("deciding reads: {e}")))?
                    }
                    None => self.fresh_decisions(community, &person, &table, (at, now)),
                };
                self.keep_decisions(community.id, pubkey, decisions, now)
            }
        };
        Ok(Scope {
            community_id: community.id,
            community_wide,
            channels: ChannelScope::Only(channels),
            expiry,
        })
    }

    /// The caller's cached decisions brought forward by the changes since (only the
    /// channels they name are re-decided); `None` when they must be decided afresh: none
    /// cached, a policy reload, an unknown change, a change to the caller's own standing,
    /// or (for the caller's own requests) older than [`REDECIDE_AFTER`].
    fn brought_forward(
        &self,
        community: &Community,
        pubkey: &str,
        person: &Person,
        table: &ChannelTable,
        (at, now): (u64, i64),
        refresh: Refresh,
    ) -> Option<Decisions> {
        let generation = self.policy_generation();
        let mut d = self
            .cache
            .take_decisions(community.id, pubkey)
            .filter(|d| {
                d.generation == generation
                    && (refresh == Refresh::Live || d.decided_at.elapsed() < REDECIDE_AFTER)
            })?;
        let Since::Exactly(changes) = self.cache.since(d.at) else {
            return None;
        };
        for change in changes {
            let channel = match change {
                Change::Channel {
                    community: c,
                    channel,
                } if c == community.id => channel,
                Change::Membership {
                    community: c,
                    channel,
                    pubkey: who,
                } if c == community.id && who == pubkey => channel,
                Change::Person {
                    community: c,
                    pubkey: who,
                } if c == community.id && who == pubkey => {
                    return None;
                }
                Change::All => return None,
                _ => continue,
            };
            let row = table.get(&channel).filter(|row| !row.is_gone(now));
            let readable = row.is_some_and(|row| self.may_read(person, community, row, now));
            match row.and_then(|r| r.expires_at).filter(|_| readable) {
                Some(t) => d.expiring.insert(channel.clone(), t),
                None => d.expiring.remove(&channel),
            };
            // Scopes in use keep the version they were given (persistent set).
            if readable != d.allowed.contains(&channel) {
                if readable {
                    d.allowed.insert(channel);
                } else {
                    d.allowed.remove(&channel);
                }
            }
        }
        d.at = at;
        Some(d)
    }

    /// Every channel decided afresh: one policy call each.
    fn fresh_decisions(
        &self,
        community: &Community,
        person: &Person,
        table: &ChannelTable,
        (at, now): (u64, i64),
    ) -> Decisions {
        let generation = self.policy_generation();
        let allowed: Vec<&ChannelRow> = table
            .rows()
            .filter(|row| !row.is_gone(now) && self.may_read(person, community, row, now))
            .collect();
        Decisions {
            at,
            generation,
            decided_at: Instant::now(),
            expiring: allowed
                .iter()
                .filter_map(|row| Some((row.id.clone(), row.expires_at?)))
                .collect(),
            allowed: allowed.into_iter().map(|row| row.id.clone()).collect(),
        }
    }

    /// Drop expired TTL channels (they expire with time, not with a change), keep the
    /// decisions for next time and share their set into the caller's scope.
    fn keep_decisions(
        &self,
        community_id: i64,
        pubkey: &str,
        mut decisions: Decisions,
        now: i64,
    ) -> (ChannelSet, HashMap<String, i64>) {
        let expired: Vec<String> = decisions
            .expiring
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            decisions.allowed.remove(&id);
            decisions.expiring.remove(&id);
        }
        let shared = (decisions.allowed.clone(), decisions.expiring.clone());
        self.cache.put_decisions(community_id, pubkey, decisions);
        shared
    }

    /// One channel's read decision (true without policies).
    pub(super) fn may_read(
        &self,
        person: &Person,
        community: &Community,
        row: &ChannelRow,
        now: i64,
    ) -> bool {
        let policy = match self.engine(community) {
            Ok(Some(policy)) => policy,
            Ok(None) => return true,
            Err(_) => return false,
        };
        let req = ReadRequest {
            actor: person.actor(Some(&row.id)),
            channel: facts::channel_facts(&row.id, Some(row), now),
            community: facts::community_facts(community),
            now,
        };
        let outcome = verdict(policy.check_read(&req));
        self.metrics.record("can_read", &outcome);
        match outcome {
            Ok(()) => true,
            Err(Reason::PolicyFailure(cause)) => {
                // Fail closed for this channel, and say why in the log.
                tracing::error!(%cause, channel = %row.id, "read policy failed");
                false
            }
            Err(_) => false,
        }
    }
}
