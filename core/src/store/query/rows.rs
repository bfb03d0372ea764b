//! The stored `events` row types and their conversion: [`EventRow`] to an [`Event`]
//! (`row_to_event`), and the wire columns straight to NIP-01 JSON (`row_to_wire`,
//! [`WireEvent`]) without rebuilding the event.

use crate::store::schema::events;
use crate::store::StoreError;
use buzz_nostr::event::Event;
use diesel::prelude::*;

/// One `events` row as stored.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = events)]
pub struct EventRow {
    pub seq: i64,
    pub community_id: i64,
    pub id: String,
    pub pubkey: String,
    pub created_at: i64,
    pub kind: i32,
    pub tags: String,
    pub content: String,
    pub sig: String,
    pub received_at: i64,
    pub channel_id: Option<String>,
    pub deleted_at: Option<i64>,
}

/// Rebuild the wire event from a stored row.
pub fn row_to_event(row: EventRow) -> Result<Event, StoreError> {
    let tags: Vec<Vec<String>> = serde_json::from_str(&row.tags)
        .map_err(|e| StoreError::Corrupt(format!("tags of event {}: {e}", row.id)))?;
    let kind = u32::try_from(row.kind)
        .map_err(|_| StoreError::Corrupt(format!("kind of event {}", row.id)))?;
    Ok(Event {
        id: row.id,
        pubkey: row.pubkey,
        created_at: row.created_at,
        kind,
        tags,
        content: row.content,
        sig: row.sig,
    })
}

/// A stored event as its NIP-01 JSON object, ready for the wire, and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEvent {
    pub id: String,
    pub json: String,
}

/// The columns a wire event is written from.
#[derive(Queryable, Selectable)]
#[diesel(table_name = events)]
pub(super) struct WireRow {
    pub(super) seq: i64,
    pub(super) community_id: i64,
    pub(super) id: String,
    pub(super) pubkey: String,
    pub(super) created_at: i64,
    pub(super) kind: i32,
    pub(super) tags: String,
    pub(super) content: String,
    pub(super) sig: String,
}

/// [`Event`]'s wire shape (same fields, same order) over a row's text: the tags column
/// is the JSON the relay stored, checked to be JSON and copied as it is, not rebuilt
/// string by string and serialized again (the bulk of a REQ's cost per returned event).
#[derive(serde::Serialize)]
struct WireFields<'a> {
    id: &'a str,
    pubkey: &'a str,
    created_at: i64,
    kind: u32,
    tags: &'a serde_json::value::RawValue,
    content: &'a str,
    sig: &'a str,
}

pub(super) fn row_to_wire(row: WireRow) -> Result<WireEvent, StoreError> {
    let tags: &serde_json::value::RawValue = serde_json::from_str(&row.tags)
        .map_err(|e| StoreError::Corrupt(format!("tags of event {}: {e}", row.id)))?;
    let kind = u32::try_from(row.kind)
        .map_err(|_| StoreError::Corrupt(format!("kind of event {}", row.id)))?;
    let fields = WireFields {
        id: &row.id,
        pubkey: &row.pubkey,
        created_at: row.created_at,
        kind,
        tags,
        content: &row.content,
        sig: &row.sig,
    };
    let json = serde_json::to_string(&fields)
        .map_err(|e| StoreError::Corrupt(format!("event {}: {e}", row.id)))?;
    Ok(WireEvent { id: row.id, json })
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;

    /// A row written as wire JSON reads exactly as the event serialized whole: same
    /// fields, order and escaping (quotes, backslashes, control and non-ASCII text).
    #[test]
    fn wire_json_is_the_event_serialized() {
        let tags = vec![
            vec!["t".to_owned(), "a \"quoted\" \\ tag".to_owned()],
            vec!["e".to_owned(), "x".repeat(64), "wss://r".to_owned()],
            vec![],
        ];
        let event =
            Keys::generate().sign(1, tags, "line\nnext\ttab \u{1} é 🦀 \"q\"", 1_700_000_000);
        let row = WireRow {
            seq: 7,
            community_id: 1,
            id: event.id.clone(),
            pubkey: event.pubkey.clone(),
            created_at: event.created_at,
            kind: 1,
            tags: serde_json::to_string(&event.tags).expect("tags"),
            content: event.content.clone(),
            sig: event.sig.clone(),
        };
        let wire = row_to_wire(row).expect("wire");
        assert_eq!(wire.id, event.id);
        assert_eq!(wire.json, serde_json::to_string(&event).expect("event"));
    }

    /// Tags that are not JSON are a corrupt row, not text passed to a client.
    #[test]
    fn tags_that_are_not_json_are_refused() {
        let row = WireRow {
            seq: 1,
            community_id: 1,
            id: "ab".repeat(32),
            pubkey: "cd".repeat(32),
            created_at: 0,
            kind: 1,
            tags: "[[\"t\",".into(),
            content: String::new(),
            sig: "ef".repeat(64),
        };
        assert!(matches!(row_to_wire(row), Err(StoreError::Corrupt(_))));
    }
}
