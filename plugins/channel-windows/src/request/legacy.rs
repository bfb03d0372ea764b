//! Legacy oldest-first thread request (NIP-CW "Legacy Oldest-first Threads").
//!
//! Selected by one `#e` root plus `depth_limit`, with `thread_window` absent or false.
//! This grammar is older and more forgiving than thread mode's: it keeps the historical
//! sentinels (`thread_cursor: -1`, `depth_limit: 2147483647`), the camel-case aliases
//! and timestamp-only continuation, and ignores `kinds` for row selection.

use super::fields::{hex64, hex64_field, optional_bool, single_tag};
use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;
use serde_json::{Map, Value};

pub(crate) const DEFAULT_LIMIT: u64 = 100;
pub(crate) const MAX_LIMIT: u64 = 500;
/// `depth_limit` is bound as a signed 32-bit integer; this value means "any depth".
pub(crate) const UNBOUNDED_DEPTH: i64 = i32::MAX as i64;
/// `thread_cursor` value meaning "start at the oldest reply".
const START_SENTINEL: i64 = -1;

/// Where a legacy page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LegacyCursor {
    /// The oldest reply.
    Start,
    /// Replies after this point: `created_at > ts OR (created_at = ts AND id > id)`;
    /// without an id (timestamp-only, kept for compatibility) `created_at > ts`.
    After { created_at: i64, id: Option<String> },
}

/// A valid legacy thread request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LegacyRequest {
    pub(crate) root: String,
    /// When given, the root must belong to this channel.
    pub(crate) channel: Option<String>,
    /// Deepest reply depth returned (1 = direct replies only).
    pub(crate) max_depth: i64,
    pub(crate) cursor: LegacyCursor,
    pub(crate) limit: u64,
    pub(crate) include_aux: bool,
}

pub(crate) fn parse(filter: &Filter) -> Result<LegacyRequest, Reason> {
    let ext = &filter.extensions;
    let root = hex64(
        &single_tag(filter, "e", "legacy thread query")?,
        "#e root id",
    )?;
    let channel = match filter.tags.get("h") {
        None => None,
        Some(_) => Some(single_tag(filter, "h", "legacy thread query")?),
    };
    let max_depth = match ext.get("depth_limit").and_then(Value::as_i64) {
        Some(d) if (0..=UNBOUNDED_DEPTH).contains(&d) => d,
        _ => {
            return Err(Reason::invalid(format!(
                "depth_limit must be an integer 0-{UNBOUNDED_DEPTH}"
            )))
        }
    };
    Ok(LegacyRequest {
        root,
        channel,
        max_depth,
        cursor: cursor(ext)?,
        limit: filter.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
        include_aux: optional_bool(ext, "include_aux")?.unwrap_or(false),
    })
}

/// One field under its snake-case name or its camel-case alias; both given must agree.
fn aliased<'a>(
    ext: &'a Map<String, Value>,
    snake: &str,
    camel: &str,
) -> Result<Option<&'a Value>, Reason> {
    match (ext.get(snake), ext.get(camel)) {
        (Some(a), Some(b)) if a != b => Err(Reason::invalid(format!(
            "{snake} and {camel} disagree; send one"
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

fn cursor(ext: &Map<String, Value>) -> Result<LegacyCursor, Reason> {
    let at = aliased(ext, "thread_cursor", "threadCursor")?;
    let id = aliased(ext, "thread_cursor_id", "threadCursorId")?;
    let Some(at) = at else {
        return match id {
            None => Ok(LegacyCursor::Start),
            Some(_) => Err(Reason::invalid("thread_cursor_id needs thread_cursor")),
        };
    };
    match at.as_i64() {
        Some(START_SENTINEL) => Ok(LegacyCursor::Start),
        Some(created_at) if created_at >= 0 => Ok(LegacyCursor::After {
            created_at,
            id: id.map(|v| hex64_field(v, "thread_cursor_id")).transpose()?,
        }),
        _ => Err(Reason::invalid(
            "thread_cursor must be a non-negative integer, or -1 for the oldest reply",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_json(v: Value) -> Result<LegacyRequest, Reason> {
        parse(&Filter::parse(&v).expect("valid NIP-01 filter"))
    }

    #[test]
    fn sentinels_aliases_and_defaults() {
        let root = "b".repeat(64);
        let id = "c".repeat(64);
        let base = |extra: Value| {
            let mut f = json!({"#e": [root], "depth_limit": 2147483647});
            for (k, v) in extra.as_object().expect("object") {
                f[k] = v.clone();
            }
            parse_json(f)
        };
        let r = base(json!({})).expect("valid");
        assert_eq!(
            (r.max_depth, r.limit, r.cursor.clone(), r.channel.clone()),
            (UNBOUNDED_DEPTH, 100, LegacyCursor::Start, None)
        );
        assert_eq!(base(json!({"limit": 9000})).expect("valid").limit, 500);
        let start = base(json!({"thread_cursor": -1, "thread_cursor_id": "0".repeat(64)}));
        assert_eq!(start.expect("sentinel").cursor, LegacyCursor::Start);
        let after = LegacyCursor::After {
            created_at: 5,
            id: Some(id.clone()),
        };
        let snake = base(json!({"thread_cursor": 5, "thread_cursor_id": id}));
        assert_eq!(snake.expect("snake").cursor, after);
        let camel = base(json!({"threadCursor": 5, "threadCursorId": id}));
        assert_eq!(camel.expect("camel").cursor, after);
        let ts_only = base(json!({"thread_cursor": 5})).expect("timestamp only");
        assert_eq!(
            ts_only.cursor,
            LegacyCursor::After {
                created_at: 5,
                id: None
            }
        );
        for bad in [
            json!({"thread_cursor": -2}),
            json!({"thread_cursor": "5"}),
            json!({"thread_cursor_id": id}),
            json!({"thread_cursor": 5, "thread_cursor_id": "zz"}),
            json!({"thread_cursor": 5, "threadCursor": 6}),
            json!({"depth_limit": -1}),
            json!({"depth_limit": 2147483648u64}),
            json!({"include_aux": "no"}),
            json!({"#h": ["a", "b"]}),
        ] {
            let err = base(bad.clone()).expect_err(&bad.to_string());
            assert!(matches!(err, Reason::Invalid(_)), "{bad}: {err}");
        }
    }
}
