//! The relay-signed overlays: `39005` thread summaries, `39006` channel bounds and
//! `39007` thread bounds. Synthesized per query with `created_at = now` and the relay
//! key (NIP-11 `self`); never stored, never rows, never cursor inputs. Tag cardinality
//! is exact — clients reject anything else.

use crate::cursor::{next_cursor_json, Cursor};
use crate::summary::ThreadSummary;
use crate::{CHANNEL_BOUNDS_KIND, SUMMARY_KIND, THREAD_BOUNDS_KIND};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

/// Signs overlays at one instant.
pub(crate) struct OverlaySigner<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) now: i64,
}

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

impl OverlaySigner<'_> {
    /// `39005`: tags exactly `e`, `d` (both the summarized event id) and `h`.
    pub(crate) fn summary(&self, channel: &str, summary: &ThreadSummary) -> Event {
        let content = json!({
            "reply_count": summary.reply_count,
            "descendant_count": summary.descendant_count,
            "last_reply_at": summary.last_reply_at,
            "participants": summary.participants,
        });
        self.keys.sign(
            SUMMARY_KIND,
            vec![
                tag("e", &summary.event_id),
                tag("d", &summary.event_id),
                tag("h", channel),
            ],
            &content.to_string(),
            self.now,
        )
    }

    /// `39006`: tags exactly `d` (`<channel>:head` or `<channel>:<created_at>:<id>` of
    /// the request cursor) and `h`.
    pub(crate) fn channel_bounds(
        &self,
        channel: &str,
        request_cursor: Option<&Cursor>,
        next_cursor: Option<&Cursor>,
    ) -> Event {
        let suffix = request_cursor.map_or_else(|| "head".to_owned(), Cursor::d_suffix);
        let content = json!({
            "has_more": next_cursor.is_some(),
            "next_cursor": next_cursor_json(next_cursor),
        });
        self.keys.sign(
            CHANNEL_BOUNDS_KIND,
            vec![tag("d", &format!("{channel}:{suffix}")), tag("h", channel)],
            &content.to_string(),
            self.now,
        )
    }

    /// `39007`: tags exactly `d` (the request binding), `h` and `e` (the root).
    pub(crate) fn thread_bounds(
        &self,
        binding_d_tag: &str,
        channel: &str,
        root: &str,
        next_cursor: Option<&Cursor>,
    ) -> Event {
        let content = json!({
            "version": 1,
            "direction": "older",
            "has_more": next_cursor.is_some(),
            "next_cursor": next_cursor_json(next_cursor),
        });
        self.keys.sign(
            THREAD_BOUNDS_KIND,
            vec![tag("d", binding_d_tag), tag("h", channel), tag("e", root)],
            &content.to_string(),
            self.now,
        )
    }
}
