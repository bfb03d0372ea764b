//! Channel-mode request grammar (NIP-CW "Channel-mode Request").

use super::fields::{optional_bool, single_tag, window_cursor};
use crate::cursor::Cursor;
use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;

/// Row budget when the filter has no `limit`.
pub(crate) const DEFAULT_LIMIT: u64 = 50;
/// Limits outside this range are clamped into it (NIP-CW: "Relays SHOULD clamp").
pub(crate) const MIN_LIMIT: u64 = 1;
pub(crate) const MAX_LIMIT: u64 = 200;

/// A valid channel-window request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelRequest {
    pub(crate) channel: String,
    pub(crate) limit: u64,
    /// `None` = head of the channel.
    pub(crate) cursor: Option<Cursor>,
    /// Restricts which kinds may be rows; aux and overlay kinds are unaffected.
    pub(crate) kinds: Option<Vec<u32>>,
    pub(crate) include_aux: bool,
    pub(crate) include_summaries: bool,
}

/// Extension keys that select another mode; seeing them here is a mixed request.
const OTHER_MODE_KEYS: [&str; 5] = [
    "depth_limit",
    "thread_cursor",
    "thread_cursor_id",
    "threadCursor",
    "threadCursorId",
];

pub(crate) fn parse(filter: &Filter) -> Result<ChannelRequest, Reason> {
    let ext = &filter.extensions;
    for key in ["thread_window", "resolve_thread_roots"] {
        if optional_bool(ext, key)? == Some(true) {
            return Err(Reason::invalid(format!(
                "top_level and {key} select different window modes; send one"
            )));
        }
    }
    if let Some(key) = OTHER_MODE_KEYS.iter().find(|k| ext.contains_key(**k)) {
        return Err(Reason::invalid(format!(
            "{key} belongs to thread paging, not to a top_level channel window"
        )));
    }
    // Standard fields a keyset window cannot honour are refused rather than ignored: a
    // silently wider page would be a wrong-but-plausible timeline.
    for (field, present) in [
        ("ids", filter.ids.is_some()),
        ("authors", filter.authors.is_some()),
        ("since", filter.since.is_some()),
    ] {
        if present {
            return Err(Reason::invalid(format!(
                "a top_level channel window does not take {field}"
            )));
        }
    }
    if let Some(name) = filter.tags.keys().find(|name| *name != "h") {
        return Err(Reason::invalid(format!(
            "a top_level channel window takes no #{name} filter (only one #h)"
        )));
    }
    let channel = single_tag(filter, "h", "top_level channel window")?;
    // `page` / `offset` are deliberately not read: offset pagination is never honoured
    // on the window path; the keyset cursor is the only way forward.
    Ok(ChannelRequest {
        channel,
        limit: filter
            .limit
            .unwrap_or(DEFAULT_LIMIT)
            .clamp(MIN_LIMIT, MAX_LIMIT),
        cursor: window_cursor(filter)?,
        kinds: filter.kinds.clone(),
        include_aux: optional_bool(ext, "include_aux")?.unwrap_or(false),
        include_summaries: optional_bool(ext, "include_summaries")?.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse_json(v: Value) -> Result<ChannelRequest, Reason> {
        parse(&Filter::parse(&v).expect("valid NIP-01 filter"))
    }

    #[test]
    fn defaults_and_clamping() {
        let r = parse_json(json!({"top_level": true, "#h": ["c"]})).expect("valid");
        assert_eq!(
            r,
            ChannelRequest {
                channel: "c".into(),
                limit: 50,
                cursor: None,
                kinds: None,
                include_aux: false,
                include_summaries: false
            }
        );
        let limit = |l: u64| {
            parse_json(json!({"top_level": true, "#h": ["c"], "limit": l}))
                .expect("valid")
                .limit
        };
        assert_eq!(
            (limit(0), limit(1), limit(200), limit(5000)),
            (1, 1, 200, 200)
        );
        let r = parse_json(
            json!({"top_level": true, "#h": ["c"], "page": 3, "offset": 10,
            "include_aux": true, "include_summaries": true, "kinds": [9]}),
        )
        .expect("page and offset are not honoured, not rejected");
        assert!(r.include_aux && r.include_summaries && r.kinds == Some(vec![9]));
    }

    #[test]
    fn rejections() {
        let id = "a".repeat(64);
        let bad = [
            json!({"top_level": true}),
            json!({"top_level": true, "#h": []}),
            json!({"top_level": true, "#h": ["a", "b"]}),
            json!({"top_level": true, "#h": ["a"], "until": 1}),
            json!({"top_level": true, "#h": ["a"], "before_id": id}),
            json!({"top_level": true, "#h": ["a"], "until": 1, "before_id": "xyz"}),
            json!({"top_level": true, "#h": ["a"], "include_aux": "yes"}),
            json!({"top_level": true, "#h": ["a"], "thread_window": true}),
            json!({"top_level": true, "#h": ["a"], "resolve_thread_roots": true}),
            json!({"top_level": true, "#h": ["a"], "depth_limit": 3}),
            json!({"top_level": true, "#h": ["a"], "authors": [id]}),
            json!({"top_level": true, "#h": ["a"], "#e": [id]}),
            json!({"top_level": true, "#h": ["a"], "since": 3}),
        ];
        for v in bad {
            let err = parse_json(v.clone()).expect_err(&v.to_string());
            assert!(matches!(err, Reason::Invalid(_)), "{v}: {err}");
        }
    }
}
