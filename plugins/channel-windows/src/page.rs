//! The `limit + 1` probe and the scan-position cursor (NIP-CW processing steps 2–3).

use crate::cursor::Cursor;
use buzz_core::store::{row_to_event, EventRow};
use buzz_nostr::event::Event;

/// One page of rows, cut from a `limit + 1` probe.
#[derive(Debug)]
pub(crate) struct Page {
    /// Rows that could be reconstructed, in scan order.
    pub(crate) rows: Vec<Event>,
    /// The scan position of the last retained candidate when more rows exist.
    /// `None` exactly when the probe found no row beyond `limit` (`has_more = false`).
    pub(crate) next_cursor: Option<Cursor>,
}

impl Page {
    /// Cut a page from `probe`, the first `limit + 1` rows matching every predicate.
    ///
    /// The sentinel row (index `limit`) only proves `has_more`; it is dropped here,
    /// before anything else can see it. The cursor is captured before reconstruction:
    /// a retained row that cannot be served (e.g. corrupt stored tags) still advances
    /// the cursor and is left out of the rows — deriving the cursor from delivered rows
    /// instead would stall pagination on it.
    pub(crate) fn from_probe(mut probe: Vec<EventRow>, limit: u64) -> Page {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let has_more = probe.len() > limit;
        probe.truncate(limit);
        let next_cursor = if has_more {
            probe
                .last()
                .map(|row| Cursor::new(row.created_at, row.id.clone()))
        } else {
            None
        };
        Page {
            rows: reconstruct(probe),
            next_cursor,
        }
    }

    pub(crate) fn row_ids(&self) -> Vec<String> {
        self.rows.iter().map(|e| e.id.clone()).collect()
    }
}

/// Stored rows back into wire events, skipping (and logging) rows that cannot be.
pub(crate) fn reconstruct(rows: Vec<EventRow>) -> Vec<Event> {
    rows.into_iter()
        .filter_map(|row| match row_to_event(row) {
            Ok(event) => Some(event),
            Err(err) => {
                tracing::warn!(error = %err, "window row skipped: stored event cannot be served");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(created_at: i64, id: char, tags: &str) -> EventRow {
        EventRow {
            seq: 0,
            community_id: 1,
            id: id.to_string().repeat(64),
            pubkey: "p".repeat(64),
            created_at,
            kind: 9,
            tags: tags.into(),
            content: String::new(),
            sig: "s".repeat(128),
            received_at: 0,
            channel_id: None,
            deleted_at: None,
        }
    }

    #[test]
    fn sentinel_is_dropped_and_cursor_is_the_scan_position() {
        let probe = vec![
            row(3, 'a', "[]"),
            row(2, 'b', "{corrupt"),
            row(1, 'c', "[]"),
        ];
        let page = Page::from_probe(probe, 2);
        assert_eq!(page.rows.len(), 1, "the corrupt row is skipped");
        assert_eq!(page.next_cursor, Some(Cursor::new(2, "b".repeat(64))));

        let exact = Page::from_probe(vec![row(3, 'a', "[]"), row(2, 'b', "[]")], 2);
        assert_eq!((exact.rows.len(), exact.next_cursor), (2, None));
        let empty = Page::from_probe(Vec::new(), 2);
        assert!(empty.rows.is_empty() && empty.next_cursor.is_none());
    }
}
