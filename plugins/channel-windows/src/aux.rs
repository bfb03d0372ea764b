//! The aux closure (NIP-CW processing step 4): stored events that change how the rows
//! render, with their original authors and signatures, in one round trip.
//!
//! - Hop 1: reactions (`7`), deletions (`5`, `9005`) and edits (`40003`) with an `e`
//!   tag whose value is a target id.
//! - Hop 2: deletions with an `e` tag whose value is a hop-1 event (a delete of a
//!   reaction). A delete tombstones its target, so hop 2 looks through hop-1
//!   tombstones too: otherwise the transitive hop could never carry the deletion a
//!   client needs to drop a reaction it already holds from live delivery.
//!
//! Served: events that are not deleted, that the reader may read (same community —
//! every scan is community-scoped — and a readable channel, or community-wide for a
//! readable community), each once, never a row again. Malformed stored aux data fails
//! the request (`500`): a silently incomplete closure would render wrong.

use crate::budget::Meter;
use crate::readers::Readable;
use crate::rows;
use buzz_core::error::Reason;
use buzz_core::store::{row_to_event, EventRow};
use buzz_nostr::event::Event;
use buzz_nostr::kinds::{AUTHOR_DELETE, MODERATE_REMOVE};
use std::collections::HashSet;

/// Hop-1 kinds: reaction, author deletion, moderator removal, edit.
const HOP1_KINDS: [i32; 4] = [7, AUTHOR_DELETE as i32, MODERATE_REMOVE as i32, 40_003];
/// Hop-2 kinds: deletions only.
const HOP2_KINDS: [i32; 2] = [AUTHOR_DELETE as i32, MODERATE_REMOVE as i32];
/// Events per hop on the channel and legacy paths.
pub(crate) const PER_HOP_CAP: i64 = 1_000;
/// Target ids per SQL statement (well under both backends' bind-parameter limits).
const TARGETS_PER_SCAN: usize = 500;

/// How much one hop may read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AuxLimit<'a> {
    /// At most this many events per hop (channel and legacy paths).
    PerHop(i64),
    /// Charged to the query's thread-window budgets, row by row.
    Metered(&'a Meter),
}

/// Candidates of both hops as stored, tombstones included.
#[derive(Debug, Default)]
pub(crate) struct AuxCandidates {
    hop1: Vec<EventRow>,
    hop2: Vec<EventRow>,
}

/// Scan both hops for `targets`.
pub(crate) fn scan(
    conn: &mut buzz_core::store::Conn<'_>,
    community_id: i64,
    targets: &[String],
    limit: AuxLimit<'_>,
    now: i64,
) -> Result<AuxCandidates, Reason> {
    if targets.is_empty() {
        return Ok(AuxCandidates::default());
    }
    let hop1 = hop(conn, community_id, targets, &HOP1_KINDS, limit, now)?;
    let hop1_ids: Vec<String> = hop1.iter().map(|r| r.id.clone()).collect();
    let hop2 = if hop1_ids.is_empty() {
        Vec::new()
    } else {
        hop(conn, community_id, &hop1_ids, &HOP2_KINDS, limit, now)?
    };
    Ok(AuxCandidates { hop1, hop2 })
}

fn hop(
    conn: &mut buzz_core::store::Conn<'_>,
    community_id: i64,
    targets: &[String],
    kinds: &[i32],
    limit: AuxLimit<'_>,
    now: i64,
) -> Result<Vec<EventRow>, Reason> {
    let mut found = Vec::new();
    // An event whose `e` tags name targets in two chunks is read twice; keep it once.
    let mut seen = HashSet::new();
    for chunk in targets.chunks(TARGETS_PER_SCAN) {
        let take = match limit {
            AuxLimit::PerHop(cap) => {
                let left = cap - found.len() as i64;
                if left <= 0 {
                    break;
                }
                left
            }
            AuxLimit::Metered(meter) => {
                meter.aux_scan()?;
                // One more than allowed: reading it proves the budget is exceeded.
                i64::try_from(meter.rows_left().saturating_add(1)).unwrap_or(i64::MAX)
            }
        };
        rows::targeting(conn, community_id, chunk, kinds, take, now, &mut |row| {
            if let AuxLimit::Metered(meter) = limit {
                meter.raw_row(row.content.len() + row.tags.len())?;
                meter.on_time()?;
            }
            if seen.insert(row.seq) {
                found.push(row);
            }
            Ok(())
        })?;
    }
    Ok(found)
}

impl AuxCandidates {
    /// Channels of the candidates that would be served, for access resolution.
    pub(crate) fn channels(&self) -> impl Iterator<Item = &str> {
        self.hop1
            .iter()
            .chain(&self.hop2)
            .filter(|r| r.deleted_at.is_none())
            .filter_map(|r| r.channel_id.as_deref())
    }

    /// The events to serve: hop 1 then hop 2, each oldest first; live, readable,
    /// once each, and none that is already among `rows`.
    pub(crate) fn into_events(
        self,
        readable: &Readable,
        rows: &[Event],
    ) -> Result<Vec<Event>, Reason> {
        let mut seen: HashSet<String> = rows.iter().map(|e| e.id.clone()).collect();
        let mut out = Vec::new();
        for mut hop in [self.hop1, self.hop2] {
            hop.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
            for row in hop {
                if row.deleted_at.is_some()
                    || !readable.can_read(row.channel_id.as_deref())
                    || !seen.insert(row.id.clone())
                {
                    continue;
                }
                let event = row_to_event(row).map_err(|err| {
                    Reason::Internal(anyhow::Error::new(err).context("malformed stored aux event"))
                })?;
                out.push(event);
            }
        }
        Ok(out)
    }
}
