//! Facts → the read-only `req` table an entry point receives.
//!
//! The tables are built by the prelude's `make_*` functions from positional arguments: one
//! host call per table instead of one per field (each host call into a Lua state costs a
//! lock and, with a memory limit, a protected call). Every nested table is a read-only
//! view, so a script that assigns to `req.actor.banned` gets an error instead of changing
//! what the next rule sees.
//!
//! Being read-only, a view can serve many requests: the actor, channel and community
//! views are kept per state, keyed by their facts, and reused while the facts are the
//! same (a busy publisher's every EVENT has the same actor and community). Only the event
//! and the `req` table itself are new each time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;

use mlua::{Function, Table, Variadic};

use crate::facts::{ActorFacts, ChannelFacts, CommunityFacts, ReadRequest, WriteRequest};

/// Views kept per kind of facts; a full cache starts over (bounded memory, no ordering).
const KEPT_VIEWS: usize = 128;

/// The prelude's constructors and the views already made in this state.
pub(crate) struct RequestViews {
    make_write_req: Function,
    make_read_req: Function,
    make_actor: Function,
    make_channel: Function,
    make_community: Function,
    actors: RefCell<HashMap<ActorFacts, Table>>,
    channels: RefCell<HashMap<ChannelFacts, Table>>,
    communities: RefCell<HashMap<CommunityFacts, Table>>,
}

impl RequestViews {
    /// The constructors of the prelude's export table.
    pub(crate) fn from_prelude(prelude: &Table) -> mlua::Result<RequestViews> {
        Ok(RequestViews {
            make_write_req: prelude.raw_get("make_write_req")?,
            make_read_req: prelude.raw_get("make_read_req")?,
            make_actor: prelude.raw_get("make_actor")?,
            make_channel: prelude.raw_get("make_channel")?,
            make_community: prelude.raw_get("make_community")?,
            actors: RefCell::default(),
            channels: RefCell::default(),
            communities: RefCell::default(),
        })
    }

    /// Drop every kept view (they count against the state's memory limit).
    pub(crate) fn forget(&self) {
        self.actors.borrow_mut().clear();
        self.channels.borrow_mut().clear();
        self.communities.borrow_mut().clear();
    }

    /// `req` for `moderate` and `can_write`. `tags_of` answers the event's tags (see
    /// [`tags_of`]); the prelude calls it the first time a script reads `req.event.tags`,
    /// so an event's tags cost nothing to a script that never looks at them — 2,000 `p`
    /// tags were most of a note's check.
    pub(crate) fn write_req(&self, req: &WriteRequest, tags_of: &Function) -> mlua::Result<Table> {
        let e = &req.event;
        let channel = req.channel.as_ref().map(|c| self.channel(c)).transpose()?;
        self.make_write_req.call((
            req.action.as_str(),
            req.now,
            e.id.as_str(),
            e.pubkey.as_str(),
            e.kind,
            e.created_at,
            e.content.as_str(),
            self.actor(&req.actor)?,
            channel,
            self.community(&req.community)?,
            tags_of,
        ))
    }

    /// `req` for `can_read`: `action` is `"read"`, there is no `event`.
    pub(crate) fn read_req(&self, req: &ReadRequest) -> mlua::Result<Table> {
        self.make_read_req.call((
            req.now,
            self.actor(&req.actor)?,
            self.channel(&req.channel)?,
            self.community(&req.community)?,
        ))
    }

    fn actor(&self, a: &ActorFacts) -> mlua::Result<Table> {
        kept(&self.actors, a, || {
            self.make_actor.call((
                a.pubkey.as_deref(),
                a.community_owner,
                a.community_member,
                a.channel_role.as_deref(),
                a.channel_joined_at,
                a.banned,
                a.ban_reason.as_deref(),
                a.timeout_until,
            ))
        })
    }

    fn channel(&self, c: &ChannelFacts) -> mlua::Result<Table> {
        kept(&self.channels, c, || {
            self.make_channel.call((
                c.id.as_str(),
                c.exists,
                c.name.as_str(),
                c.private,
                c.archived,
                c.channel_type.as_str(),
                c.deleted,
            ))
        })
    }

    fn community(&self, c: &CommunityFacts) -> mlua::Result<Table> {
        kept(&self.communities, c, || {
            self.make_community.call((c.host.as_str(), c.open))
        })
    }
}

/// What the prelude's `tags_of` returns: each tag's length ("2,4"), then every value.
pub(crate) fn tags_of(tags: &[Vec<String>]) -> (String, Variadic<&str>) {
    let shape = tags
        .iter()
        .map(|tag| tag.len().to_string())
        .collect::<Vec<_>>()
        .join(",");
    (shape, tags.iter().flatten().map(String::as_str).collect())
}

/// The view kept for `facts`, or a new one from `make` (then kept).
fn kept<K: Eq + Hash + Clone>(
    cache: &RefCell<HashMap<K, Table>>,
    facts: &K,
    make: impl FnOnce() -> mlua::Result<Table>,
) -> mlua::Result<Table> {
    if let Some(view) = cache.borrow().get(facts) {
        return Ok(view.clone());
    }
    let view = make()?;
    let mut cache = cache.borrow_mut();
    if cache.len() >= KEPT_VIEWS {
        cache.clear();
    }
    cache.insert(facts.clone(), view.clone());
    Ok(view)
}
