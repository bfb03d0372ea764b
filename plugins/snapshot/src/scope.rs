//! The frozen scope of a capture and how every request rechecks it against database
//! authority (a fresh [`Authority`] decided inside the request's own transaction).
//!
//! Reset causes (NIP-AR "Stable manifest transport"): a channel the reader could read
//! at capture is no longer readable (access lost, channel deleted or expired); a channel
//! that existed at capture became readable (access gained: its artifacts are not in the
//! manifest); a captured channel's row changed (metadata, TTL, archive — the spec allows
//! this conservative reset). Channels created after the capture are new, not a change;
//! "after" is judged by the channel's `created_at` second, and one stamped with the
//! capture's own second counts as existing at capture (when unsure, reset).

use crate::error;
use crate::manifest::fingerprint;
use buzz_core::access::Authority;
use buzz_core::error::Reason;
use std::collections::{BTreeMap, BTreeSet};

/// What a capture froze.
#[derive(Debug, Clone)]
pub(crate) struct Frozen {
    pub readable: BTreeSet<String>,
    /// Captured channel → fingerprint of its row.
    pub channels: BTreeMap<String, String>,
    pub captured_at: i64,
}

/// The community's normal admission refusals, before anything else is looked at.
pub(crate) fn admit(authority: &Authority) -> Result<(), Reason> {
    if authority.banned {
        return Err(Reason::Blocked("you are banned from this community".into()));
    }
    if !authority.member {
        return Err(Reason::Restricted(
            "this community is for its members".into(),
        ));
    }
    Ok(())
}

/// The whole frozen scope against `now` (pages and completion).
pub(crate) fn check(frozen: &Frozen, now: &Authority) -> Result<(), Reason> {
    if let Some(lost) = frozen
        .readable
        .iter()
        .find(|id| !now.readable.contains_key(*id))
    {
        return Err(error::reset(format!(
            "access changed: channel {lost} is no longer readable"
        )));
    }
    if let Some((gained, _)) = now
        .readable
        .iter()
        .find(|(id, row)| !frozen.readable.contains(*id) && row.created_at <= frozen.captured_at)
    {
        return Err(error::reset(format!(
            "access changed: channel {gained} became readable"
        )));
    }
    check_channels(&frozen.channels, now)
}

/// Only these captured channels (a body read): each still readable, its row unchanged.
pub(crate) fn check_channels(
    channels: &BTreeMap<String, String>,
    now: &Authority,
) -> Result<(), Reason> {
    for (id, print) in channels {
        match now.readable.get(id) {
            None => {
                return Err(error::reset(format!(
                    "access changed: channel {id} is no longer readable"
                )))
            }
            Some(row) if fingerprint(row) != *print => {
                return Err(error::reset(format!("captured channel {id} changed")))
            }
            Some(_) => {}
        }
    }
    Ok(())
}
