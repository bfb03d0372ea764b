//! Facts → the read-only `req` table an entry point receives.
//!
//! The tables are built by the prelude's `make_write_req` / `make_read_req` from positional
//! arguments: one host call per request instead of one per field (each host call into a
//! Lua state costs a lock and, with a memory limit, a protected call). Every nested table is
//! a read-only view, so a script that assigns to `req.actor.banned` gets an error instead of
//! changing what the next rule sees.

use mlua::{Function, Table, Variadic};

use crate::facts::{ReadRequest, WriteRequest};

/// `req` for `moderate` and `can_write`.
pub(crate) fn write_req(make: &Function, req: &WriteRequest) -> mlua::Result<Table> {
    let (e, a, c) = (&req.event, &req.actor, req.channel.as_ref());
    let shape = e
        .tags
        .iter()
        .map(|tag| tag.len().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let values: Variadic<&str> = e.tags.iter().flatten().map(String::as_str).collect();
    make.call((
        req.action.as_str(),
        req.now,
        e.id.as_str(),
        e.pubkey.as_str(),
        e.kind,
        e.created_at,
        e.content.as_str(),
        a.pubkey.as_deref(),
        a.community_owner,
        a.community_member,
        a.channel_role.as_deref(),
        a.channel_joined_at,
        a.banned,
        a.ban_reason.as_deref(),
        a.timeout_until,
        (
            c.is_some(),
            c.map(|c| c.id.as_str()),
            c.map(|c| c.exists),
            c.map(|c| c.name.as_str()),
            c.map(|c| c.private),
            c.map(|c| c.archived),
            c.map(|c| c.channel_type.as_str()),
            c.map(|c| c.deleted),
            req.community.host.as_str(),
            req.community.open,
            shape.as_str(),
            values,
        ),
    ))
}

/// `req` for `can_read`: `action` is `"read"`, there is no `event`.
pub(crate) fn read_req(make: &Function, req: &ReadRequest) -> mlua::Result<Table> {
    let (a, c) = (&req.actor, &req.channel);
    make.call((
        req.now,
        a.pubkey.as_deref(),
        a.community_owner,
        a.community_member,
        a.channel_role.as_deref(),
        a.channel_joined_at,
        a.banned,
        a.ban_reason.as_deref(),
        a.timeout_until,
        c.id.as_str(),
        c.exists,
        c.name.as_str(),
        c.private,
        c.archived,
        c.channel_type.as_str(),
        (c.deleted, req.community.host.as_str(), req.community.open),
    ))
}
