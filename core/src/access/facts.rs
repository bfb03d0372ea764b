//! Read-only facts the policies decide on, loaded from storage in one blocking read.

use crate::community::Community;
use crate::error::Reason;
use crate::store::channel_state::ChannelRow;
use crate::store::community_standing;
use crate::store::Conn;
use buzz_nostr::event::Event;
use buzz_policy::{ActorFacts, ChannelFacts, CommunityFacts, EventFacts};
use std::collections::HashMap;

pub(super) fn community_facts(c: &Community) -> CommunityFacts {
    CommunityFacts {
        host: c.host.clone(),
        open: c.open,
    }
}

pub(super) fn event_facts(e: &Event) -> EventFacts {
    EventFacts {
        id: e.id.clone(),
        pubkey: e.pubkey.clone(),
        kind: e.kind,
        created_at: e.created_at,
        content: e.content.clone(),
        tags: e.tags.clone(),
    }
}

pub(super) fn channel_facts(id: &str, row: Option<&ChannelRow>, now: i64) -> ChannelFacts {
    match row {
        Some(r) => ChannelFacts {
            id: id.to_owned(),
            exists: true,
            name: r.name.clone(),
            private: r.private,
            archived: r.archived,
            channel_type: r.channel_type.clone(),
            deleted: r.is_gone(now),
        },
        None => ChannelFacts {
            id: id.to_owned(),
            exists: false,
            name: String::new(),
            private: false,
            archived: false,
            channel_type: String::new(),
            deleted: false,
        },
    }
}

/// What the community knows about `pubkey`, independent of any channel.
pub(super) struct Person {
    pub(super) pubkey: Option<String>,
    pub owner: bool,
    pub member: bool,
    pub ban: Option<String>,
    pub timeout_until: Option<i64>,
    /// Channel id → (role, joined_at).
    pub channels: HashMap<String, (String, i64)>,
}

impl Person {
    pub(super) fn actor(&self, channel: Option<&str>) -> ActorFacts {
        let membership = channel.and_then(|c| self.channels.get(c));
        ActorFacts {
            pubkey: self.pubkey.clone(),
            community_owner: self.owner,
            community_member: self.member || self.owner,
            channel_role: membership.map(|(role, _)| role.clone()),
            channel_joined_at: membership.map(|(_, at)| *at),
            banned: self.ban.is_some(),
            ban_reason: self.ban.clone().filter(|r| !r.is_empty()),
            timeout_until: self.timeout_until,
        }
    }
}

impl Person {
    /// Someone who has not authenticated.
    pub(super) fn anonymous() -> Person {
        Person {
            pubkey: None,
            owner: false,
            member: false,
            ban: None,
            timeout_until: None,
            channels: HashMap::new(),
        }
    }
}

/// Load everything about `pk` in `community`. Time-dependent facts stay raw (a
/// timeout's end is passed on as stored; the policy compares it with `now`).
pub(super) fn person(
    conn: &mut Conn<'_>,
    community: &Community,
    pk: &str,
) -> Result<Person, Reason> {
    let standing = community_standing::standing(conn, community.id, pk)?;
    let mut ban = None;
    let mut timeout_until = None;
    for sanction in standing.sanctions {
        match sanction.kind.as_str() {
            "ban" => ban = Some(sanction.reason),
            "timeout" => timeout_until = sanction.until,
            _ => {}
        }
    }
    Ok(Person {
        pubkey: Some(pk.to_owned()),
        owner: community.owners.iter().any(|o| o == pk),
        member: community.open || standing.listed,
        ban,
        timeout_until,
        channels: standing
            .memberships
            .into_iter()
            .map(|m| (m.channel_id, (m.role, m.added_at)))
            .collect(),
    })
}
