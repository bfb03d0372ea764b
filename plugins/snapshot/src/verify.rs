//! Completion's recheck of every captured identity against the artifact state now, read
//! through the artifacts plugin's public API in a few set-based statements.
//!
//! Each entry must still name an accepted, unredacted revision whose event is stored;
//! its artifact must still be listed (not deleted, not retired by redaction) in the
//! captured channel; and no move, delete or restore may have been accepted after the
//! captured revision — so a delete followed by a restore, or a move followed by a move
//! back, still resets. Ordinary updates after the capture do not.

use crate::error;
use crate::manifest::Entry;
use buzz_artifacts::{heads_of, relocations_of, revisions_by_id};
use buzz_core::error::Reason;
use buzz_core::store::{stored_ids, Conn};
use std::collections::HashMap;

pub(crate) fn check_entries(
    conn: &mut Conn<'_>,
    community: i64,
    entries: &[Entry],
) -> Result<(), Reason> {
    let ids: Vec<String> = entries.iter().map(|e| e.revision_id.clone()).collect();
    let ds: Vec<String> = entries.iter().map(|e| e.artifact_id.clone()).collect();
    let revisions: HashMap<String, _> = revisions_by_id(conn, community, &ids)?
        .into_iter()
        .map(|r| (r.revision_id.clone(), r))
        .collect();
    let stored = stored_ids(conn, community, &ids)?;
    let heads: HashMap<String, _> = heads_of(conn, community, &ds)?
        .into_iter()
        .map(|h| (h.d.clone(), h))
        .collect();
    // The latest relocation of each identity.
    let mut relocated: HashMap<String, i64> = HashMap::new();
    for r in relocations_of(conn, community, &ds)? {
        let latest = relocated.entry(r.d.clone()).or_insert(r.version);
        *latest = (*latest).max(r.version);
    }
    for e in entries {
        let revision = revisions
            .get(&e.revision_id)
            .filter(|r| r.d == e.artifact_id && r.channel_id == e.channel_id)
            .ok_or_else(|| {
                error::reset(format!("captured revision {} is missing", e.revision_id))
            })?;
        if revision.redacted || !stored.contains(&e.revision_id) {
            return Err(error::reset(format!(
                "captured revision {} was removed",
                e.revision_id
            )));
        }
        let head = heads
            .get(&e.artifact_id)
            .ok_or_else(|| error::reset(format!("artifact {} is missing", e.artifact_id)))?;
        if !head.is_listed() {
            return Err(error::reset(format!(
                "artifact {} was deleted or retired",
                e.artifact_id
            )));
        }
        if head.channel_id != e.channel_id {
            return Err(error::reset(format!(
                "artifact {} was moved",
                e.artifact_id
            )));
        }
        if relocated
            .get(&e.artifact_id)
            .is_some_and(|v| *v > revision.version)
        {
            return Err(error::reset(format!(
                "artifact {} was moved or deleted after the capture",
                e.artifact_id
            )));
        }
    }
    Ok(())
}
