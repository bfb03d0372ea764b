//! What makes an event a reply (NIP-10 marked `e` tags) or a broadcast, and the deepest
//! reply accepted. The rows that record it live in `store/threads.rs`.

use crate::event::Event;

/// Deepest reply accepted.
pub const MAX_DEPTH: i32 = 100;

fn is_hex64(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The id of the first NIP-10 `e` tag with `marker` (`root`, `reply`), when it is a valid id.
pub fn marked<'a>(event: &'a Event, marker: &str) -> Option<&'a str> {
    event
        .tags
        .iter()
        .find(|t| t.len() >= 4 && t[0] == "e" && t[3] == marker && is_hex64(&t[1]))
        .map(|t| t[1].as_str())
}

/// The parent of a reply: its NIP-10 marked `reply` e-tag. `None` = not a reply.
pub fn reply_parent(event: &Event) -> Option<&str> {
    marked(event, "reply")
}

/// The exact tag `["broadcast", "1"]`.
pub fn is_broadcast(event: &Event) -> bool {
    event
        .tags
        .iter()
        .any(|t| t.len() == 2 && t[0] == "broadcast" && t[1] == "1")
}
