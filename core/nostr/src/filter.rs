//! NIP-01 filters: strict parsing of the standard fields, matching for live fan-out, and
//! the extension fields (unknown keys) that plugins may claim.
//!
//! Unknown keys are kept, not rejected: an extension-unaware relay serves such a filter
//! by its standard fields (NIP-CW "Degradation"), and a plugin that understands a key
//! claims the filter instead (see [`crate::plugin::Plugin::claims_filter`]).

use crate::error::Refusal;
use crate::event::Event;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A parsed NIP-01 filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub ids: Option<Vec<String>>,
    pub authors: Option<Vec<String>>,
    pub kinds: Option<Vec<u32>>,
    /// `#name` → accepted first values, for any tag name (multi-letter names included).
    pub tags: BTreeMap<String, Vec<String>>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub limit: Option<u64>,
    /// Every key that is not a standard field, verbatim.
    pub extensions: Map<String, Value>,
}

impl Filter {
    /// Parse one filter object, rejecting wrongly typed standard fields.
    pub fn parse(value: &Value) -> Result<Filter, Refusal> {
        let obj = value
            .as_object()
            .ok_or_else(|| Refusal::invalid("a filter must be a JSON object"))?;
        let mut filter = Filter::default();
        for (key, val) in obj {
            match key.as_str() {
                "ids" => filter.ids = Some(hex_list(val, key)?),
                "authors" => filter.authors = Some(hex_list(val, key)?),
                "kinds" => filter.kinds = Some(kind_list(val)?),
                "since" => filter.since = Some(timestamp(val, key)?),
                "until" => filter.until = Some(timestamp(val, key)?),
                "limit" => {
                    filter.limit = Some(val.as_u64().ok_or_else(|| {
                        Refusal::invalid("filter limit must be a non-negative integer")
                    })?)
                }
                tag if tag.starts_with('#') && tag.len() > 1 => {
                    filter
                        .tags
                        .insert(tag[1..].to_owned(), string_list(val, key)?);
                }
                _ => {
                    filter.extensions.insert(key.clone(), val.clone());
                }
            }
        }
        Ok(filter)
    }

    /// Parse a JSON array of filter objects (the `POST /query` body, a REQ's tail).
    pub fn parse_many(values: &[Value]) -> Result<Vec<Filter>, Refusal> {
        values.iter().map(Filter::parse).collect()
    }

    /// Does `event` satisfy every standard condition of this filter?
    /// (`limit` and extensions do not take part in matching.)
    pub fn matches(&self, event: &Event) -> bool {
        fn within<T: PartialEq>(list: &Option<Vec<T>>, value: &T) -> bool {
            list.as_ref().is_none_or(|l| l.contains(value))
        }
        within(&self.ids, &event.id)
            && within(&self.authors, &event.pubkey)
            && within(&self.kinds, &event.kind)
            && self.since.is_none_or(|s| event.created_at >= s)
            && self.until.is_none_or(|u| event.created_at <= u)
            && self.tags.iter().all(|(name, values)| {
                event
                    .tag_values(name)
                    .any(|v| values.iter().any(|want| want == v))
            })
    }

    /// Values this filter holds: ids, authors, kinds and every tag list together (what
    /// `limits.max_filter_values` counts; each is one SQL parameter when it is read).
    pub fn value_count(&self) -> usize {
        self.ids.as_ref().map_or(0, Vec::len)
            + self.authors.as_ref().map_or(0, Vec::len)
            + self.kinds.as_ref().map_or(0, Vec::len)
            + self.tags.values().map(Vec::len).sum::<usize>()
    }

    /// True when some list is present but empty: such a filter can match nothing.
    pub fn is_empty_match(&self) -> bool {
        self.ids.as_ref().is_some_and(Vec::is_empty)
            || self.authors.as_ref().is_some_and(Vec::is_empty)
            || self.kinds.as_ref().is_some_and(Vec::is_empty)
            || self.tags.values().any(Vec::is_empty)
            || matches!((self.since, self.until), (Some(s), Some(u)) if s > u)
    }

    /// The channel ids this filter names with `#h`, if any.
    pub fn channels(&self) -> Option<&[String]> {
        self.tags.get("h").map(Vec::as_slice)
    }
}

fn list<'a>(val: &'a Value, key: &str) -> Result<&'a Vec<Value>, Refusal> {
    // How many values a filter may hold is the query service's rule
    // (`limits.max_filter_values`); the message size bounds what gets this far.
    val.as_array()
        .ok_or_else(|| Refusal::invalid(format!("filter {key} must be an array")))
}

fn string_list(val: &Value, key: &str) -> Result<Vec<String>, Refusal> {
    list(val, key)?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| Refusal::invalid(format!("filter {key} must hold strings")))
        })
        .collect()
}

fn hex_list(val: &Value, key: &str) -> Result<Vec<String>, Refusal> {
    let values = string_list(val, key)?;
    for v in &values {
        let ok = v.len() == 64
            && v.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !ok {
            return Err(Refusal::invalid(format!(
                "filter {key} must hold 64-character lowercase hex strings"
            )));
        }
    }
    Ok(values)
}

fn kind_list(val: &Value) -> Result<Vec<u32>, Refusal> {
    list(val, "kinds")?
        .iter()
        .map(|v| {
            v.as_u64()
                .filter(|k| *k <= 65_535)
                .map(|k| k as u32)
                .ok_or_else(|| Refusal::invalid("filter kinds must hold integers 0-65535"))
        })
        .collect()
}

fn timestamp(val: &Value, key: &str) -> Result<i64, Refusal> {
    val.as_u64()
        .and_then(|v| i64::try_from(v).ok())
        .ok_or_else(|| Refusal::invalid(format!("filter {key} must be a non-negative integer")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrongly_typed_fields_are_rejected() {
        let bad = [
            json!([]),
            json!({"kinds": "1"}),
            json!({"kinds": [-1]}),
            json!({"kinds": [70000]}),
            json!({"ids": ["xyz"]}),
            json!({"authors": "abc"}),
            json!({"since": -5}),
            json!({"until": "now"}),
            json!({"limit": 1.5}),
            json!({"#e": "abc"}),
            json!({"#t": [1]}),
        ];
        for value in bad {
            let err = Filter::parse(&value).expect_err(&value.to_string());
            assert!(err.to_string().starts_with("invalid: "), "{err}");
        }
    }

    #[test]
    fn extension_keys_are_kept_and_multi_letter_tags_parsed() {
        let f = Filter::parse(&json!({"kinds":[1], "#type":["doc"], "top_level": true}))
            .expect("valid");
        assert_eq!(f.tags.get("type"), Some(&vec!["doc".to_owned()]));
        assert_eq!(f.extensions.get("top_level"), Some(&json!(true)));
    }

    #[test]
    fn matching_uses_first_tag_values() {
        let keys = crate::keys::Keys::generate();
        let ev = keys.sign(1, vec![vec!["t".into(), "rust".into(), "x".into()]], "", 10);
        let f = |v: Value| Filter::parse(&v).expect("valid");
        assert!(f(json!({"#t":["rust"]})).matches(&ev));
        assert!(!f(json!({"#t":["x"]})).matches(&ev));
        assert!(f(json!({"kinds":[1], "since": 10, "until": 10})).matches(&ev));
        assert!(!f(json!({"since": 11})).matches(&ev));
        assert!(f(json!({"authors":[keys.pubkey()]})).matches(&ev));
    }
}
