//! A person's standing in the community as a whole. A ban cuts reads, not only writes:
//! a banned pubkey has no authenticated session on any transport — its AUTH is refused,
//! its reads (REQ, COUNT, `POST /query`, every read through the query service or a
//! scope) are refused `blocked:` (HTTP 403), and its open WebSockets are closed when the
//! ban passes by on the live bus (`http/ws/live.rs`), on every relay process. Lifting
//! the ban restores all of it. Core applies this whether or not policies are enabled:
//! sanctions are core's rows. Community owners are never cut off (they lift bans).

use super::facts::Person;
use super::AccessService;
use crate::community::Community;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use std::sync::Arc;

impl AccessService {
    /// May `ctx`'s caller use the community at all? Anonymous callers may (what they
    /// then read is decided elsewhere); a banned pubkey may not (`blocked:`).
    pub async fn check_standing(&self, ctx: &ConnCtx) -> Result<(), Reason> {
        match ctx.pubkey.as_deref() {
            Some(pubkey) => self.check_standing_of(&ctx.community, pubkey).await,
            None => Ok(()),
        }
    }

    /// [`Self::check_standing`] for `pubkey` before it is the caller's (a NIP-42 AUTH).
    pub async fn check_standing_of(
        &self,
        community: &Arc<Community>,
        pubkey: &str,
    ) -> Result<(), Reason> {
        let person = self.person(community, Some(pubkey)).await?;
        in_good_standing(&person)
    }
}

/// `blocked:` with the ban's reason for a banned person who is not an owner.
pub(super) fn in_good_standing(person: &Person) -> Result<(), Reason> {
    match &person.ban {
        Some(_) if person.owner => Ok(()),
        Some(reason) if reason.is_empty() => Err(Reason::Blocked("banned".into())),
        Some(reason) => Err(Reason::Blocked(format!("banned: {reason}"))),
        None => Ok(()),
    }
}
