//! Relay-signed NIP-29 group state: 39000 (metadata), 39001 (admins), 39002 (members),
//! addressable by `d` = channel id, regenerated in the transaction of every change and
//! stored scoped to the channel (so only its readers see them).

use crate::error::Reason;
use crate::store::channel_state::{lock_channel, members};
use crate::store::{replace_relay_event, Conn};
use crate::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::kinds::{GROUP_ADMINS, GROUP_MEMBERS, GROUP_METADATA};
use std::sync::Arc;

/// Which documents a change touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    Metadata,
    Members,
    All,
}

/// Rebuild and store the affected documents; returns them for live fan-out.
pub fn refresh(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
    keys: &Keys,
    now_micros: i64,
    changed: Changed,
) -> Result<Vec<Arc<StoredEvent>>, Reason> {
    let now = now_micros.div_euclid(1_000_000);
    // Locked before the member list is read: see `lock_channel`.
    let Some(channel) = lock_channel(conn, community_id, channel_id)? else {
        return Ok(Vec::new());
    };
    let d = vec!["d".to_owned(), channel_id.to_owned()];
    let mut docs: Vec<Event> = Vec::new();
    if matches!(changed, Changed::Metadata | Changed::All) {
        let mut tags = vec![d.clone()];
        // Unnamed until a 9002 names it (NIP-29 needs no name to create).
        if !channel.name.is_empty() {
            tags.push(vec!["name".into(), channel.name.clone()]);
        }
        if !channel.about.is_empty() {
            tags.push(vec!["about".into(), channel.about.clone()]);
        }
        tags.push(vec![
            if channel.private { "private" } else { "public" }.into()
        ]);
        tags.push(vec![if channel.private { "closed" } else { "open" }.into()]);
        tags.push(vec!["channel_type".into(), channel.channel_type.clone()]);
        if channel.archived {
            tags.push(vec!["archived".into(), "true".into()]);
        }
        if let Some(ttl) = channel.ttl_seconds {
            tags.push(vec!["ttl".into(), ttl.to_string()]);
        }
        docs.push(keys.sign(GROUP_METADATA, tags, "", now));
    }
    if matches!(changed, Changed::Members | Changed::All) {
        let list = members(conn, community_id, channel_id)?;
        let mut admins = vec![d.clone()];
        let mut all = vec![d.clone()];
        for (pubkey, role) in &list {
            if role == "owner" || role == "admin" {
                admins.push(vec!["p".into(), pubkey.clone(), role.clone()]);
            }
            all.push(vec!["p".into(), pubkey.clone(), role.clone()]);
        }
        docs.push(keys.sign(GROUP_ADMINS, admins, "", now));
        docs.push(keys.sign(GROUP_MEMBERS, all, "", now));
    }
    let mut stored = Vec::with_capacity(docs.len());
    for event in docs {
        replace_relay_event(conn, community_id, &event, Some(channel_id), now_micros)?;
        stored.push(Arc::new(StoredEvent {
            event,
            channel: Some(channel_id.to_owned()),
            community_id,
            received_at: now_micros,
        }));
    }
    Ok(stored)
}
