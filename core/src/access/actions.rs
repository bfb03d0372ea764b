//! What a write means to the policies: event kind → [`Action`].

use buzz_nostr::event::Event;
use buzz_nostr::kinds::*;
use buzz_policy::Action;

pub(crate) fn classify(event: &Event) -> Action {
    match event.kind {
        CREATE_CHANNEL => Action::CreateChannel,
        EDIT_CHANNEL => Action::EditChannel,
        ADD_MEMBER => Action::AddMember,
        REMOVE_MEMBER => Action::RemoveMember,
        JOIN => Action::Join,
        LEAVE => Action::Leave,
        MODERATE_REMOVE => Action::ModerateRemove,
        DELETE_CHANNEL => Action::DeleteChannel,
        // A deletion outside any channel is the author's own business (NIP-09).
        AUTHOR_DELETE if event.channel_id().is_some() => Action::Delete,
        7 => Action::React,
        40_003 | 40_008 => Action::Edit,
        k if COMMUNITY_ADMIN.contains(&k) => Action::CommunityAdmin,
        // Anything else posted into a channel needs the right to post there.
        _ if event.channel_id().is_some() => Action::Message,
        _ => Action::Other,
    }
}
