//! The recheck of every captured identity against the artifact state now (pages and
//! completion), read through the artifacts plugin's public API.
//!
//! Each entry must still name an accepted, unredacted revision whose event is stored;
//! its artifact must still be listed (not deleted, not retired by redaction) in the
//! captured channel; and no move, delete or restore may have been accepted after the
//! captured revision — so a delete followed by a restore, or a move followed by a move
//! back, still resets. Ordinary updates after the capture do not.
//!
//! [`check_captured`] does it in one statement for what did not change: the capture's
//! own query, run again over the captured channels, lists every entry whose artifact
//! still has the captured revision as its current, listed revision in the captured
//! channel. Such an entry passes every check above — a head only advances (any later
//! update, move, delete or restore would be the head now), a redacted current revision
//! retires its artifact, and the relay refuses kind-5 deletions of revisions, so the
//! event of a current unredacted revision is stored. Only the entries that query does
//! not list — changed since, or past its inspection bound — are checked one by one by
//! [`check_entries`], in a few set-based statements.

use crate::error;
use crate::manifest::Entry;
use buzz_artifacts::{current_matches, heads_of, relocations_of, revisions_by_id, CurrentQuery};
use buzz_core::error::Reason;
use buzz_core::store::{stored_ids, Conn};
use std::collections::HashMap;

/// Every captured entry against the artifact state now: `query` (the capture's own,
/// when it still parses) over the captured `channels`, at most `inspect` candidates,
/// then [`check_entries`] for the entries it does not confirm.
pub(crate) fn check_captured(
    conn: &mut Conn<'_>,
    community: i64,
    entries: &[Entry],
    channels: &[String],
    query: Option<&CurrentQuery>,
    inspect: usize,
) -> Result<(), Reason> {
    if entries.is_empty() {
        return Ok(());
    }
    let Some(query) = query else {
        return check_entries(conn, community, entries);
    };
    let mut query = query.clone();
    query.after = None;
    query.limit = inspect;
    let listed = current_matches(conn, community, channels, &query)?;
    let current: HashMap<&str, (&str, &str)> = listed
        .iter()
        .map(|m| {
            (
                m.d.as_str(),
                (m.revision_id.as_str(), m.channel_id.as_str()),
            )
        })
        .collect();
    let changed: Vec<Entry> = entries
        .iter()
        .filter(|e| {
            current.get(e.artifact_id.as_str())
                != Some(&(e.revision_id.as_str(), e.channel_id.as_str()))
        })
        .cloned()
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    check_entries(conn, community, &changed)
}

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
