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

    /// Like [`Self::read_scope`], deciding only the `wanted` channels (requests and
    /// plugins that name their channels).
    pub async fn scope_for(
        &self,
        ctx: &ConnCtx,
        wanted: Option<Vec<String>>,
    ) -> Result<Scope, Reason> {
        let community = &ctx.community;
        let at = self.cache.position();
        let person = self.person(community, ctx.pubkey.as_deref()).await?;
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
                let (allowed, expiring) =
                    self.decisions(community, pubkey, &person, &table, at, now);
                (ChannelSet::from(allowed), expiring)
            }
        };
        Ok(Scope {
            community_id: community.id,
            community_wide,
            channels: ChannelScope::Only(channels),
            expiry,
        })
    }

    /// The caller's decisions over every channel: cached ones brought forward by the
    /// changes since (only the channels they name are re-decided), or all decided afresh
    /// after a policy reload, an unknown change, a change to the caller's own standing,
    /// or [`REDECIDE_AFTER`].
    fn decisions(
        &self,
        community: &Community,
        pubkey: &str,
        person: &Person,
        table: &ChannelTable,
        at: u64,
        now: i64,
    ) -> (Arc<HashSet<String>>, HashMap<String, i64>) {
        let generation = self.policy_generation();
        let cached = self
            .cache
            .take_decisions(community.id, pubkey)
            .filter(|d| d.generation == generation && d.decided_at.elapsed() < REDECIDE_AFTER);
        let brought_forward = cached.and_then(|mut d| {
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
                // The set may be shared with scopes in use: copy it only for a real change.
                if readable != d.allowed.contains(&channel) {
                    let allowed = Arc::make_mut(&mut d.allowed);
                    if readable {
                        allowed.insert(channel);
                    } else {
                        allowed.remove(&channel);
                    }
                }
            }
            d.at = at;
            Some(d)
        });
        let mut decisions = brought_forward.unwrap_or_else(|| {
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
                allowed: Arc::new(allowed.into_iter().map(|row| row.id.clone()).collect()),
            }
        });
        // TTL channels expire with time, not with a change: drop the expired ones (the
        // set is copied only when one has).
        let expired: Vec<String> = decisions
            .expiring
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| id.clone())
            .collect();
        if !expired.is_empty() {
            let allowed = Arc::make_mut(&mut decisions.allowed);
            for id in expired {
                allowed.remove(&id);
                decisions.expiring.remove(&id);
            }
        }
        let shared = (decisions.allowed.clone(), decisions.expiring.clone());
        self.cache.put_decisions(community.id, pubkey, decisions);
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
