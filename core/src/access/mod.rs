//! The one access service. Every read and write path — WebSocket, HTTP bridge, live
//! fan-out and every plugin — asks it; nothing else decides who may see or write what.
//!
//! Core enforces the transport rules (channel-scoped and community-admin data need an
//! authenticated caller who is the event's author); the community's Lua policies
//! (`buzz_policy`) decide everything else from facts loaded here: membership, roles,
//! bans, timeouts, channel metadata. Read decisions are made per channel, once per
//! request (a [`Scope`]), never per row. A policy failure denies (`error: policy
//! failure`).

mod actions;
mod facts;

use crate::channels::kinds::COMMUNITY_ADMIN;
use crate::clock::Clock;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::event::{Event, StoredEvent};
use crate::filter::Filter;
use crate::store::{ChannelScope, Scope, Store};
use buzz_policy::{DenyKind, PolicyEngine, ReadRequest, Verdict, WriteRequest};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) use actions::classify;

pub struct AccessService {
    store: Store,
    /// `None` when `[policies] enabled = false`: only core's transport rules apply.
    policy: Option<Arc<PolicyEngine>>,
    clock: Arc<dyn Clock>,
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
    pub fn new(store: Store, policy: Option<Arc<PolicyEngine>>, clock: Arc<dyn Clock>) -> Self {
        AccessService {
            store,
            policy,
            clock,
        }
    }

    /// The policy engine's generation (changes on every reload); 0 without policies.
    pub fn policy_generation(&self) -> u64 {
        self.policy.as_ref().map_or(0, |p| p.generation())
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
        let Some(policy) = self.policy.clone() else {
            return Ok(());
        };
        let community = ctx.community.clone();
        let event = event.clone();
        let now = self.clock.now_secs();
        self.store
            .read(move |mut conn| {
                let person = facts::person(&mut conn, &community, Some(&event.pubkey), now)?;
                let channel_id = event.channel_id();
                let channel = match channel_id {
                    Some(id) => Some(facts::channel_facts(
                        id,
                        facts::channel(&mut conn, community.id, id)?.as_ref(),
                        now,
                    )),
                    None => None,
                };
                let req = WriteRequest {
                    action: classify(&event),
                    event: facts::event_facts(&event),
                    actor: person.actor(channel_id),
                    channel,
                    community: facts::community_facts(&community),
                    now,
                };
                verdict(policy.check_write(&req))
            })
            .await
    }

    /// May `ctx` run this filter at all? A filter that names channels needs
    /// authentication (the caller learns nothing about the channels themselves).
    pub async fn check_filter(&self, ctx: &ConnCtx, filter: &Filter) -> Result<(), Reason> {
        if filter.channels().is_some() && !ctx.is_authenticated() {
            return Err(Reason::AuthRequired(
                "channel-scoped data requires authentication".into(),
            ));
        }
        Ok(())
    }

    /// The rows `ctx` may read, decided once per request: community-wide rows, and the
    /// channels whose read policy allows the caller.
    pub async fn read_scope(&self, ctx: &ConnCtx) -> Result<Scope, Reason> {
        self.scope_for(ctx, None).await
    }

    /// Like [`Self::read_scope`], evaluating only the `wanted` channels (plugins that
    /// serve one channel use this).
    pub async fn scope_for(
        &self,
        ctx: &ConnCtx,
        wanted: Option<Vec<String>>,
    ) -> Result<Scope, Reason> {
        let community = ctx.community.clone();
        let pubkey = ctx.pubkey.clone();
        let policy = self.policy.clone();
        let now = self.clock.now_secs();
        self.store
            .read(move |mut conn| {
                let person = facts::person(&mut conn, &community, pubkey.as_deref(), now)?;
                let community_wide = community.open || person.member || person.owner;
                if pubkey.is_none() {
                    return Ok(Scope {
                        community_id: community.id,
                        community_wide,
                        channels: ChannelScope::None,
                        expiry: HashMap::new(),
                    });
                }
                let rows = facts::live_channels(&mut conn, community.id, wanted.as_deref(), now)?;
                let mut allowed = Vec::new();
                let mut expiry = HashMap::new();
                for row in rows {
                    let ok = match &policy {
                        None => true,
                        Some(policy) => {
                            let req = ReadRequest {
                                actor: person.actor(Some(&row.id)),
                                channel: facts::channel_facts(&row.id, Some(&row), now),
                                community: facts::community_facts(&community),
                                now,
                            };
                            match verdict(policy.check_read(&req)) {
                                Ok(()) => true,
                                Err(Reason::PolicyFailure(cause)) => {
                                    // Fail closed for this channel, and say why in the log.
                                    tracing::error!(%cause, channel = %row.id, "read policy failed");
                                    false
                                }
                                Err(_) => false,
                            }
                        }
                    };
                    if ok {
                        if let Some(t) = row.expires_at {
                            expiry.insert(row.id.clone(), t);
                        }
                        allowed.push(row.id);
                    }
                }
                Ok(Scope {
                    community_id: community.id,
                    community_wide,
                    channels: ChannelScope::Only(allowed),
                    expiry,
                })
            })
            .await
    }

    /// May the holder of `scope` receive this live event?
    pub fn can_see(&self, scope: &Scope, event: &StoredEvent) -> bool {
        scope.allows(event, self.clock.now_secs())
    }
}
