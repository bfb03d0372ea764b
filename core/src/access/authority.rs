//! Read decisions taken from the database alone, inside the caller's own transaction:
//! no cached facts, no cached decisions. For plugins whose answers must agree with one
//! moment of the database (a NIP-AR manifest capture decides its scope in the very
//! transaction that reads the records it captures) or whose every request must recheck database
//! authority. Costs one policy call per channel of the community, bounded by the
//! caller's `max_inspected`.

use super::facts;
use super::AccessService;
use crate::community::Community;
use crate::error::Reason;
use crate::store::channel_state::{self, ChannelRow};
use crate::store::Conn;
use std::collections::BTreeMap;

/// What one reader may read in one community, decided now.
#[derive(Debug, Clone)]
pub struct Authority {
    /// Admitted to the community (open, listed or owner).
    pub member: bool,
    /// Banned from the community.
    pub banned: bool,
    /// Channels the reader is a member of.
    pub memberships: usize,
    /// The community's live channels that were examined.
    pub inspected: usize,
    /// Every live channel (not deleted, not expired) the reader may read, with its row,
    /// by id.
    pub readable: BTreeMap<String, ChannelRow>,
}

impl AccessService {
    /// Decide which channels `pubkey` may read in `community`, at `now`, from what
    /// `conn` sees (run it inside the transaction whose reads must agree with it).
    /// More than `max_inspected` memberships or channels refuses with
    /// [`Reason::TooLarge`] before any decision is made.
    pub fn authority(
        &self,
        conn: &mut Conn<'_>,
        community: &Community,
        pubkey: &str,
        now: i64,
        max_inspected: usize,
    ) -> Result<Authority, Reason> {
        let person = facts::person(conn, community, pubkey)?;
        if person.channels.len() > max_inspected {
            return Err(Reason::TooLarge(format!(
                "more than {max_inspected} channel memberships to inspect"
            )));
        }
        let rows = channel_state::live_channels_at_most(conn, community.id, max_inspected + 1)?;
        if rows.len() > max_inspected {
            return Err(Reason::TooLarge(format!(
                "more than {max_inspected} channels to inspect"
            )));
        }
        let inspected = rows.len();
        let readable = rows
            .into_iter()
            .filter(|row| !row.is_gone(now) && self.may_read(&person, community, row, now))
            .map(|row| (row.id.clone(), row))
            .collect();
        Ok(Authority {
            member: person.member || person.owner,
            banned: person.ban.is_some(),
            memberships: person.channels.len(),
            inspected,
            readable,
        })
    }
}
