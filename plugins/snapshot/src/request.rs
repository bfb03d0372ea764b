//! The four requests of the transport, parsed strictly from their one filter: every key
//! of an action is required, no other key is accepted, and the capture query takes
//! current-state tag predicates only (no `limit`, no `offset`, no continuation).

use crate::error;
use crate::limits::Limits;
use buzz_artifacts::{ArtifactQuery, CurrentQuery, QUERY_KEY};
use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The value of `"artifact"` this transport answers.
pub const SNAPSHOT: &str = "snapshot";

/// A parsed capture query.
#[derive(Debug, Clone)]
pub(crate) struct CaptureQuery {
    /// The artifact plugin's form of it (every match wanted: the limit is ours).
    pub current: CurrentQuery,
    /// The `#type` values, when the query names types: the candidate bound applies
    /// after this immutable predicate.
    pub types: Option<Vec<String>>,
    /// The query in one canonical text (names sorted, values sorted and unique): what
    /// a token is bound to and what operators see.
    pub canonical: String,
}

impl CaptureQuery {
    /// The artifact plugin's form of a capture's canonical query text (a header's
    /// `query`); `None` when it no longer parses (the artifact limits were lowered since).
    pub(crate) fn current_of(
        canonical: &str,
        artifact_limits: &buzz_artifacts::Limits,
    ) -> Option<CurrentQuery> {
        let value: Value = serde_json::from_str(canonical).ok()?;
        capture_query(&value, artifact_limits)
            .ok()
            .map(|q| q.current)
    }
}

/// One snapshot request.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    Start(CaptureQuery),
    Page {
        token: String,
        cursor: String,
    },
    Bodies {
        token: String,
        revision_ids: Vec<String>,
    },
    Complete {
        token: String,
    },
}

/// Longest token or cursor accepted (ours are far shorter).
const MAX_TOKEN_CHARS: usize = 256;

impl Action {
    pub(crate) fn parse(
        filter: &Filter,
        artifact_limits: &buzz_artifacts::Limits,
        limits: &Limits,
    ) -> Result<Action, Reason> {
        if let Some(field) = standard_field(filter) {
            return Err(error::invalid(format!("snapshot requests take no {field}")));
        }
        let fields = &filter.extensions;
        let action = match fields.get("action") {
            Some(Value::String(a)) => a.as_str(),
            Some(_) => return Err(error::invalid("action must be a string")),
            None => return Err(error::invalid("action is missing")),
        };
        let allowed: &[&str] = match action {
            "start" => &["query"],
            "page" => &["token", "cursor"],
            "bodies" => &["token", "revisionIds"],
            "complete" => &["token"],
            other => {
                return Err(error::invalid(format!(
                    "unknown action {other:?}: start, page, bodies or complete"
                )))
            }
        };
        for key in fields.keys() {
            if key != QUERY_KEY && key != "action" && !allowed.contains(&key.as_str()) {
                return Err(error::invalid(format!("{action} takes no {key}")));
            }
        }
        for key in allowed {
            if !fields.contains_key(*key) {
                return Err(error::invalid(format!("{action} needs {key}")));
            }
        }
        Ok(match action {
            "start" => Action::Start(capture_query(&fields["query"], artifact_limits)?),
            "page" => Action::Page {
                token: opaque(fields, "token")?,
                cursor: opaque(fields, "cursor")?,
            },
            "bodies" => Action::Bodies {
                token: opaque(fields, "token")?,
                revision_ids: revision_ids(&fields["revisionIds"], limits)?,
            },
            _ => Action::Complete {
                token: opaque(fields, "token")?,
            },
        })
    }
}

fn standard_field(filter: &Filter) -> Option<String> {
    let present = [
        ("ids", filter.ids.is_some()),
        ("authors", filter.authors.is_some()),
        ("kinds", filter.kinds.is_some()),
        ("since", filter.since.is_some()),
        ("until", filter.until.is_some()),
        ("limit", filter.limit.is_some()),
    ];
    if let Some((name, _)) = present.iter().find(|(_, p)| *p) {
        return Some((*name).to_owned());
    }
    filter.tags.keys().next().map(|name| format!("#{name}"))
}

fn opaque(fields: &Map<String, Value>, key: &str) -> Result<String, Reason> {
    match fields.get(key) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_TOKEN_CHARS => Ok(s.clone()),
        Some(Value::String(_)) => Err(error::invalid(format!(
            "{key} must be 1 to {MAX_TOKEN_CHARS} characters"
        ))),
        _ => Err(error::invalid(format!("{key} must be a string"))),
    }
}

fn revision_ids(value: &Value, limits: &Limits) -> Result<Vec<String>, Reason> {
    let Value::Array(items) = value else {
        return Err(error::invalid("revisionIds must be an array of event ids"));
    };
    if items.is_empty() {
        return Err(error::invalid("revisionIds lists no revision"));
    }
    if items.len() > limits.body_rows {
        return Err(error::limit(format!(
            "revisionIds lists {} revisions; at most {} per request (bodyRows)",
            items.len(),
            limits.body_rows
        )));
    }
    let mut seen = HashSet::new();
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id = match item {
            Value::String(id) if is_event_id(id) => id,
            _ => {
                return Err(error::invalid(
                    "each revision id must be 64 lowercase hex characters",
                ))
            }
        };
        if !seen.insert(id.as_str()) {
            return Err(error::invalid(format!("revision {id} is listed twice")));
        }
        ids.push(id.clone());
    }
    Ok(ids)
}

fn is_event_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The capture query: a current-state query with tag predicates only.
fn capture_query(
    value: &Value,
    artifact_limits: &buzz_artifacts::Limits,
) -> Result<CaptureQuery, Reason> {
    let Value::Object(object) = value else {
        return Err(error::invalid("query must be an object"));
    };
    for key in ["limit", "offset", buzz_artifacts::AFTER_KEY] {
        if object.contains_key(key) {
            return Err(error::invalid(format!(
                "a capture query takes no {key}: a capture holds every match"
            )));
        }
    }
    if object.get(QUERY_KEY) != Some(&Value::String("current".into())) {
        return Err(error::invalid(
            "a capture query is a current-state query: {\"artifact\":\"current\", …}",
        ));
    }
    let filter = Filter::parse(value).map_err(|refusal| error::contract(refusal.into()))?;
    let current = match ArtifactQuery::parse(&filter, artifact_limits).map_err(error::contract)? {
        ArtifactQuery::Current(q) => q,
        ArtifactQuery::History(_) => {
            return Err(error::invalid("a capture query is a current-state query"))
        }
    };
    let canonical_predicates: BTreeMap<String, Vec<String>> = current
        .predicates
        .iter()
        .map(|(name, values)| {
            let mut values = values.clone();
            values.sort();
            values.dedup();
            (format!("#{name}"), values)
        })
        .collect();
    let mut canonical = Map::new();
    canonical.insert(QUERY_KEY.into(), Value::String("current".into()));
    for (name, values) in canonical_predicates {
        canonical.insert(name, Value::from(values));
    }
    let types = current
        .predicates
        .iter()
        .find(|(name, _)| name == "type")
        .map(|(_, values)| values.clone());
    Ok(CaptureQuery {
        current,
        types,
        canonical: Value::Object(canonical).to_string(),
    })
}
