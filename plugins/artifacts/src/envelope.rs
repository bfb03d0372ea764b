//! The NIP-AR envelope of a kind-45010 revision ("Event format"): parsed and checked
//! before anything else looks at the event. Every rule refuses with `invalid:` naming it.

use crate::limits::Limits;
use buzz_core::error::Reason;
use buzz_nostr::event::Event;
use std::collections::HashMap;

/// Most tags a revision may carry (the spec's bound, independent of the relay's own).
pub(crate) const MAX_TAGS: usize = 256;
/// Longest type name, bytes.
pub(crate) const MAX_TYPE_BYTES: usize = 128;
/// Longest title, UTF-8 bytes.
pub(crate) const MAX_TITLE_BYTES: usize = 512;
/// The tags the envelope defines: each has exactly two string elements and occurs at
/// most once.
pub(crate) const ENVELOPE_TAGS: [&str; 8] = ["ar", "d", "h", "type", "title", "op", "root", "prev"];

/// What a revision does to its artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Update,
    Move,
    Delete,
    Restore,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Update => "update",
            Op::Move => "move",
            Op::Delete => "delete",
            Op::Restore => "restore",
        }
    }

    pub fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "create" => Op::Create,
            "update" => Op::Update,
            "move" => Op::Move,
            "delete" => Op::Delete,
            "restore" => Op::Restore,
            _ => return None,
        })
    }
}

/// A checked envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The artifact's stable UUID.
    pub d: String,
    /// Home channel of this revision.
    pub h: String,
    pub artifact_type: String,
    pub title: Option<String>,
    pub op: Op,
    pub root: Option<String>,
    pub prev: Option<String>,
}

/// Parse and check every envelope rule of `event` (a kind-45010 revision).
pub(crate) fn parse(event: &Event, limits: &Limits) -> Result<Envelope, Reason> {
    if event.tags.len() > MAX_TAGS {
        return Err(Reason::invalid(format!(
            "an artifact revision carries at most {MAX_TAGS} tags"
        )));
    }
    let mut envelope: HashMap<&str, &str> = HashMap::new();
    let mut total_bytes = 0usize;
    for tag in &event.tags {
        let Some(name) = tag.first() else {
            return Err(Reason::invalid("an artifact tag must not be empty"));
        };
        total_bytes += tag.iter().map(String::len).sum::<usize>();
        if let Some(listed) = ENVELOPE_TAGS.iter().find(|t| **t == name.as_str()) {
            if tag.len() != 2 {
                return Err(Reason::invalid(format!(
                    "the {listed} tag must have exactly two string elements"
                )));
            }
            if envelope.insert(listed, tag[1].as_str()).is_some() {
                return Err(Reason::invalid(format!(
                    "the {listed} tag occurs more than once"
                )));
            }
            // The envelope's own bounds apply to it (below); the configurable ones to
            // the client-defined tags queries match on.
            continue;
        }
        if name.len() > limits.max_tag_name_bytes {
            return Err(Reason::invalid(format!(
                "a tag name is longer than {} bytes (maxTagNameBytes)",
                limits.max_tag_name_bytes
            )));
        }
        if tag
            .get(1)
            .is_some_and(|v| v.len() > limits.max_tag_value_bytes)
        {
            return Err(Reason::invalid(format!(
                "the {name} tag value is longer than {} bytes (maxTagValueBytes)",
                limits.max_tag_value_bytes
            )));
        }
    }
    if total_bytes > limits.max_tag_bytes {
        return Err(Reason::invalid(format!(
            "the tags hold {total_bytes} bytes; at most {} (maxTagBytes)",
            limits.max_tag_bytes
        )));
    }
    let required = |name: &str| {
        envelope
            .get(name)
            .copied()
            .ok_or_else(|| Reason::invalid(format!("missing {name} tag")))
    };
    if required("ar")? != "1" {
        return Err(Reason::invalid(
            "unsupported envelope version: ar must be 1",
        ));
    }
    let d = required("d")?;
    if !is_uuid(d) {
        return Err(Reason::invalid(
            "d must be a lowercase, hyphenated, non-nil UUID",
        ));
    }
    let h = required("h")?;
    if !is_uuid(h) {
        return Err(Reason::invalid(
            "h must be a lowercase, hyphenated, non-nil UUID",
        ));
    }
    let artifact_type = required("type")?;
    check_type(artifact_type)?;
    let op = Op::parse(required("op")?).ok_or_else(|| {
        Reason::invalid("op must be one of create, update, move, delete, restore")
    })?;
    let title = envelope.get("title").copied();
    match (op, title) {
        (Op::Delete, Some(_)) => {
            return Err(Reason::invalid("a delete carries no title tag"));
        }
        (Op::Delete, None) => {}
        (_, None) => return Err(Reason::invalid("missing title tag")),
        (_, Some(t)) if t.trim().is_empty() => {
            return Err(Reason::invalid("title must not be blank"));
        }
        (_, Some(t)) if t.len() > MAX_TITLE_BYTES => {
            return Err(Reason::invalid(format!(
                "title is longer than {MAX_TITLE_BYTES} bytes"
            )));
        }
        _ => {}
    }
    let root = envelope.get("root").copied();
    if root.is_some_and(|r| !is_event_id(r)) {
        return Err(Reason::invalid("root must be 64 lowercase hex characters"));
    }
    let prev = envelope.get("prev").copied();
    match (op, prev) {
        (Op::Create, Some(_)) => return Err(Reason::invalid("a create carries no prev tag")),
        (Op::Create, None) => {}
        (_, None) => return Err(Reason::invalid("missing prev tag")),
        (_, Some(p)) if !is_event_id(p) => {
            return Err(Reason::invalid("prev must be 64 lowercase hex characters"));
        }
        _ => {}
    }
    if op == Op::Delete {
        if !event.content.is_empty() {
            return Err(Reason::invalid("a delete has empty content"));
        }
        if let Some(extra) = event
            .tags
            .iter()
            .find(|t| !ENVELOPE_TAGS.contains(&t[0].as_str()))
        {
            return Err(Reason::invalid(format!(
                "a delete carries only envelope tags, not {}",
                extra[0]
            )));
        }
    }
    Ok(Envelope {
        d: d.to_owned(),
        h: h.to_owned(),
        artifact_type: artifact_type.to_owned(),
        title: title.map(str::to_owned),
        op,
        root: root.map(str::to_owned),
        prev: prev.map(str::to_owned),
    })
}

/// Lowercase, hyphenated (8-4-4-4-12), not all zeros.
pub(crate) fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
        && b.iter().any(|c| !matches!(c, b'0' | b'-'))
}

/// 64 lowercase hex characters.
pub(crate) fn is_event_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Dot-separated lowercase ASCII components, each starting with a letter and otherwise
/// letters, digits, `_` or `-`; at most 128 bytes.
fn check_type(t: &str) -> Result<(), Reason> {
    let bad = || {
        Reason::invalid(
            "type must be dot-separated lowercase components, each starting with a letter \
             (then letters, digits, _ or -)",
        )
    };
    if t.len() > MAX_TYPE_BYTES {
        return Err(Reason::invalid(format!(
            "type is longer than {MAX_TYPE_BYTES} bytes"
        )));
    }
    for part in t.split('.') {
        let mut bytes = part.bytes();
        match bytes.next() {
            Some(c) if c.is_ascii_lowercase() => {}
            _ => return Err(bad()),
        }
        if !bytes.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-') {
            return Err(bad());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_and_ids() {
        assert!(is_uuid("04737c81-e5e8-4412-bb47-f446813cfeba"));
        assert!(!is_uuid("04737C81-E5E8-4412-BB47-F446813CFEBA"));
        assert!(!is_uuid("04737c81e5e84412bb47f446813cfeba"));
        assert!(!is_uuid("00000000-0000-0000-0000-000000000000"));
        assert!(!is_uuid("04737c81-e5e8-4412-bb47-f446813cfeb"));
        assert!(is_event_id(&"a".repeat(64)));
        assert!(!is_event_id(&"A".repeat(64)));
        assert!(!is_event_id(&"a".repeat(63)));
    }

    #[test]
    fn type_grammar() {
        for ok in ["buzz.task", "acme.crm-lead", "a", "x1.y_2"] {
            assert!(check_type(ok).is_ok(), "{ok}");
        }
        for bad in [
            "Buzz.task",
            "buzz..task",
            ".buzz",
            "buzz.",
            "1buzz",
            "buzz.t ask",
            "",
        ] {
            assert!(check_type(bad).is_err(), "{bad}");
        }
        assert!(check_type(&format!("a{}", ".b".repeat(64))).is_err());
        assert!(check_type(&"a".repeat(128)).is_ok());
    }
}
