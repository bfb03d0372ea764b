//! Live deliveries to one connection: access changes first (a ban of its caller ends
//! the connection), then each subscription the event matches and its reader may read,
//! never one its stored answer already sent.

use super::messages;
use super::{Connection, End};
use crate::live::Delivery;
use buzz_nostr::kinds::changes_access;
use std::time::Instant;

impl Connection {
    /// Deliver one live event; `Some` when the connection must end (its caller was
    /// banned: `access/standing.rs`). The access awaits, which only access changes and
    /// policy reloads reach, are boxed: this future is part of every idle connection's
    /// task (`Connection::run`), and a plain delivery allocates nothing for them.
    pub(super) async fn on_live(&mut self, delivery: Delivery) -> Option<End> {
        let event = &delivery.event;
        if changes_access(event.event.kind) {
            let standing = Box::pin(self.state.services.access.check_standing(&self.ctx));
            if let Err(reason) = standing.await {
                return Some(End::Banned(reason.wire_text()));
            }
        }
        // Authenticated connections hear access changes without subscriptions (for the
        // check above); with none, there is no scope to keep current.
        if self.live.is_idle() {
            return None;
        }
        // Membership, channel and sanction changes (and policy reloads) change what this
        // caller may read: recompute before delivering anything else, so a revoked
        // reader stops receiving immediately.
        let generation = self.state.services.access.policy_generation();
        if changes_access(event.event.kind) || generation != self.policy_generation {
            self.policy_generation = generation;
            Box::pin(self.refresh_live_scope()).await;
        }
        let Some(scope) = &self.scope else {
            return None;
        };
        if !self.state.services.access.can_see(scope, event) {
            return None;
        }
        let now = Instant::now();
        for key in &delivery.subs {
            // A key without an id: closed or replaced since, or not yet past its EOSE.
            let Some(sub) = self.subs.by_key_mut(*key) else {
                continue;
            };
            match &sub.answered {
                Some(answered) if answered.expired(now) => sub.answered = None,
                // Its stored answer sent this event already.
                Some(answered) if answered.holds(&event.event.id) => continue,
                _ => {}
            }
            self.out.send(messages::event(&sub.id, &event.event));
        }
        None
    }
}
