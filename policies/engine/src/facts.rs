//! The read-only facts core computes before it asks for a verdict.
//!
//! Scripts see these as one `req` table with the same (lowercase) field names; `None`
//! becomes `nil`. The structs also deserialize from fixture files, so every field has a
//! default and unknown fields are rejected (a typo in a fixture is an error, not a
//! silently ignored fact).

use serde::{Deserialize, Serialize};

/// The event being written, as signed by its author.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventFacts {
    pub id: String,
    pub pubkey: String,
    pub kind: u32,
    pub created_at: i64,
    pub content: String,
    pub tags: Vec<Vec<String>>,
}

/// Who is asking, as seen by the relay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActorFacts {
    /// Authenticated (NIP-42 / NIP-98) pubkey; `None` = anonymous.
    pub pubkey: Option<String>,
    /// Listed in the community's owners.
    pub community_owner: bool,
    /// Member of the community (open community: every authenticated pubkey).
    pub community_member: bool,
    /// "owner" | "admin" | "member" | "guest"; `None` = not a channel member.
    pub channel_role: Option<String>,
    /// Unix seconds the actor became a channel member.
    pub channel_joined_at: Option<i64>,
    pub banned: bool,
    pub ban_reason: Option<String>,
    /// Unix seconds; in the future = timed out.
    pub timeout_until: Option<i64>,
}

/// The channel a request is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelFacts {
    pub id: String,
    pub exists: bool,
    pub name: String,
    pub private: bool,
    pub archived: bool,
    /// "stream" | "forum" | "dm".
    pub channel_type: String,
    pub deleted: bool,
}

/// The community selected by the request's host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommunityFacts {
    pub host: String,
    pub open: bool,
}

/// What a write does; scripts see it as `req.action`, a lowercase string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Message,
    React,
    Edit,
    Delete,
    CreateChannel,
    EditChannel,
    AddMember,
    RemoveMember,
    Join,
    Leave,
    ModerateRemove,
    DeleteChannel,
    /// Ban, unban, timeout, add a community member.
    CommunityAdmin,
    #[default]
    Other,
}

impl Action {
    /// Every action, in declaration order.
    pub const ALL: [Action; 14] = [
        Action::Message,
        Action::React,
        Action::Edit,
        Action::Delete,
        Action::CreateChannel,
        Action::EditChannel,
        Action::AddMember,
        Action::RemoveMember,
        Action::Join,
        Action::Leave,
        Action::ModerateRemove,
        Action::DeleteChannel,
        Action::CommunityAdmin,
        Action::Other,
    ];

    /// The string scripts see in `req.action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Message => "message",
            Action::React => "react",
            Action::Edit => "edit",
            Action::Delete => "delete",
            Action::CreateChannel => "create_channel",
            Action::EditChannel => "edit_channel",
            Action::AddMember => "add_member",
            Action::RemoveMember => "remove_member",
            Action::Join => "join",
            Action::Leave => "leave",
            Action::ModerateRemove => "moderate_remove",
            Action::DeleteChannel => "delete_channel",
            Action::CommunityAdmin => "community_admin",
            Action::Other => "other",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything `moderate(req)` and `can_write(req)` see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteRequest {
    pub action: Action,
    pub event: EventFacts,
    pub actor: ActorFacts,
    /// `None` for writes that are not channel-scoped.
    pub channel: Option<ChannelFacts>,
    pub community: CommunityFacts,
    /// Unix seconds, the relay's clock for this request.
    pub now: i64,
}

/// Everything `can_read(req)` sees (`req.action` is `"read"`, there is no `req.event`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadRequest {
    pub actor: ActorFacts,
    pub channel: ChannelFacts,
    pub community: CommunityFacts,
    /// Unix seconds, the relay's clock for this request.
    pub now: i64,
}
