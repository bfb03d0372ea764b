//! Thread-mode request grammar (NIP-CW "Thread Mode / Request"). Strict: unknown fields,
//! malformed values and fields of other modes are rejected, because the request is
//! bound byte-for-byte into the `39007` bounds and must mean exactly one thing.

use super::fields::{hex64, single_tag, window_cursor};
use crate::cursor::Cursor;
use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;
use buzz_nostr::kinds::CONVERSATION;
use serde_json::Value;

pub(crate) const DEFAULT_LIMIT: u64 = 50;
pub(crate) const MAX_LIMIT: u64 = 200;
pub(crate) const DEFAULT_DEPTH: u64 = 100;
pub(crate) const MAX_DEPTH: u64 = 100;
/// Most `kinds` entries a thread window takes.
const MAX_KINDS: usize = 4;
/// The only extension keys a thread window takes.
const FIELDS: [&str; 4] = ["thread_window", "depth_limit", "include_aux", "before_id"];

/// A valid thread-window request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadRequest {
    pub(crate) channel: String,
    /// Lowercase root event id.
    pub(crate) root: String,
    /// Sorted, distinct, each one of the conversation kinds.
    pub(crate) kinds: Vec<u32>,
    pub(crate) limit: u64,
    pub(crate) depth_limit: u64,
    pub(crate) include_aux: bool,
    /// `None` = newest reply first (head page).
    pub(crate) cursor: Option<Cursor>,
}

pub(crate) fn parse(filter: &Filter) -> Result<ThreadRequest, Reason> {
    let ext = &filter.extensions;
    if let Some(key) = ext.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Reason::invalid(format!(
            "a thread window does not take {key}"
        )));
    }
    for (field, present) in [
        ("ids", filter.ids.is_some()),
        ("authors", filter.authors.is_some()),
        ("since", filter.since.is_some()),
    ] {
        if present {
            return Err(Reason::invalid(format!(
                "a thread window does not take {field}"
            )));
        }
    }
    if let Some(name) = filter.tags.keys().find(|n| *n != "h" && *n != "e") {
        return Err(Reason::invalid(format!(
            "a thread window takes no #{name} filter (only one #h and one #e)"
        )));
    }
    let channel = single_tag(filter, "h", "thread window")?;
    let root = hex64(&single_tag(filter, "e", "thread window")?, "#e root id")?;
    let limit = match filter.limit {
        None => DEFAULT_LIMIT,
        Some(l) if (1..=MAX_LIMIT).contains(&l) => l,
        Some(l) => {
            return Err(Reason::invalid(format!(
                "thread window limit must be 1-{MAX_LIMIT}, got {l}"
            )))
        }
    };
    let depth_limit = match ext.get("depth_limit") {
        None => DEFAULT_DEPTH,
        Some(v) => match v.as_u64() {
            Some(d) if (1..=MAX_DEPTH).contains(&d) => d,
            _ => {
                return Err(Reason::invalid(format!(
                    "thread window depth_limit must be an integer 1-{MAX_DEPTH}"
                )))
            }
        },
    };
    let include_aux = match ext.get("include_aux") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(Reason::invalid("include_aux must be a boolean")),
    };
    Ok(ThreadRequest {
        channel,
        root,
        kinds: kinds(filter.kinds.as_deref())?,
        limit,
        depth_limit,
        include_aux,
        cursor: window_cursor(filter)?,
    })
}

/// One to four conversation kinds, normalized to a sorted distinct list.
fn kinds(kinds: Option<&[u32]>) -> Result<Vec<u32>, Reason> {
    let wrong = || {
        Reason::invalid(format!(
            "thread window kinds must hold 1-{MAX_KINDS} of {CONVERSATION:?}"
        ))
    };
    let kinds = kinds.ok_or_else(wrong)?;
    if kinds.is_empty()
        || kinds.len() > MAX_KINDS
        || !kinds.iter().all(|k| CONVERSATION.contains(k))
    {
        return Err(wrong());
    }
    let mut kinds = kinds.to_vec();
    kinds.sort_unstable();
    kinds.dedup();
    Ok(kinds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_json(v: Value) -> Result<ThreadRequest, Reason> {
        parse(&Filter::parse(&v).expect("valid NIP-01 filter"))
    }

    #[test]
    fn defaults_and_normalisation() {
        let root = "AB".repeat(32);
        let r = parse_json(json!({"thread_window": true, "#h": ["c"], "#e": [root],
            "kinds": [40002, 9, 9]}))
        .expect("valid");
        assert_eq!(
            r,
            ThreadRequest {
                channel: "c".into(),
                root: root.to_lowercase(),
                kinds: vec![9, 40002],
                limit: 50,
                depth_limit: 100,
                include_aux: false,
                cursor: None,
            }
        );
    }

    #[test]
    fn rejections() {
        let id = "a".repeat(64);
        let ok = json!({"thread_window": true, "#h": ["c"], "#e": [id], "kinds": [9]});
        let with = |k: &str, v: Value| {
            let mut f = ok.clone();
            f[k] = v;
            f
        };
        let without = |k: &str| {
            let mut f = ok.clone();
            f.as_object_mut().expect("object").remove(k);
            f
        };
        parse_json(ok.clone()).expect("the base request is valid");
        let bad = [
            without("kinds"),
            without("#h"),
            without("#e"),
            with("kinds", json!([])),
            with("kinds", json!([1])),
            with("kinds", json!([40008])),
            with("kinds", json!([9, 40002, 45001, 45003, 9])),
            with("#h", json!(["a", "b"])),
            with("#e", json!([id, id])),
            with("#e", json!(["abc"])),
            with("#p", json!([id])),
            with("limit", json!(0)),
            with("limit", json!(201)),
            with("depth_limit", json!(0)),
            with("depth_limit", json!(101)),
            with("depth_limit", json!("5")),
            with("include_aux", json!(1)),
            with("until", json!(5)),
            with("before_id", json!(id)),
            with("top_level", json!(true)),
            with("top_level", json!(false)),
            with("resolve_thread_roots", json!(true)),
            with("thread_cursor", json!(5)),
            with("page", json!(1)),
            with("ids", json!([id])),
            with("authors", json!([id])),
            with("since", json!(1)),
            with("surprise", json!(null)),
        ];
        for v in bad {
            let err = parse_json(v.clone()).expect_err(&v.to_string());
            assert!(matches!(err, Reason::Invalid(_)), "{v}: {err}");
        }
        let mut both = with("until", json!(7));
        both["before_id"] = json!(id);
        let r = parse_json(both).expect("both cursor fields");
        assert_eq!(r.cursor, Some(Cursor::new(7, id)));
    }
}
