//! What an access-changing event changed, so cached facts and read decisions are
//! refreshed for exactly that — one channel, one person's membership, one person's
//! standing — instead of being dropped for everyone.

use crate::stored::StoredEvent;
use buzz_nostr::channel_tags::member_of;
use buzz_nostr::kinds::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Extent unknown (events missed from another process, a policy reload): everything.
    All,
    /// A channel's row (created, edited, deleted): its read decision, for everyone.
    Channel { community: i64, channel: String },
    /// One person's place in one channel (added, removed, joined, left).
    Membership {
        community: i64,
        channel: String,
        pubkey: String,
    },
    /// One person's community standing (membership, ban, timeout): all their decisions.
    Person { community: i64, pubkey: String },
}

impl Change {
    /// The changes `event` makes (none when its kind does not change access).
    pub(crate) fn of(stored: &StoredEvent) -> Vec<Change> {
        let event = &stored.event;
        let community = stored.community_id;
        if !changes_access(event.kind) {
            return Vec::new();
        }
        let channel = event.channel_id().map(str::to_owned);
        let target = member_of(event).map(str::to_owned);
        vec![match (event.kind, channel, target) {
            // The creator becomes the channel's owner in the same event.
            (CREATE_CHANNEL, Some(channel), _) => {
                return vec![
                    Change::Channel {
                        community,
                        channel: channel.clone(),
                    },
                    Change::Membership {
                        community,
                        channel,
                        pubkey: event.pubkey.clone(),
                    },
                ]
            }
            (EDIT_CHANNEL | DELETE_CHANNEL, Some(channel), _) => {
                Change::Channel { community, channel }
            }
            (ADD_MEMBER | REMOVE_MEMBER, Some(channel), Some(pubkey)) => Change::Membership {
                community,
                channel,
                pubkey,
            },
            (JOIN | LEAVE, Some(channel), _) => Change::Membership {
                community,
                channel,
                pubkey: event.pubkey.clone(),
            },
            (kind, _, Some(pubkey)) if COMMUNITY_ADMIN.contains(&kind) => {
                Change::Person { community, pubkey }
            }
            // A shape the rules above do not know: be safe.
            _ => Change::All,
        }]
    }

    /// Does this change alter what the community knows about `pubkey`?
    pub(crate) fn touches_person(&self, community_id: i64, who: &str) -> bool {
        match self {
            Change::All => true,
            Change::Channel { .. } => false,
            Change::Membership {
                community, pubkey, ..
            }
            | Change::Person { community, pubkey } => *community == community_id && pubkey == who,
        }
    }

    /// Does this change alter the channel rows of `community_id`?
    pub(crate) fn touches_channels(&self, community_id: i64) -> bool {
        match self {
            Change::All => true,
            Change::Channel { community, .. } => *community == community_id,
            Change::Membership { .. } | Change::Person { .. } => false,
        }
    }
}
