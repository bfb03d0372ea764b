//! NIP-01 client messages in, relay messages out.

use crate::error::Reason;
use buzz_nostr::event::Event;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Longest subscription id accepted (NIP-01).
pub(crate) const MAX_SUB_ID: usize = 64;

pub(crate) enum ClientMessage {
    /// The event's JSON, still unparsed: it is decoded straight into an `Event`.
    Event(Box<RawValue>),
    Req {
        sub_id: String,
        filters: Vec<Value>,
        /// JSON bytes of the filters as sent (what `limits.max_filter_bytes` counts).
        filter_bytes: usize,
    },
    /// NIP-45: the same shape as a REQ.
    Count {
        sub_id: String,
        filters: Vec<Value>,
    },
    Close(String),
    Auth(Value),
    /// A verb NIP-01 does not define (NIP-77's `NEG-*`, say): served by a plugin that
    /// declares it, else answered by core (`mod.rs`). The whole message, verb first.
    Other {
        verb: String,
        message: Vec<Value>,
    },
}

pub(crate) fn parse(text: &str) -> Result<ClientMessage, Reason> {
    // Elements stay raw until we know the message type: an EVENT (the hot path) never
    // builds a JSON tree.
    let mut items: Vec<Box<RawValue>> = serde_json::from_str(text).map_err(|e| {
        if text.trim_start().starts_with('[') {
            Reason::invalid(format!("malformed JSON: {e}"))
        } else {
            Reason::invalid("a message must be a JSON array")
        }
    })?;
    if items.is_empty() {
        return Err(Reason::invalid("empty message"));
    }
    let tag: String = serde_json::from_str(items.remove(0).get())
        .map_err(|_| Reason::invalid("message type must be a string"))?;
    let value = |raw: &RawValue| -> Result<Value, Reason> {
        serde_json::from_str(raw.get()).map_err(|e| Reason::invalid(format!("malformed JSON: {e}")))
    };
    match tag.as_str() {
        "EVENT" => match <[Box<RawValue>; 1]>::try_from(items) {
            Ok([event]) => Ok(ClientMessage::Event(event)),
            Err(_) => Err(Reason::invalid("EVENT takes exactly one event")),
        },
        "AUTH" => match <[Box<RawValue>; 1]>::try_from(items) {
            Ok([event]) => Ok(ClientMessage::Auth(value(&event)?)),
            Err(_) => Err(Reason::invalid("AUTH takes exactly one event")),
        },
        "REQ" => {
            let filter_bytes = items.iter().skip(1).map(|raw| raw.get().len()).sum();
            let items = items
                .iter()
                .map(|raw| value(raw))
                .collect::<Result<Vec<_>, _>>()?;
            let sub_id = sub_id(items.first())?;
            Ok(ClientMessage::Req {
                sub_id,
                filters: items.into_iter().skip(1).collect(),
                filter_bytes,
            })
        }
        "COUNT" => {
            let items = items
                .iter()
                .map(|raw| value(raw))
                .collect::<Result<Vec<_>, _>>()?;
            let sub_id = sub_id(items.first())?;
            Ok(ClientMessage::Count {
                sub_id,
                filters: items.into_iter().skip(1).collect(),
            })
        }
        "CLOSE" => {
            if items.len() != 1 {
                return Err(Reason::invalid("CLOSE takes exactly one subscription id"));
            }
            Ok(ClientMessage::Close(sub_id(Some(&value(&items[0])?))?))
        }
        _ => {
            let mut message = vec![Value::String(tag.clone())];
            for raw in &items {
                message.push(value(raw)?);
            }
            Ok(ClientMessage::Other { verb: tag, message })
        }
    }
}

/// A close frame's reason holds at most 123 bytes (RFC 6455): `text` cut to fit, on a
/// character boundary.
pub(super) fn close_text(text: &str) -> String {
    const MAX: usize = 123;
    let mut end = text.len().min(MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

fn sub_id(value: Option<&Value>) -> Result<String, Reason> {
    match value.and_then(Value::as_str) {
        Some(id) if !id.is_empty() && id.len() <= MAX_SUB_ID => Ok(id.to_owned()),
        _ => Err(Reason::invalid(format!(
            "subscription id must be a string of 1-{MAX_SUB_ID} characters"
        ))),
    }
}

pub(crate) fn ok(id: &str, accepted: bool, message: &str) -> String {
    json!(["OK", id, accepted, message]).to_string()
}

pub(crate) fn event(sub_id: &str, event: &Event) -> String {
    // Straight to text: `json!` would first copy every field and tag into a `Value`.
    // Serializing strings and numbers into memory cannot fail.
    serde_json::to_string(&("EVENT", sub_id, event)).unwrap_or_default()
}

/// The start of every EVENT frame of subscription `sub_id`: `["EVENT","<sub_id>",`.
pub(crate) fn event_prefix(sub_id: &str) -> String {
    let sub = serde_json::to_string(sub_id).unwrap_or_default();
    format!("[\"EVENT\",{sub},")
}

/// An EVENT frame from its `prefix` ([`event_prefix`]) and the event's JSON object.
pub(crate) fn event_frame(prefix: &str, event_json: &str) -> String {
    let mut frame = String::with_capacity(prefix.len() + event_json.len() + 1);
    frame.push_str(prefix);
    frame.push_str(event_json);
    frame.push(']');
    frame
}

pub(crate) fn eose(sub_id: &str) -> String {
    json!(["EOSE", sub_id]).to_string()
}

pub(crate) fn closed(sub_id: &str, message: &str) -> String {
    json!(["CLOSED", sub_id, message]).to_string()
}

/// NIP-45's answer; `"approximate": true` only when counting stopped at the cap.
pub(crate) fn count(sub_id: &str, count: crate::store::Count) -> String {
    if count.approximate {
        json!(["COUNT", sub_id, {"count": count.count, "approximate": true}]).to_string()
    } else {
        json!(["COUNT", sub_id, {"count": count.count}]).to_string()
    }
}

/// NIP-77's refusal of a reconciliation.
pub(crate) fn neg_err(sub_id: &str, reason: &str) -> String {
    json!(["NEG-ERR", sub_id, reason]).to_string()
}

pub(crate) fn notice(message: &str) -> String {
    json!(["NOTICE", message]).to_string()
}

pub(crate) fn auth_challenge(challenge: &str) -> String {
    json!(["AUTH", challenge]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;

    /// A frame built from the prefix and the event's JSON is the frame built whole, and
    /// both read back as `["EVENT", sub_id, event]`.
    #[test]
    fn frames_agree() {
        let signed = Keys::generate().sign(1, vec![vec!["t".into(), "x".into()]], "a \"b\"\n", 1);
        let sub = "sub \"1\" \\ é";
        let json = serde_json::to_string(&signed).expect("event");
        let frame = event_frame(&event_prefix(sub), &json);
        assert_eq!(frame, event(sub, &signed));
        let back: (String, String, Event) = serde_json::from_str(&frame).expect("frame");
        assert_eq!(back, ("EVENT".to_owned(), sub.to_owned(), signed));
    }
}
