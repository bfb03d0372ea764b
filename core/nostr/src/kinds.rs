//! Which kinds mean what in a community (NIP-29-shaped channels, community moderation).

use crate::event::{Event, KindClass};

/// Conversation messages: the kinds that get thread metadata.
pub const CONVERSATION: [u32; 4] = [9, 40_002, 45_001, 45_003];
/// Reaction, edit, diff: each targets one event (`e`) in the same channel.
pub const TARGETING: [u32; 3] = [7, EDIT_MESSAGE, 40_008];
/// An edit of a message: only the message's author may send one.
pub const EDIT_MESSAGE: u32 = 40_003;

pub const CREATE_CHANNEL: u32 = 9_007;
pub const EDIT_CHANNEL: u32 = 9_002;
pub const ADD_MEMBER: u32 = 9_000;
pub const REMOVE_MEMBER: u32 = 9_001;
pub const MODERATE_REMOVE: u32 = 9_005;
pub const DELETE_CHANNEL: u32 = 9_008;
pub const JOIN: u32 = 9_021;
pub const LEAVE: u32 = 9_022;
/// What a member joining again is told (by the access service before any policy, and by
/// the channel rules in the transaction).
pub const ALREADY_MEMBER: &str = "already a member of this channel";
pub const AUTHOR_DELETE: u32 = 5;

/// Community moderation (not channel-scoped; authored by community owners).
pub const COMMUNITY_ADD_MEMBER: u32 = 9_040;
pub const COMMUNITY_REMOVE_MEMBER: u32 = 9_041;
pub const BAN: u32 = 9_042;
pub const UNBAN: u32 = 9_043;
pub const TIMEOUT: u32 = 9_044;

/// Relay-signed group state (addressable, `d` = channel id).
pub const GROUP_METADATA: u32 = 39_000;
pub const GROUP_ADMINS: u32 = 39_001;
pub const GROUP_MEMBERS: u32 = 39_002;
/// All of the relay-signed group state: clients may never publish these kinds.
pub const GROUP_STATE: [u32; 3] = [GROUP_METADATA, GROUP_ADMINS, GROUP_MEMBERS];

/// Channel administration kinds (all carry exactly one `h`).
pub const CHANNEL_ADMIN: [u32; 8] = [
    ADD_MEMBER,
    REMOVE_MEMBER,
    EDIT_CHANNEL,
    MODERATE_REMOVE,
    CREATE_CHANNEL,
    DELETE_CHANNEL,
    JOIN,
    LEAVE,
];

pub const COMMUNITY_ADMIN: [u32; 5] = [
    COMMUNITY_ADD_MEMBER,
    COMMUNITY_REMOVE_MEMBER,
    BAN,
    UNBAN,
    TIMEOUT,
];

/// Kinds that must carry exactly one `h` tag.
/// A conversation message: it gets thread metadata, counts in reply counts and is what
/// chat clients show. Plugins use this to tell chat from their own kinds.
pub fn is_conversation(kind: u32) -> bool {
    CONVERSATION.contains(&kind)
}

pub fn requires_channel(kind: u32) -> bool {
    CONVERSATION.contains(&kind) || TARGETING.contains(&kind) || CHANNEL_ADMIN.contains(&kind)
}

/// Kinds whose storage changes who may read or write what: live subscriptions
/// recompute their access scope when one passes by.
pub fn changes_access(kind: u32) -> bool {
    CHANNEL_ADMIN.contains(&kind) && kind != MODERATE_REMOVE || COMMUNITY_ADMIN.contains(&kind)
}

/// Channel roles, strongest first.
pub const ROLES: [&str; 4] = ["owner", "admin", "member", "guest"];

/// Whether the relay's state-keeping for `event` reads no event rows but the ones `event` names in its
/// `e` tags and changes none but its own thread metadata (and its ancestors' counts),
/// and its insert settles no replaceable slot: notes outside channels and channel
/// conversation, reactions and edits. Such events may be inserted together with their
/// neighbours in a group commit (the relay's storage writer). Deletions, removals and every
/// channel or community change are not.
pub fn independent(event: &Event) -> bool {
    if event.class() != KindClass::Regular
        || event.kind == AUTHOR_DELETE
        || COMMUNITY_ADMIN.contains(&event.kind)
    {
        return false;
    }
    match event.channel_id() {
        None => true,
        Some(_) => CONVERSATION.contains(&event.kind) || TARGETING.contains(&event.kind),
    }
}
