//! The one access service. Every read and write path — WebSocket, HTTP bridge, live
//! fan-out and every plugin — asks it; nothing else decides who may see or write what.
//!
//! Rule today: channel-scoped data (events with an `h` tag) needs an authenticated
//! caller, and a channel-scoped write must be authored by the authenticated pubkey.
//! Community-wide events are public within their community. Channel membership and the
//! Lua policies plug in here.

use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::event::{Event, StoredEvent};
use crate::filter::Filter;
use crate::store::{ChannelScope, Scope};

#[derive(Debug, Default)]
pub struct AccessService {}

impl AccessService {
    pub fn new() -> Self {
        AccessService {}
    }

    /// May `ctx` write `event`?
    pub async fn check_write(&self, ctx: &ConnCtx, event: &Event) -> Result<(), Reason> {
        if event.channel_id().is_none() {
            return Ok(());
        }
        match &ctx.pubkey {
            None => Err(Reason::AuthRequired(
                "channel-scoped events require authentication".into(),
            )),
            Some(pk) if *pk != event.pubkey => Err(Reason::Restricted(
                "event author must be the authenticated pubkey".into(),
            )),
            Some(_) => Ok(()),
        }
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

    /// The rows `ctx` may read, decided once per request (not per row).
    pub async fn read_scope(&self, ctx: &ConnCtx) -> Result<Scope, Reason> {
        Ok(Scope {
            community_id: ctx.community_id(),
            channels: if ctx.is_authenticated() {
                ChannelScope::All
            } else {
                ChannelScope::None
            },
        })
    }

    /// May `ctx` receive this live event? `scope` is the caller's [`Self::read_scope`].
    pub fn can_see(&self, scope: &Scope, event: &StoredEvent) -> bool {
        if event.community_id != scope.community_id {
            return false;
        }
        match (event.event.channel_id(), &scope.channels) {
            (None, _) => true,
            (Some(_), ChannelScope::All) => true,
            (Some(_), ChannelScope::None) => false,
            (Some(ch), ChannelScope::Only(list)) => list.iter().any(|c| c == ch),
        }
    }
}
