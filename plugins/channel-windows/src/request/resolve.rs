//! `resolve_thread_roots` request grammar (NIP-CW "Recovering summaries after deletion").

use super::fields::single_tag;
use crate::SUMMARY_KIND;
use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;

/// Most target ids one request may name, across all its recovery filters.
pub(crate) const MAX_TARGETS: usize = 100;
/// Extension keys a recovery filter takes (`limit` is accepted and has no effect:
/// the answer is one summary per distinct root, at most one per target).
const FIELDS: [&str; 1] = ["resolve_thread_roots"];

/// A valid recovery request: reply ids whose owning roots' summaries are wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolveRequest {
    pub(crate) channel: String,
    pub(crate) targets: Vec<String>,
}

pub(crate) fn parse(filter: &Filter) -> Result<ResolveRequest, Reason> {
    if let Some(key) = filter
        .extensions
        .keys()
        .find(|k| !FIELDS.contains(&k.as_str()))
    {
        return Err(Reason::invalid(format!(
            "resolve_thread_roots does not take {key}"
        )));
    }
    for (field, present) in [
        ("authors", filter.authors.is_some()),
        ("since", filter.since.is_some()),
        ("until", filter.until.is_some()),
    ] {
        if present {
            return Err(Reason::invalid(format!(
                "resolve_thread_roots does not take {field}"
            )));
        }
    }
    if filter.kinds.as_deref() != Some(&[SUMMARY_KIND]) {
        return Err(Reason::invalid(format!(
            "resolve_thread_roots needs kinds [{SUMMARY_KIND}]"
        )));
    }
    if let Some(name) = filter.tags.keys().find(|n| *n != "h") {
        return Err(Reason::invalid(format!(
            "resolve_thread_roots takes no #{name} filter (only one #h)"
        )));
    }
    let channel = single_tag(filter, "h", "resolve_thread_roots query")?;
    // Core already checked that ids are 64-character lowercase hex.
    let targets = filter.ids.clone().unwrap_or_default();
    if targets.is_empty() || targets.len() > MAX_TARGETS {
        return Err(Reason::invalid(format!(
            "resolve_thread_roots needs 1-{MAX_TARGETS} ids"
        )));
    }
    Ok(ResolveRequest { channel, targets })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse_json(v: Value) -> Result<ResolveRequest, Reason> {
        parse(&Filter::parse(&v).expect("valid NIP-01 filter"))
    }

    #[test]
    fn grammar() {
        let id = "d".repeat(64);
        let ok = parse_json(json!({"resolve_thread_roots": true, "kinds": [39005],
            "#h": ["c"], "ids": [id], "limit": 5}))
        .expect("valid");
        assert_eq!(ok.targets, vec![id.clone()]);
        let many: Vec<String> = (0..101).map(|i| format!("{i:064x}")).collect();
        for bad in [
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c"]}),
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c"], "ids": []}),
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c"], "ids": many}),
            json!({"resolve_thread_roots": true, "kinds": [9], "#h": ["c"], "ids": [id]}),
            json!({"resolve_thread_roots": true, "#h": ["c"], "ids": [id]}),
            json!({"resolve_thread_roots": true, "kinds": [39005], "ids": [id]}),
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c", "d"], "ids": [id]}),
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c"], "ids": [id],
                "top_level": true}),
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c"], "ids": [id],
                "#e": [id]}),
        ] {
            let err = parse_json(bad.clone()).expect_err(&bad.to_string());
            assert!(matches!(err, Reason::Invalid(_)), "{bad}: {err}");
        }
    }
}
