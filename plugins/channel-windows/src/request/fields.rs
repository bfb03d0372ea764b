//! Field parsing shared by the request grammars. Every helper either returns a value the
//! mode can trust or an `invalid:` reason naming the field; nothing is silently dropped.

use crate::cursor::Cursor;
use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;
use serde_json::{Map, Value};

/// Is `key` present with the JSON value `true` (not merely truthy)?
pub(crate) fn is_true(ext: &Map<String, Value>, key: &str) -> bool {
    ext.get(key) == Some(&Value::Bool(true))
}

/// A boolean extension field: absent → `None`; present but not a boolean → rejected.
pub(crate) fn optional_bool(ext: &Map<String, Value>, key: &str) -> Result<Option<bool>, Reason> {
    match ext.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(Reason::invalid(format!("{key} must be a boolean"))),
    }
}

/// Exactly 64 hexadecimal characters; returned in the canonical lowercase form.
pub(crate) fn hex64(value: &str, field: &str) -> Result<String, Reason> {
    if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(value.to_ascii_lowercase())
    } else {
        Err(Reason::invalid(format!(
            "{field} must be exactly 64 hexadecimal characters"
        )))
    }
}

/// A string extension field holding a 64-hex id.
pub(crate) fn hex64_field(value: &Value, field: &str) -> Result<String, Reason> {
    match value.as_str() {
        Some(s) => hex64(s, field),
        None => Err(Reason::invalid(format!(
            "{field} must be a string of 64 hexadecimal characters"
        ))),
    }
}

/// The single value of tag filter `#name`; zero or several values are rejected.
pub(crate) fn single_tag(filter: &Filter, name: &str, mode: &str) -> Result<String, Reason> {
    match filter.tags.get(name).map(Vec::as_slice) {
        Some([value]) => Ok(value.clone()),
        Some([]) | None => Err(Reason::invalid(format!(
            "a {mode} needs exactly one #{name} value, got none"
        ))),
        Some(values) => Err(Reason::invalid(format!(
            "a {mode} needs exactly one #{name} value, got {}",
            values.len()
        ))),
    }
}

/// The window request cursor: `until` + `before_id`, both or neither.
///
/// `until` was already parsed strictly by core (a non-negative integer that fits the
/// relay's `i64` timestamps); `before_id` must be 64 hex characters. A half or malformed
/// cursor is an error — never demoted to a head request, because a timestamp-only cursor
/// loses or repeats same-second rows (NIP-CW "Channel-mode Request").
pub(crate) fn window_cursor(filter: &Filter) -> Result<Option<Cursor>, Reason> {
    let before_id = filter
        .extensions
        .get("before_id")
        .map(|v| hex64_field(v, "before_id"))
        .transpose()?;
    match (filter.until, before_id) {
        (None, None) => Ok(None),
        (Some(created_at), Some(id)) => Ok(Some(Cursor::new(created_at, id))),
        (Some(_), None) => Err(Reason::invalid(
            "until without before_id: a window cursor needs both (or neither for the head)",
        )),
        (None, Some(_)) => Err(Reason::invalid(
            "before_id without until: a window cursor needs both (or neither for the head)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(v: Value) -> Filter {
        Filter::parse(&v).expect("valid NIP-01 filter")
    }

    #[test]
    fn cursors_are_both_or_neither_and_strict() {
        let id = "ab".repeat(32);
        assert_eq!(window_cursor(&filter(json!({}))).expect("head"), None);
        assert_eq!(
            window_cursor(&filter(json!({"until": 5, "before_id": id.to_uppercase()})))
                .expect("cursor"),
            Some(Cursor::new(5, id.clone()))
        );
        let bad = [
            json!({"until": 5}),
            json!({"before_id": id}),
            json!({"until": 5, "before_id": "abc"}),
            json!({"until": 5, "before_id": 7}),
            json!({"until": 5, "before_id": format!("{}zz", &id[..62])}),
        ];
        for v in bad {
            let err = window_cursor(&filter(v.clone())).expect_err(&v.to_string());
            assert!(matches!(err, Reason::Invalid(_)), "{v}: {err}");
        }
    }

    #[test]
    fn booleans_are_booleans() {
        let ext = filter(json!({"a": true, "b": "true", "c": 1})).extensions;
        assert!(is_true(&ext, "a"));
        assert!(!is_true(&ext, "b") && !is_true(&ext, "c"));
        assert_eq!(optional_bool(&ext, "a").expect("bool"), Some(true));
        assert_eq!(optional_bool(&ext, "missing").expect("absent"), None);
        assert!(optional_bool(&ext, "b").is_err() && optional_bool(&ext, "c").is_err());
    }
}
